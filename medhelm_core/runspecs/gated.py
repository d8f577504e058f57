"""The RunSpec builders the gated MedHELM benchmarks share (HELM `medhelm_run_specs.py`): the LLM-jury
builder of dischargeme, medalign, mimic_rrs and mimic_bhc, and HELM's `max_length` default. Each
folder's `run_spec.py` (medhelm_core/benchmarks/gated/<name>/) holds HELM's function with its exact
signature and reads its literal text from `bench.text["run_spec"]`.

They return the RunSpec dict before run expanders are applied, with HELM's scenario-arg order.
Building a run spec reads no data file (only the judges config, as HELM does), so `--dry-run` works
without the credentialed data.
"""
from __future__ import annotations

from typing import Any

from medhelm_core.helm_types import annotator_spec, generation_adapter_spec, run_spec, scenario_spec
from medhelm_core.jury.judges import annotator_models_from_config
from medhelm_core.runspecs.metric_bundles import (
    llm_jury_metric_spec,
    summarization_metric_args,
    summarization_metric_specs,
)

# The default of HELM's `max_length` parameters: a sentinel, so the value itself comes from
# `run_spec.default_max_length` of the benchmark's text.
_DEFAULT = object()


def gated_max_length(bench, max_length: Any) -> Any:
    """`max_length` as given, or the benchmark's `run_spec.default_max_length` when left out."""
    return bench.text["run_spec"]["default_max_length"] if max_length is _DEFAULT else max_length


def build_gated_jury_run_spec(bench, scenario_args: dict[str, Any], jury_config_path: str | None) -> dict[str, Any]:
    """Generation + SummarizationMetric + LLMJuryMetric + the scenario's jury annotator."""
    text = bench.text["run_spec"]
    models = annotator_models_from_config(jury_config_path, entry=bench.name)
    annotators = [annotator_spec(text["annotator_class"],
                                 {"annotator_models": {k: dict(v) for k, v in models.items()}})]
    jury = text["jury_metric"]
    metrics = summarization_metric_specs(summarization_metric_args(text["summarization_task"])) + [
        llm_jury_metric_spec(jury["metric_name"], jury["scenario_name"], models, default_score=jury["default_score"])
    ]
    return run_spec(
        name=text["name"],
        scenario=scenario_spec(text["scenario_class"], scenario_args),
        adapter=generation_adapter_spec(**text["adapter"]),
        metric_specs=metrics,
        groups=text["groups"],
        annotators=annotators,
    )
