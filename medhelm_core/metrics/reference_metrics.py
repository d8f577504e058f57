"""HELM's reference-match scoring (`metrics/evaluate_reference_metrics.py::compute_reference_metrics`).

golds = references tagged `correct`; preds = completions sorted by `-logprob` (stable), each
`.text.strip()`, mapped through `output_mapping` for multiple-choice (after
`output_mapping_pattern`, if any): the stripped completion must be exactly a key (`"A"`), anything
else (`"A."`) maps to None and scores 0. `<name>` = max over golds of f(gold, preds[0]);
`<name>@<num_outputs>` (only when num_outputs != 1) = max over golds and all preds.
`max_prob` = exp(logprob of the top completion).
"""
from __future__ import annotations

import re
import string
from typing import Any, Callable, Optional

import numpy as np

from medhelm_core.metrics.rouge import rouge_fmeasure
from medhelm_core.metrics.stat import Stat, metric_name

CORRECT_TAG = "correct"

_PUNCTUATION = frozenset(string.punctuation)
_ARTICLES = re.compile(r"\b(a|an|the)\b")


def normalize_text(text: str, should_remove_articles: bool = True) -> str:
    """QuAC normalisation: lower, drop punctuation, articles -> space, collapse whitespace."""
    text = "".join(ch for ch in text.lower() if ch not in _PUNCTUATION)
    if should_remove_articles:
        text = _ARTICLES.sub(" ", text)
    return " ".join(text.split())


def exact_match(gold: str, pred: Optional[str]) -> float:
    if not pred:
        return 0
    return 1 if gold.strip() == pred.strip() else 0


def quasi_exact_match(gold: str, pred: Optional[str]) -> float:
    if not pred:
        return 0
    return 1 if normalize_text(gold) == normalize_text(pred) else 0


def quasi_leave_articles_exact_match(gold: str, pred: Optional[str]) -> float:
    if not pred:
        return 0
    return 1 if normalize_text(gold, False) == normalize_text(pred, False) else 0


def prefix_exact_match(gold: str, pred: Optional[str]) -> float:
    if not pred:
        return 0
    return 1 if pred.strip().startswith(gold.strip()) else 0


def quasi_prefix_exact_match(gold: str, pred: Optional[str]) -> float:
    if not pred:
        return 0
    return 1 if normalize_text(pred).startswith(normalize_text(gold)) else 0


def _f_measure(reference: set, test: set, alpha: float = 0.5) -> Optional[float]:
    """nltk.metrics.scores.f_measure."""
    if len(test) == 0 or len(reference) == 0:
        return None
    overlap = len(reference & test)
    p = overlap / len(test)
    r = overlap / len(reference)
    if p == 0 or r == 0:
        return 0
    return 1.0 / (alpha / p + (1 - alpha) / r)


def f1_score(gold: str, pred: str) -> float:
    ret = _f_measure(set(normalize_text(gold).split()), set(normalize_text(pred).split()))
    if ret is None:
        return 0.0
    return ret


def exact_match_indicator(gold: str, pred: str, indicator: str = " ") -> float:
    pred = pred.split(indicator)[-1].strip()
    gold = gold.split(indicator)[-1].strip()
    return exact_match(gold, pred)


_FINAL_NUMBER = re.compile(r"-?[\d,]+(?:.\d+)?")


def final_number_exact_match(gold: str, pred: str) -> float:
    def final_number(x: str) -> str:
        matches = _FINAL_NUMBER.findall(x)
        if not matches:
            return ""
        return matches[-1].replace(",", "")

    return exact_match(final_number(gold), final_number(pred))


def _rouge_function(rouge_type: str) -> Callable[[str, str], float]:
    def score(gold: str, pred: str) -> float:
        return rouge_fmeasure(rouge_type, gold, pred)

    return score


# The names HELM accepts in BasicGenerationMetric(names=[...]) that are implemented here.
METRIC_FUNCTIONS: dict[str, Callable[[str, Any], float]] = {
    "exact_match": exact_match,
    "quasi_exact_match": quasi_exact_match,
    "quasi_leave_articles_exact_match": quasi_leave_articles_exact_match,
    "prefix_exact_match": prefix_exact_match,
    "quasi_prefix_exact_match": quasi_prefix_exact_match,
    "exact_match_indicator": exact_match_indicator,
    "final_number_exact_match": final_number_exact_match,
    "f1_score": f1_score,
    "rouge_1": _rouge_function("rouge1"),
    "rouge_2": _rouge_function("rouge2"),
    "rouge_l": _rouge_function("rougeL"),
}

# Names HELM knows but this project does not implement (an explicit error, never a silent skip).
HELM_ONLY_METRIC_FUNCTIONS = frozenset(
    {
        "exact_set_match", "iou_set_match", "f1_set_match", "math_equiv", "math_equiv_chain_of_thought",
        "code_eval_acc", "pass", "cider", "bleu_1", "bleu_4", "chinese_bleu_1", "chinese_rouge_1",
        "chinese_rouge_2", "cleva_math_result_match", "absolute_value_difference", "wer_score", "mer_score",
        "wip_score", "cer_score", "chinese_wer_score", "chinese_mer_score", "chinese_wip_score",
        "chinese_cer_score",
    }
)


def apply_output_mapping_pattern(pattern: str, prediction: str) -> str:
    match = re.search(pattern, prediction)
    if not match:
        return ""
    if match.groups():
        return match.group(1)
    return match.group(0)


def map_prediction(request_state: dict[str, Any], adapter_spec: dict[str, Any], pred: str) -> Optional[str]:
    """The multiple-choice mapping of one stripped completion (identity without output_mapping)."""
    mapping = request_state.get("output_mapping")
    if mapping is None:
        return pred
    pattern = adapter_spec.get("output_mapping_pattern")
    if pattern:
        pred = apply_output_mapping_pattern(pattern, pred)
    return mapping.get(pred)


def compute_reference_metrics(
    names: list[str], adapter_spec: dict[str, Any], request_state: dict[str, Any]
) -> list[Stat]:
    golds = [r for r in request_state["instance"]["references"] if CORRECT_TAG in r.get("tags", [])]
    if not golds:
        raise ValueError(
            f"instance {request_state['instance'].get('id')!r} has references but none tagged 'correct'"
        )
    completions = request_state["result"]["completions"]
    sorted_completions = sorted(completions, key=lambda c: -c["logprob"])
    preds: list[Any] = [c["text"].strip() for c in sorted_completions]
    if request_state.get("output_mapping") is not None:
        preds = [map_prediction(request_state, adapter_spec, p) for p in preds]

    stats: list[Stat] = [Stat(metric_name("max_prob")).add(np.exp(sorted_completions[0]["logprob"]))]
    num_outputs = adapter_spec.get("num_outputs", 5)
    for name in names:
        fn = METRIC_FUNCTIONS.get(name)
        if fn is None:
            if name in HELM_ONLY_METRIC_FUNCTIONS:
                raise NotImplementedError(f"BasicGenerationMetric name {name!r} is not implemented in medhelm")
            raise NameError(f"{name} is not in the list of metric functions.")
        gold_texts = [g["output"]["text"] for g in golds]
        score_1 = max(fn(g, preds[0]) for g in gold_texts)
        stats.append(Stat(metric_name(name)).add(score_1))
        if num_outputs != 1:
            score_k = max(fn(g, p) for g in gold_texts for p in preds)
            stats.append(Stat(metric_name(f"{name}@{num_outputs}")).add(score_k))
    return stats
