"""The RunSpec builders the private Stanford MedHELM benchmarks share (HELM `medhelm_run_specs.py`):
the ten `shc_*_med` (`build_shc_run_spec`) and the LLM-jury entries `mental_health`,
`chw_care_plan`, `starr_patient_instructions` (`build_jury_run_spec`). Each folder's `run_spec.py`
(`medhelm_core/benchmarks/private/<name>/`) calls them with HELM's signature; its literal text is the
folder's benchmark.yaml (`bench.text`).

They return the RunSpec dict before run expanders (model, model_deployment, max_eval_instances,
num_output_tokens, ...) are applied.
"""
from __future__ import annotations

from typing import Any

from medhelm_core.helm_types import (
    annotator_spec,
    generation_adapter_spec,
    multiple_choice_joint_adapter_spec,
    run_spec,
    scenario_spec,
)
from medhelm_core.jury.judges import annotator_models_from_config
from medhelm_core.runspecs.metric_bundles import (
    exact_match_metric_specs,
    llm_jury_metric_spec,
    summarization_metric_args,
    summarization_metric_specs,
)


# ----------------------------------------------------------------------------- shc_*_med
def build_shc_run_spec(bench, data_path: Any) -> dict[str, Any]:
    """`get_shc_<x>_spec(data_path)`: MC joint with HELM's default 5 train instances / max_tokens 1."""
    text = bench.text["run_spec"]
    return run_spec(
        name=text["name"],
        scenario=scenario_spec(text["scenario_class"], {"data_path": data_path}),
        adapter=multiple_choice_joint_adapter_spec(**text["adapter"]),
        metric_specs=exact_match_metric_specs(),
        groups=text["groups"],
    )


# ----------------------------------------------------------------------------- jury entries
def build_jury_run_spec(bench, data_path: Any, jury_config_path: str | None) -> dict[str, Any]:
    """Generation + SummarizationMetric + LLMJuryMetric + the scenario's jury annotator."""
    text = bench.text["run_spec"]
    scenario = scenario_spec(text["scenario_class"], {"data_path": data_path})
    adapter = generation_adapter_spec(**text["adapter"])
    models = annotator_models_from_config(jury_config_path, entry=bench.name)
    annotators = [annotator_spec(text["annotator_class"], {"annotator_models": {k: dict(v) for k, v in models.items()}})]
    jury = text["jury_metric"]
    metrics = summarization_metric_specs(summarization_metric_args(text["summarization_task"])) + [
        llm_jury_metric_spec(jury["metric_name"], jury["scenario_name"], models, default_score=jury["default_score"])
    ]
    return run_spec(
        name=text["name"],
        scenario=scenario,
        adapter=adapter,
        metric_specs=metrics,
        groups=text["groups"],
        annotators=annotators,
    )
