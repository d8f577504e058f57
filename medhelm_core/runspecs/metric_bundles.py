"""Builders for the metric-spec bundles HELM's MedHELM run specs use (`common_metric_specs.py`).

Class names and metric names: metric_bundles.yaml beside this file.
"""
from __future__ import annotations

import copy
import functools
from typing import Any


from medhelm_core.errors import MedhelmError
from medhelm_core.helm_types import metric_spec
from medhelm_core.hf_hub import torch_device_name
from medhelm_core.resources import METRIC_BUNDLES_PATH
from medhelm_core.yamlio import safe_load

# HELM evaluates `helm.common.gpu_utils.get_torch_device_name()` when it builds the RunSpec: "cuda"
# iff torch sees a GPU. The builders write "cpu"; `with_metric_device` then writes the device the
# selection asks for (`metric_device`: "auto" is HELM's rule on this machine).
TORCH_DEVICE = "cpu"
METRIC_DEVICES = ("auto", "cpu", "cuda")

_NO_DEFAULT = object()


@functools.cache
def _text() -> dict[str, Any]:
    return safe_load(METRIC_BUNDLES_PATH.read_text(encoding="utf-8"))


def _cls(key: str) -> str:
    return _text()["classes"][key]


def basic_generation_metric_specs(names: list[str]) -> list[dict[str, Any]]:
    return [metric_spec(_cls("basic_generation"), {"names": list(names)})]


def basic_reference_metric_specs() -> list[dict[str, Any]]:
    return [metric_spec(_cls("basic_reference"), {})]


def generic_metric_specs() -> list[dict[str, Any]]:
    return [metric_spec(_cls("instances_per_split"), {})]


def basic_metric_specs(names: list[str]) -> list[dict[str, Any]]:
    """HELM `get_basic_metric_specs(names)`."""
    return basic_generation_metric_specs(names) + basic_reference_metric_specs() + generic_metric_specs()


def exact_match_metric_specs() -> list[dict[str, Any]]:
    """HELM `get_exact_match_metric_specs()`."""
    return basic_metric_specs(list(_text()["exact_match_names"]))


def summarization_metric_args(task: Any, device: str = TORCH_DEVICE) -> dict[str, Any]:
    """The `metric_args` dict every MedHELM spec builds for SummarizationMetric (key order as HELM)."""
    fixed = _text()["summarization"]
    return {
        "task": task,
        "device": device,
        "bertscore_model": fixed["bertscore_model"],
        "rescale_with_baseline": fixed["rescale_with_baseline"],
    }


def with_metric_device(spec: dict[str, Any], device: str) -> dict[str, Any]:
    """`spec` with every SummarizationMetric's `device` set as `device` says ("auto": as HELM would
    write it on this machine). The run's name does not change: HELM's names never carry the device."""
    if device not in METRIC_DEVICES:
        raise MedhelmError(f"--metric-device {device!r}: expected one of {', '.join(METRIC_DEVICES)}")
    cls = _cls("summarization")
    if not any(m.get("class_name") == cls for m in spec.get("metric_specs", [])):
        return spec
    value = torch_device_name() if device == "auto" else device
    out = copy.deepcopy(spec)
    for m in out["metric_specs"]:
        if m.get("class_name") == cls and "device" in m.get("args", {}):
            m["args"]["device"] = value
    return out


def summarization_metric_specs(args: dict[str, Any]) -> list[dict[str, Any]]:
    """HELM `get_summarization_metric_specs(args)`: SummarizationMetric + basic([])."""
    return [metric_spec(_cls("summarization"), dict(args))] + basic_metric_specs([])


def llm_jury_metric_spec(
    metric_name: str,
    scenario_name: Any,
    annotator_models: dict[str, dict[str, str]],
    default_score: Any = _NO_DEFAULT,
) -> dict[str, Any]:
    """HELM's LLMJuryMetric spec; `default_score` is recorded only when passed (the configurable
    benchmark leaves it out, so LLMJuryMetric's own default 0.0 applies)."""
    args: dict[str, Any] = {
        "metric_name": metric_name,
        "scenario_name": scenario_name,
        "annotator_models": copy.deepcopy(annotator_models),
    }
    if default_score is not _NO_DEFAULT:
        args["default_score"] = default_score
    return metric_spec(_cls("llm_jury"), args)
