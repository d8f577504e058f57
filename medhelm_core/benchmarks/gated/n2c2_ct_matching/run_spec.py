"""`n2c2_ct_matching` (HELM `get_n2c2_ct_matching_spec`): joint multiple choice (yes/no) and the
exact-match metrics."""
from __future__ import annotations

from typing import Any

from medhelm_core.catalog import Benchmark
from medhelm_core.helm_types import multiple_choice_joint_adapter_spec, run_spec as make_run_spec, scenario_spec
from medhelm_core.runspecs.metric_bundles import exact_match_metric_specs


def run_spec(bench: Benchmark, data_path: Any, subject: Any) -> dict[str, Any]:
    """`n2c2_ct_matching:data_path=<folder>,subject=<criterion>` (name: n2c2_ct_matching:subject=<criterion>)."""
    text = bench.text["run_spec"]
    return make_run_spec(
        name=text["name"].format(subject=subject),
        scenario=scenario_spec(text["scenario_class"], {"data_path": data_path, "subject": subject}),
        adapter=multiple_choice_joint_adapter_spec(**text["adapter"]),
        metric_specs=exact_match_metric_specs(),
        groups=text["groups"],
    )
