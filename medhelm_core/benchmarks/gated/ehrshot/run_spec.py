"""`ehrshot` (HELM `get_ehrshot_spec`): joint multiple choice (yes/no) and the exact-match metrics."""
from __future__ import annotations

from typing import Any

from medhelm_core.catalog import Benchmark
from medhelm_core.helm_types import multiple_choice_joint_adapter_spec, run_spec as make_run_spec, scenario_spec
from medhelm_core.runspecs.gated import BENCHMARK_DEFAULT, gated_max_length
from medhelm_core.runspecs.metric_bundles import exact_match_metric_specs


def run_spec(bench: Benchmark, subject: Any, data_path: Any, max_length: Any = BENCHMARK_DEFAULT) -> dict[str, Any]:
    """`ehrshot:subject=<task>,data_path=<MEDS folder>[,max_length=100000]` (name: ehrshot:subject=<task>)."""
    text = bench.text["run_spec"]
    args = {"subject": subject, "max_length": gated_max_length(bench, max_length), "data_path": data_path}
    return make_run_spec(
        name=text["name"].format(subject=subject),
        scenario=scenario_spec(text["scenario_class"], args),
        adapter=multiple_choice_joint_adapter_spec(**text["adapter"]),
        metric_specs=exact_match_metric_specs(),
        groups=text["groups"],
    )
