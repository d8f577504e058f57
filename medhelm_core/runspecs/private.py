"""The RunSpec builder the ten private `shc_*_med` benchmarks share (HELM `medhelm_run_specs.py`;
the LLM-jury entries `mental_health`, `chw_care_plan`, `starr_patient_instructions` use
`runspecs.jury_entries.build_jury_run_spec`). Each folder's `run_spec.py`
(`medhelm_core/benchmarks/private/<name>/`) calls them with HELM's signature; its literal text is the
folder's benchmark.yaml (`bench.text`).

They return the RunSpec dict before run expanders (model, model_deployment, max_eval_instances,
num_output_tokens, ...) are applied.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from medhelm_core.helm_types import multiple_choice_joint_adapter_spec, run_spec, scenario_spec
from medhelm_core.runspecs.metric_bundles import exact_match_metric_specs

if TYPE_CHECKING:  # for annotations only (nothing imported at run time)
    from medhelm_core.catalog import Benchmark


# ----------------------------------------------------------------------------- shc_*_med
def build_shc_run_spec(bench: Benchmark, data_path: Any) -> dict[str, Any]:
    """`get_shc_<x>_spec(data_path)`: MC joint with HELM's default 5 train instances / max_tokens 1."""
    text = bench.text["run_spec"]
    return run_spec(
        name=text["name"],
        scenario=scenario_spec(text["scenario_class"], {"data_path": data_path}),
        adapter=multiple_choice_joint_adapter_spec(**text["adapter"]),
        metric_specs=exact_match_metric_specs(),
        groups=text["groups"],
    )
