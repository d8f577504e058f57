"""Run-spec functions for the gated MedHELM entries (HELM `medhelm_run_specs.py`): ehrshot, medalign,
dischargeme, mimic_rrs, mimic_bhc, n2c2_ct_matching, mimiciv_billing_code.

They return the RunSpec dict before run expanders are applied, with HELM's scenario-arg order.
Literal text: medhelm_core/benchmarks/gated/<name>.yaml. Building a run spec reads no data file
(only the judges config, as HELM does), so `--dry-run` works without the credentialed data.
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
from medhelm_core.registry import run_spec_function
from medhelm_core.runspecs.metric_bundles import (
    exact_match_metric_specs,
    generic_metric_specs,
    llm_jury_metric_spec,
    summarization_metric_args,
    summarization_metric_specs,
)
from medhelm_core.scenarios.gated._gated import gated_text

_DEFAULT = object()


def _text(name: str) -> dict[str, Any]:
    return gated_text(name)["run_spec"]


def _max_length(name: str, max_length: Any) -> Any:
    return _text(name)["default_max_length"] if max_length is _DEFAULT else max_length


def build_gated_jury_run_spec(name: str, scenario_args: dict[str, Any], jury_config_path: str | None) -> dict[str, Any]:
    """Generation + SummarizationMetric + LLMJuryMetric + the scenario's jury annotator."""
    text = _text(name)
    models = annotator_models_from_config(jury_config_path, entry=name)
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


@run_spec_function("ehrshot")
def get_ehrshot_spec(subject: Any, data_path: Any, max_length: Any = _DEFAULT) -> dict[str, Any]:
    """`ehrshot:subject=<task>,data_path=<MEDS folder>[,max_length=100000]` (name: ehrshot:subject=<task>)."""
    text = _text("ehrshot")
    args = {"subject": subject, "max_length": _max_length("ehrshot", max_length), "data_path": data_path}
    return run_spec(
        name=text["name"].format(subject=subject),
        scenario=scenario_spec(text["scenario_class"], args),
        adapter=multiple_choice_joint_adapter_spec(**text["adapter"]),
        metric_specs=exact_match_metric_specs(),
        groups=text["groups"],
    )


@run_spec_function("medalign")
def get_medalign_spec(data_path: Any, jury_config_path: str | None = None, max_length: Any = _DEFAULT) -> dict[str, Any]:
    """`medalign:data_path=<folder>[,jury_config_path=<yaml>][,max_length=100000]`."""
    args = {"max_length": _max_length("medalign", max_length), "data_path": data_path}
    return build_gated_jury_run_spec("medalign", args, jury_config_path)


@run_spec_function("dischargeme")
def get_dischargeme_spec(data_path: Any, jury_config_path: str | None = None) -> dict[str, Any]:
    """`dischargeme:data_path=<physionet.org folder>[,jury_config_path=<yaml>]`."""
    return build_gated_jury_run_spec("dischargeme", {"data_path": data_path}, jury_config_path)


@run_spec_function("mimic_rrs")
def get_mimic_rrs_spec(data_path: Any, jury_config_path: str | None = None) -> dict[str, Any]:
    """`mimic_rrs:data_path=<folder with test.findings.tok/test.impression.tok>[,jury_config_path=<yaml>]`."""
    return build_gated_jury_run_spec("mimic_rrs", {"data_path": data_path}, jury_config_path)


@run_spec_function("mimic_bhc")
def get_mimic_bhc_spec(data_path: Any, jury_config_path: str | None = None) -> dict[str, Any]:
    """`mimic_bhc:data_path=<JSON-lines file>[,jury_config_path=<yaml>]`."""
    return build_gated_jury_run_spec("mimic_bhc", {"data_path": data_path}, jury_config_path)


@run_spec_function("n2c2_ct_matching")
def get_n2c2_ct_matching_spec(data_path: Any, subject: Any) -> dict[str, Any]:
    """`n2c2_ct_matching:data_path=<folder>,subject=<criterion>` (name: n2c2_ct_matching:subject=<criterion>)."""
    text = _text("n2c2_ct_matching")
    return run_spec(
        name=text["name"].format(subject=subject),
        scenario=scenario_spec(text["scenario_class"], {"data_path": data_path, "subject": subject}),
        adapter=multiple_choice_joint_adapter_spec(**text["adapter"]),
        metric_specs=exact_match_metric_specs(),
        groups=text["groups"],
    )


@run_spec_function("mimiciv_billing_code")
def get_mimiciv_billing_code_spec(data_path: Any) -> dict[str, Any]:
    """`mimiciv_billing_code:data_path=<mimiciv_icd10.feather>`: MIMICIVBillingCodeMetric + generic metrics."""
    text = _text("mimiciv_billing_code")
    return run_spec(
        name=text["name"],
        scenario=scenario_spec(text["scenario_class"], {"data_path": data_path}),
        adapter=generation_adapter_spec(**text["adapter"]),
        metric_specs=[metric_spec(text["metric_class"], {})] + generic_metric_specs(),
        groups=text["groups"],
    )
