"""`clear:condition=<c>,data_path=<dir>` (HELM `get_clear_spec`): multiple choice joint, the
exact-match bundle."""
from __future__ import annotations

from typing import Any

from medhelm_core.catalog import Benchmark
from medhelm_core.errors import MedhelmError
from medhelm_core.helm_types import multiple_choice_joint_adapter_spec, run_spec as make_run_spec, scenario_spec
from medhelm_core.runspecs.metric_bundles import exact_match_metric_specs


def run_spec(bench: Benchmark, condition: Any, data_path: Any) -> dict[str, Any]:
    """`clear:condition=<c>,data_path=<dir>`. The condition is validated when the scenario loads
    (as in HELM); the instructions use `condition.replace("_", " ")`, not the scenario's display text."""
    if not isinstance(condition, str):
        raise MedhelmError(f"{bench.name}: condition must be a string, got {condition!r}")
    text = bench.text["run_spec"]
    adapter = dict(text["adapter"])
    adapter["instructions"] = adapter["instructions"].format(condition_display=condition.replace("_", " "))
    return make_run_spec(
        name=text["name"].format(condition=condition),
        scenario=scenario_spec(text["scenario_class"], {"condition": condition, "data_path": data_path}),
        adapter=multiple_choice_joint_adapter_spec(**adapter),
        metric_specs=exact_match_metric_specs(),
        groups=text["groups"],
    )
