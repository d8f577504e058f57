"""Run-spec functions for the 16 public MedHELM run entries (HELM `medhelm_run_specs.py`):
aci_bench, ehr_sql, head_qa, med_dialog, medbullets, medcalc_bench, medec, medhallu,
medhelm_med_mcqa, medhelm_med_qa, medi_qa, medication_qa, mtsamples_procedures,
mtsamples_replicate, pubmed_qa, race_based_med.

Each returns the RunSpec dict before run expanders are applied; signatures are HELM's, so a run
entry with an argument HELM's function does not take is refused. Literal text (instructions,
output cues, names, groups, class names): medhelm_core/benchmarks/public/<entry>.yaml.

Metric bundles (`run_spec.metric_bundle` in the YAML):
* `exact_match`: the scenario's own metric classes (if any) + `get_exact_match_metric_specs()`;
* `basic_empty`: the scenario's own metric classes + `get_basic_metric_specs([])` (medec);
* `summarization_jury`: `get_summarization_metric_specs({task, device, ...})` + `LLMJuryMetric`
  (`<entry>_accuracy`, default 1.0), with the scenario's jury annotator on the judges of
  `jury_config_path` (HELM's judges.yaml by default).
"""
from __future__ import annotations

from typing import Any

from medhelm_core.helm_types import (
    annotator_spec,
    generation_adapter_spec,
    metric_spec,
    multiple_choice_joint_adapter_spec,
    run_spec,
    scenario_spec,
)
from medhelm_core.judges import annotator_models_from_config
from medhelm_core.registry import MedhelmError, run_spec_function
from medhelm_core.runspecs.metric_bundles import (
    basic_metric_specs,
    exact_match_metric_specs,
    llm_jury_metric_spec,
    summarization_metric_args,
    summarization_metric_specs,
)
from medhelm_core.scenarios.public._base import text as public_text


def _adapter(spec: dict[str, Any]) -> dict[str, Any]:
    kwargs = dict(spec["adapter"])
    if spec["adapter_method"] == "generation":
        return generation_adapter_spec(**kwargs)
    if spec["adapter_method"] == "multiple_choice_joint":
        return multiple_choice_joint_adapter_spec(**kwargs)
    raise MedhelmError(f"unknown adapter method {spec['adapter_method']!r}")  # pragma: no cover


def build_public_run_spec(entry: str, scenario_args: dict[str, Any] | None = None,
                          jury_config_path: str | None = None, name_args: dict[str, Any] | None = None) -> dict:
    spec = public_text(entry)["run_spec"]
    metrics = [metric_spec(cls, {}) for cls in spec.get("metric_classes", [])]
    annotators = None
    bundle = spec["metric_bundle"]
    if bundle == "exact_match":
        metrics += exact_match_metric_specs()
    elif bundle == "basic_empty":
        metrics += basic_metric_specs([])
    elif bundle == "summarization_jury":
        models = annotator_models_from_config(jury_config_path, entry=entry)
        jury = spec["jury_metric"]
        metrics = summarization_metric_specs(summarization_metric_args(spec["summarization_task"])) + [
            llm_jury_metric_spec(jury["metric_name"], jury["scenario_name"], models, default_score=jury["default_score"])]
        annotators = [annotator_spec(spec["annotator_class"], {"annotator_models": {k: dict(v) for k, v in models.items()}})]
    else:  # pragma: no cover - the YAML files are ours
        raise MedhelmError(f"{entry}: unknown metric bundle {bundle!r}")
    if bundle != "summarization_jury" and spec.get("annotator_class"):
        annotators = [annotator_spec(spec["annotator_class"])]
    return run_spec(
        name=spec["name"].format(**(name_args or {})),
        scenario=scenario_spec(spec["scenario_class"], scenario_args or {}),
        adapter=_adapter(spec),
        metric_specs=metrics,
        groups=spec["groups"],
        annotators=annotators,
    )


@run_spec_function("aci_bench")
def get_aci_bench_run_spec(jury_config_path: str | None = None) -> dict:
    return build_public_run_spec("aci_bench", jury_config_path=jury_config_path)


@run_spec_function("ehr_sql")
def get_ehr_sql_run_spec() -> dict:
    return build_public_run_spec("ehr_sql")


@run_spec_function("head_qa")
def get_head_qa_run_spec(language: str = "en", category: Any = None) -> dict:
    """Name `head_qa:language=<l>,category=<c>` (HELM writes `category=None` literally)."""
    return build_public_run_spec("head_qa", {"language": language, "category": category},
                                 name_args={"language": language, "category": category})


@run_spec_function("med_dialog")
def get_med_dialog_spec(subset: Any, jury_config_path: str | None = None) -> dict:
    """Name `med_dialog,subset=<s>` (a comma, so the expanders append with `:`)."""
    return build_public_run_spec("med_dialog", {"subset": subset}, jury_config_path, name_args={"subset": subset})


@run_spec_function("medbullets")
def get_medbullets_run_spec() -> dict:
    return build_public_run_spec("medbullets")


@run_spec_function("medcalc_bench")
def get_medcalc_bench_spec(version: Any = None) -> dict:
    """As HELM: `version` goes into the scenario args (which HELM's scenario then rejects) and the
    name becomes `medcalc_bench:version=<v>`."""
    spec = build_public_run_spec("medcalc_bench", {} if version is None else {"version": version})
    if version is not None:
        spec["name"] = f"{spec['name']}:version={version}"
    return spec


@run_spec_function("medec")
def get_medec_run_spec() -> dict:
    return build_public_run_spec("medec")


@run_spec_function("medhallu")
def get_medhallu_spec() -> dict:
    return build_public_run_spec("medhallu")


@run_spec_function("medhelm_med_mcqa")
def get_medhelm_med_mcqa_spec() -> dict:
    return build_public_run_spec("medhelm_med_mcqa")


@run_spec_function("medhelm_med_qa")
def get_medhelm_med_qa_spec() -> dict:
    return build_public_run_spec("medhelm_med_qa")


@run_spec_function("medi_qa")
def get_medi_qa_spec(jury_config_path: str | None = None) -> dict:
    return build_public_run_spec("medi_qa", jury_config_path=jury_config_path)


@run_spec_function("medication_qa")
def get_medication_qa_spec(jury_config_path: str | None = None) -> dict:
    return build_public_run_spec("medication_qa", jury_config_path=jury_config_path)


@run_spec_function("mtsamples_procedures")
def get_mtsamples_procedures_spec(jury_config_path: str | None = None) -> dict:
    return build_public_run_spec("mtsamples_procedures", jury_config_path=jury_config_path)


@run_spec_function("mtsamples_replicate")
def get_mtsamples_spec(jury_config_path: str | None = None) -> dict:
    return build_public_run_spec("mtsamples_replicate", jury_config_path=jury_config_path)


@run_spec_function("pubmed_qa")
def get_pubmed_qa_spec() -> dict:
    return build_public_run_spec("pubmed_qa")


@run_spec_function("race_based_med")
def get_race_based_med_spec() -> dict:
    return build_public_run_spec("race_based_med")
