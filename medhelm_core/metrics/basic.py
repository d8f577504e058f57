"""HELM's basic metrics (`metrics/basic_metrics.py`, `metrics/efficiency_metrics.py`).

* `BasicGenerationMetric(names)`: per instance, in HELM's order
  `num_references`, `num_train_trials`, efficiency (`num_prompt_tokens`, `num_completion_tokens`,
  `num_output_tokens`, `training_co2_cost`, `training_energy_cost`, `inference_runtime`,
  `batch_size`, `inference_denoised_runtime`), `finish_reason_{length,stop,endoftext,unknown}`,
  `num_train_instances`, `prompt_truncated`, then (if the instance has references) `max_prob` and
  each named reference metric (+ `@k`), then `logprob`, `num_perplexity_tokens`, `num_bytes`.
  Derived: perplexity / bits_per_byte / logprob_per_byte (when there are tokens), calibration (when
  some logprob is negative).
* `BasicReferenceMetric`: only for one-request-per-reference adapters (multiple_choice_separate_*),
  which MedHELM never uses: it emits nothing otherwise.
* `InstancesPerSplitMetric`: `num_instances` per (split, sub_split, perturbation), run level only.

Efficiency notes: HELM looks the deployment up in its packaged 2022-era efficiency tables
(`efficiency_data/*.json`: openai/davinci, together/opt-175b, ...). No MedHELM deployment is in
them, so `training_co2_cost` / `training_energy_cost` are always None (count-0 stats) and
`inference_idealized_runtime` is never emitted; `inference_denoised_runtime` is emitted only for
batch results (`result.batch_size` set), as `runtime / batch_size`.
"""
from __future__ import annotations

import math
from typing import Any, Optional

from medhelm_core.metrics.base import (
    EvalContext,
    Metric,
    MetricError,
    MetricInterface,
    MetricResult,
    add_context,
    context_key,
    instance_context,
    instance_key,
    helm_metric,
    unique_stat_by_name,
)
from medhelm_core.metrics.reference_metrics import compute_reference_metrics
from medhelm_core.metrics.stat import Stat, merge_stat, metric_name

FINISH_REASONS = ("length", "stop", "endoftext", "unknown")


def _prompt_text(request: dict[str, Any]) -> str:
    mm = request.get("multimodal_prompt")
    if mm is not None:
        parts = []
        for obj in mm.get("media_objects", []):
            content_type = obj.get("content_type", "")
            if content_type.split("/")[0] == "text" and obj.get("text"):
                parts.append(obj["text"])
        return "".join(parts)
    return request.get("prompt", "")


def compute_efficiency_metrics(request_state: dict[str, Any], ctx: EvalContext) -> list[Stat]:
    result = request_state["result"]
    request = request_state["request"]

    runtime: Optional[float] = None
    batch_size: Optional[int] = None
    if result.get("request_time") is not None:
        runtime = result["request_time"]
        batch_size = 1
    if result.get("batch_request_time") is not None and result.get("batch_size") is not None:
        runtime = result["batch_request_time"]
        batch_size = result["batch_size"]

    prompt = _prompt_text(request)
    num_prompt_tokens = ctx.tokenizer.count(prompt)

    num_completion_tokens = sum(len(c.get("tokens") or []) for c in result["completions"])
    num_output_tokens = num_completion_tokens
    if request.get("echo_prompt"):
        if num_prompt_tokens != num_prompt_tokens:  # NaN: the tokenizer is not here (a re-score)
            num_output_tokens = num_prompt_tokens
        elif num_prompt_tokens <= num_output_tokens:
            num_output_tokens -= num_prompt_tokens
        else:
            num_output_tokens = 0

    # HELM's idealized/denoised runtime tables hold no MedHELM deployment (see module docstring).
    denoised_runtime: Optional[float] = None
    if runtime is not None and result.get("batch_size") is not None:
        denoised_runtime = runtime / result["batch_size"]

    stats = [
        Stat(metric_name("num_prompt_tokens")).add(num_prompt_tokens),
        Stat(metric_name("num_completion_tokens")).add(num_completion_tokens),
        Stat(metric_name("num_output_tokens")).add(num_output_tokens),
        Stat(metric_name("training_co2_cost")).add(None),
        Stat(metric_name("training_energy_cost")).add(None),
    ]
    if runtime is not None:
        stats.append(Stat(metric_name("inference_runtime")).add(runtime))
    if batch_size is not None:
        stats.append(Stat(metric_name("batch_size")).add(batch_size))
    if denoised_runtime is not None:
        stats.append(Stat(metric_name("inference_denoised_runtime")).add(denoised_runtime))
    return stats


def compute_finish_reason_metrics(request_state: dict[str, Any]) -> list[Stat]:
    sequence = request_state["result"]["completions"][0]
    finish_reason = sequence.get("finish_reason")
    if finish_reason is None or finish_reason.get("reason") not in FINISH_REASONS:
        reason = "unknown"
    else:
        reason = finish_reason["reason"]
    return [Stat(metric_name(f"finish_reason_{r}")).add(int(reason == r)) for r in FINISH_REASONS]


def compute_truncation_metrics(request_state: dict[str, Any]) -> list[Stat]:
    return [
        Stat(metric_name("num_train_instances")).add(request_state.get("num_train_instances", 0)),
        Stat(metric_name("prompt_truncated")).add(request_state.get("prompt_truncated", False)),
    ]


def compute_request_state_metrics(
    adapter_spec: dict[str, Any], request_state: dict[str, Any], ctx: EvalContext
) -> list[Stat]:
    stats = [
        Stat(metric_name("num_references")).add(len(request_state["instance"].get("references", []))),
        Stat(metric_name("num_train_trials")).add(adapter_spec.get("num_train_trials", 1)),
    ]
    stats.extend(compute_efficiency_metrics(request_state, ctx))
    stats.extend(compute_finish_reason_metrics(request_state))
    stats.extend(compute_truncation_metrics(request_state))
    return stats


def num_bytes(tokens: list[dict[str, Any]]) -> int:
    """HELM's `get_num_bytes`: `bytes:\\xNN` tokens count their escapes, others their UTF-8 length."""
    n = 0
    for token in tokens:
        text = token["text"]
        if text.startswith("bytes:"):
            n += text.count("\\x")
        else:
            n += len(text.encode("utf-8"))
    return n


def compute_language_modeling_metrics(request_state: dict[str, Any]) -> list[Stat]:
    sequence = request_state["result"]["completions"][0]
    tokens = sequence.get("tokens") or []
    num_conditioning = request_state.get("num_conditioning_tokens", 0)
    if num_conditioning > 0 and tokens[0]["text"] == "":
        tokens = tokens[1:]
    pred_tokens = tokens[num_conditioning:]
    return [
        Stat(metric_name("logprob")).add(sum(t["logprob"] for t in pred_tokens)),
        Stat(metric_name("num_perplexity_tokens")).add(len(pred_tokens)),
        Stat(metric_name("num_bytes")).add(num_bytes(pred_tokens)),
    ]


def compute_perplexity_metrics(stats: dict[tuple, Stat]) -> list[Stat]:
    logprob = unique_stat_by_name(stats.values(), "logprob")
    num_tokens = unique_stat_by_name(stats.values(), "num_perplexity_tokens")
    nbytes = unique_stat_by_name(stats.values(), "num_bytes")
    if logprob is None:
        return []
    derived: list[Stat] = []
    if num_tokens is not None and num_tokens.sum > 0:
        derived.append(Stat(metric_name("perplexity")).add(math.e ** (-logprob.sum / num_tokens.sum)))
    if nbytes is not None and nbytes.sum > 0:
        derived.append(Stat(metric_name("bits_per_byte")).add(-logprob.sum / nbytes.sum / math.log(2)))
        derived.append(Stat(metric_name("logprob_per_byte")).add(logprob.sum / nbytes.sum))
    return derived


def compute_calibration_metrics(per_instance_stats: dict[tuple, list[Stat]]) -> list[Stat]:
    """HELM's calibration metrics, computed only when some instance has a negative logprob.

    They need HELM's own dependency `uncertainty-calibration` (module `calibration`, with
    scikit-learn); API chat deployments report logprob 0, so MedHELM runs never get here.
    """
    has_logprobs = any(
        s.name["name"] == "logprob" and s.sum < 0 for stats in per_instance_stats.values() for s in stats
    )
    if not has_logprobs:
        return []
    max_probs: list[float] = []
    correct: list[int] = []
    for stats in per_instance_stats.values():
        max_prob = unique_stat_by_name(stats, "max_prob")
        correct_stat = unique_stat_by_name(stats, "exact_match")
        if correct_stat is not None and max_prob is not None:
            max_probs.append(max_prob.mean)
            correct.append(int(float(correct_stat.mean)))
    if not max_probs:
        return []
    try:
        import calibration as cal  # type: ignore
        import numpy as np
    except ImportError as e:  # pragma: no cover - depends on the optional package
        raise MetricError(
            "calibration metrics (ece_10_bin, ...) are due because the model returned logprobs, but the "
            "package 'uncertainty-calibration' (module calibration) that HELM uses is not installed"
        ) from e
    stats: list[Stat] = [
        Stat(metric_name("ece_10_bin")).add(cal.get_ece_em(max_probs, correct, num_bins=10)),
        Stat(metric_name("ece_1_bin")).add(cal.get_ece(max_probs, correct, num_bins=1)),
    ]
    coverage_acc_area, acc_top_10 = cal.get_selective_stats(max_probs, correct)
    stats.append(Stat(metric_name("selective_cov_acc_area")).add(coverage_acc_area))
    stats.append(Stat(metric_name("selective_acc@10")).add(acc_top_10))
    if np.sum(correct) == 0 or np.sum(correct) == len(correct):
        stats.append(Stat(metric_name("platt_ece_10_bin")).add(0.0))
        stats.append(Stat(metric_name("platt_ece_1_bin")).add(0.0))
    else:
        scaler, clf = cal.get_platt_scaler(np.array(max_probs), np.array(correct), get_clf=True)
        stats.append(Stat(metric_name("platt_coef")).add(clf.coef_[0][0]))
        stats.append(Stat(metric_name("platt_intercept")).add(clf.intercept_[0]))
        cal_probs = scaler(np.array(max_probs))
        stats.append(Stat(metric_name("platt_ece_10_bin")).add(cal.get_ece_em(cal_probs, correct, num_bins=10)))
        stats.append(Stat(metric_name("platt_ece_1_bin")).add(cal.get_ece(cal_probs, correct, num_bins=1)))
    return stats


@helm_metric("helm.benchmark.metrics.basic_metrics.BasicGenerationMetric")
class BasicGenerationMetric(Metric):
    def __init__(self, names: list[str]):
        self.names = list(names)

    def evaluate_generation(
        self, adapter_spec: dict[str, Any], request_state: dict[str, Any], ctx: EvalContext
    ) -> list[Stat]:
        _check_result(request_state)
        stats = compute_request_state_metrics(adapter_spec, request_state, ctx)
        if len(request_state["instance"].get("references", [])) > 0:
            stats.extend(compute_reference_metrics(self.names, adapter_spec, request_state))
        stats.extend(compute_language_modeling_metrics(request_state))
        return stats

    def derive_stats(self, stats_dict: dict[tuple, Stat]) -> list[Stat]:
        return compute_perplexity_metrics(stats_dict)

    def derive_per_instance_stats(self, per_instance_stats: dict[tuple, list[Stat]]) -> list[Stat]:
        return compute_calibration_metrics(per_instance_stats)


def _check_result(request_state: dict[str, Any]) -> None:
    result = request_state.get("result")
    if result is None or not result.get("completions"):
        iid = request_state.get("instance", {}).get("id")
        raise MetricError(
            f"request state of instance {iid!r} has no completions (result missing or failed): "
            "HELM cannot score it either"
        )


@helm_metric("helm.benchmark.metrics.basic_metrics.BasicReferenceMetric")
class BasicReferenceMetric(MetricInterface):
    """Per-reference requests only (multiple_choice_separate_*), absent from MedHELM."""

    def evaluate(self, ctx: EvalContext) -> MetricResult:
        for rs in ctx.request_states:
            if rs.get("reference_index") is not None:
                raise MetricError(
                    "BasicReferenceMetric: per-reference request states (adapter method "
                    f"{ctx.adapter_spec.get('method')!r}) are not implemented in medhelm"
                )
        return MetricResult([], [])


@helm_metric("helm.benchmark.metrics.basic_metrics.InstancesPerSplitMetric")
class InstancesPerSplitMetric(MetricInterface):
    def evaluate(self, ctx: EvalContext) -> MetricResult:
        global_stats: dict[tuple, Stat] = {}
        for trial in range(ctx.num_train_trials):
            trial_stats: dict[tuple, Stat] = {}
            per_context: dict[tuple, tuple[tuple, set]] = {}
            for rs in ctx.request_states:
                if rs.get("train_trial_index", 0) != trial:
                    continue
                context = instance_context(rs["instance"])
                ck = context_key(context)
                if ck not in per_context:
                    per_context[ck] = (context, set())
                per_context[ck][1].add(instance_key(rs["instance"]))
            for context, keys in per_context.values():
                stat = Stat(metric_name("num_instances")).add(len(keys))
                merge_stat(trial_stats, add_context(stat, context))
            for stat in trial_stats.values():
                merge_stat(global_stats, stat.take_mean())
        return MetricResult(list(global_stats.values()), [])


__all__ = [
    "BasicGenerationMetric",
    "BasicReferenceMetric",
    "InstancesPerSplitMetric",
    "compute_request_state_metrics",
    "compute_language_modeling_metrics",
]
