"""The RunSpec of MedHELM's LLM-jury entries (HELM `medhelm_run_specs.py`), for every tier: HELM's
summarization metrics plus `LLMJuryMetric`, and the benchmark's jury annotator on the judges of
`jury_config_path` (HELM's judges.yaml by default). The names come from the benchmark's text:
`run_spec.jury_metric`, `summarization_task`, `annotator_class`."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from medhelm_core.helm_types import adapter_spec, annotator_spec, generation_adapter_spec, run_spec, scenario_spec
from medhelm_core.jury.judges import annotator_models_from_config
from medhelm_core.runspecs.metric_bundles import (
    basic_metric_specs,
    llm_jury_metric_spec,
    summarization_metric_args,
    summarization_metric_specs,
)

if TYPE_CHECKING:  # for annotations only (nothing imported at run time)
    from medhelm_core.catalog import Benchmark


def jury_specs(bench: Benchmark, jury_config_path: str | None) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(metric specs, annotator specs) of a jury entry."""
    text = bench.text["run_spec"]
    models = annotator_models_from_config(jury_config_path, entry=bench.name)
    jury = text["jury_metric"]
    metrics = summarization_metric_specs(summarization_metric_args(text["summarization_task"])) + [
        llm_jury_metric_spec(jury["metric_name"], jury["scenario_name"], models, default_score=jury["default_score"])]
    annotators = [annotator_spec(text["annotator_class"], {"annotator_models": {k: dict(v) for k, v in models.items()}})]
    return metrics, annotators


def build_jury_run_spec(bench: Benchmark, scenario_args: dict[str, Any], jury_config_path: str | None) -> dict[str, Any]:
    """Generation + SummarizationMetric + LLMJuryMetric + the benchmark's jury annotator."""
    text = bench.text["run_spec"]
    metrics, annotators = jury_specs(bench, jury_config_path)
    return run_spec(
        name=text["name"],
        scenario=scenario_spec(text["scenario_class"], scenario_args),
        adapter=generation_adapter_spec(**text["adapter"]),
        metric_specs=metrics,
        groups=text["groups"],
        annotators=annotators,
    )


def build_rubric_jury_run_spec(bench: Benchmark, jury_config_path: str | None = None) -> dict[str, Any]:
    """medhelm 0.8.0's HealthBench entries: the adapter as the text gives it (HELM's chat adapter),
    LLMJuryMetric plus `get_basic_metric_specs([])` (no summarization metrics), and the benchmark's
    rubric annotator on the judges of `jury_config_path`."""
    text = bench.text["run_spec"]
    models = annotator_models_from_config(jury_config_path, entry=bench.name)
    jury = text["jury_metric"]
    metrics = [llm_jury_metric_spec(jury["metric_name"], jury["scenario_name"], models,
                                    default_score=jury["default_score"])] + basic_metric_specs([])
    return run_spec(
        name=text["name"],
        scenario=scenario_spec(text["scenario_class"], {}),
        adapter=adapter_spec(**text["adapter"]),
        metric_specs=metrics,
        groups=text["groups"],
        annotators=[annotator_spec(text["annotator_class"], {"annotator_models": {k: dict(v) for k, v in models.items()}})],
    )
