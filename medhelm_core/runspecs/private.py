"""Run-spec functions for the private Stanford MedHELM entries (HELM `medhelm_run_specs.py`):
the ten `shc_*_med`, `clear`, `mental_health`, `chw_care_plan`, `starr_patient_instructions`.

They return the RunSpec dict before run expanders (model, model_deployment, max_eval_instances,
num_output_tokens, ...) are applied. Literal text: medhelm_core/benchmarks/<name>.yaml.
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
from medhelm_core.judges import annotator_models_from_config
from medhelm_core.registry import MedhelmError, run_spec_function
from medhelm_core.runspecs.metric_bundles import (
    exact_match_metric_specs,
    llm_jury_metric_spec,
    summarization_metric_args,
    summarization_metric_specs,
)
from medhelm_core.scenarios._common import literal
from medhelm_core.scenarios.shc import SHC_ENTRIES, shc_text


# ----------------------------------------------------------------------------- shc_*_med
def build_shc_run_spec(entry: str, data_path: Any) -> dict[str, Any]:
    """`get_shc_<x>_spec(data_path)`: MC joint with HELM's default 5 train instances / max_tokens 1."""
    text = shc_text(entry)["run_spec"]
    return run_spec(
        name=text["name"],
        scenario=scenario_spec(text["scenario_class"], {"data_path": data_path}),
        adapter=multiple_choice_joint_adapter_spec(**text["adapter"]),
        metric_specs=exact_match_metric_specs(),
        groups=text["groups"],
    )


def _register_shc(entry: str) -> None:
    def shc_run_spec(data_path: Any) -> dict[str, Any]:
        return build_shc_run_spec(entry, data_path)

    shc_run_spec.__name__ = shc_run_spec.__qualname__ = f"get_{entry}_spec"
    shc_run_spec.__doc__ = f"RunSpec for `{entry}:data_path=...` (HELM `get_{entry[:-4]}_spec`)."
    run_spec_function(entry)(shc_run_spec)


for _entry in SHC_ENTRIES:
    _register_shc(_entry)


# ----------------------------------------------------------------------------- clear
@run_spec_function("clear")
def get_clear_spec(condition: Any, data_path: Any) -> dict[str, Any]:
    """`clear:condition=<c>,data_path=<dir>`. The condition is validated when the scenario loads
    (as in HELM); the instructions use `condition.replace("_", " ")`, not the scenario's display text."""
    if not isinstance(condition, str):
        raise MedhelmError(f"clear: condition must be a string, got {condition!r}")
    text = literal("clear")["run_spec"]
    adapter = dict(text["adapter"])
    adapter["instructions"] = adapter["instructions"].format(condition_display=condition.replace("_", " "))
    return run_spec(
        name=text["name"].format(condition=condition),
        scenario=scenario_spec(text["scenario_class"], {"condition": condition, "data_path": data_path}),
        adapter=multiple_choice_joint_adapter_spec(**adapter),
        metric_specs=exact_match_metric_specs(),
        groups=text["groups"],
    )


# ----------------------------------------------------------------------------- jury entries
def build_jury_run_spec(entry: str, data_path: Any, jury_config_path: str | None) -> dict[str, Any]:
    """Generation + SummarizationMetric + LLMJuryMetric + the scenario's jury annotator."""
    text = literal(entry)["run_spec"]
    scenario = scenario_spec(text["scenario_class"], {"data_path": data_path})
    adapter = generation_adapter_spec(**text["adapter"])
    models = annotator_models_from_config(jury_config_path, entry=entry)
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


@run_spec_function("mental_health")
def get_mental_health_spec(data_path: Any, jury_config_path: str | None = None) -> dict[str, Any]:
    """`mental_health:data_path=<csv>[,jury_config_path=<yaml>]` (note: max_train_instances stays 5)."""
    return build_jury_run_spec("mental_health", data_path, jury_config_path)


@run_spec_function("chw_care_plan")
def get_chw_care_plan_run_spec(data_path: Any, jury_config_path: str | None = None) -> dict[str, Any]:
    """`chw_care_plan:data_path=<csv>[,jury_config_path=<yaml>]`; groups ["clinical", "chw_care_plan"]."""
    return build_jury_run_spec("chw_care_plan", data_path, jury_config_path)


@run_spec_function("starr_patient_instructions")
def get_starr_patient_instructions_run_spec(data_path: Any, jury_config_path: str | None = None) -> dict[str, Any]:
    """`starr_patient_instructions:data_path=<csv>[,jury_config_path=<yaml>]`."""
    return build_jury_run_spec("starr_patient_instructions", data_path, jury_config_path)
