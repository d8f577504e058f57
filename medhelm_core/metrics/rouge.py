"""ROUGE-1/2/L F-measures exactly as `rouge_score.rouge_scorer.RougeScorer([...], use_stemmer=True)`.

Tokenization is rouge_score's own (`rouge_score.tokenize.tokenize` with nltk's PorterStemmer, the
stemmer that `use_stemmer=True` builds), memoised. The scores use rouge_score's formulas:

* rougeN: n-gram multisets; overlap = sum over target n-grams of min(count_target, count_pred);
  precision = overlap / max(#pred n-grams, 1), recall = overlap / max(#target n-grams, 1);
* rougeL: 0 (an int, as rouge_score returns) if either side has no tokens, else LCS length over
  len(pred) / len(target);
* F = 2PR / (P + R), or 0.0 when P + R == 0.

The LCS length is computed with a bit-parallel algorithm (exact; rouge_score's quadratic
pure-Python table is the bottleneck on long clinical notes). `tests/metrics/test_metrics.py` checks the
results against `RougeScorer` itself.
"""
from __future__ import annotations

from collections import Counter
from functools import lru_cache
from typing import Sequence

from medhelm_core.light_imports import NLTK_OPTIONAL, hiding


class _MemoStemmer:
    """nltk's PorterStemmer() with a memo on `stem` (pure function of the word)."""

    def __init__(self) -> None:
        with hiding(*NLTK_OPTIONAL):
            from nltk.stem import porter

        self.stem = lru_cache(maxsize=200_000)(porter.PorterStemmer().stem)


@lru_cache(maxsize=1)
def _stemmer() -> _MemoStemmer:
    return _MemoStemmer()


@lru_cache(maxsize=2048)
def rouge_tokens(text: str) -> tuple[str, ...]:
    """rouge_score's DefaultTokenizer(use_stemmer=True).tokenize(text)."""
    with hiding(*NLTK_OPTIONAL):
        from rouge_score import tokenize

    return tuple(tokenize.tokenize(text, _stemmer()))


def fmeasure(precision: float, recall: float) -> float:
    if precision + recall > 0:
        return 2 * precision * recall / (precision + recall)
    return 0.0


def _ngrams(tokens: Sequence[str], n: int) -> Counter:
    return Counter(tuple(tokens[i : i + n]) for i in range(len(tokens) - n + 1))


def rouge_n(target: Sequence[str], prediction: Sequence[str], n: int) -> float:
    target_ngrams = _ngrams(target, n)
    prediction_ngrams = _ngrams(prediction, n)
    overlap = 0
    for ngram, count in target_ngrams.items():
        overlap += min(count, prediction_ngrams[ngram])
    precision = overlap / max(sum(prediction_ngrams.values()), 1)
    recall = overlap / max(sum(target_ngrams.values()), 1)
    return fmeasure(precision, recall)


def lcs_length(a: Sequence[str], b: Sequence[str]) -> int:
    """Length of the longest common subsequence (bit-vector algorithm, one big int per row)."""
    if len(a) < len(b):
        a, b = b, a
    if not b:
        return 0
    masks: dict[str, int] = {}
    for i, tok in enumerate(a):
        masks[tok] = masks.get(tok, 0) | (1 << i)
    full = (1 << len(a)) - 1
    v = full
    for tok in b:
        m = masks.get(tok)
        if m is None:
            continue
        u = v & m
        v = ((v + u) | (v - u)) & full
    return len(a) - v.bit_count()


def rouge_l(target: Sequence[str], prediction: Sequence[str]) -> float:
    if not target or not prediction:
        return 0
    lcs = lcs_length(target, prediction)
    return fmeasure(lcs / len(prediction), lcs / len(target))


def rouge_fmeasures(target: str, prediction: str) -> dict[str, float]:
    """{"rouge1", "rouge2", "rougeL"} F-measures of `prediction` against `target`."""
    t = rouge_tokens(target)
    p = rouge_tokens(prediction)
    return {"rouge1": rouge_n(t, p, 1), "rouge2": rouge_n(t, p, 2), "rougeL": rouge_l(t, p)}


def rouge_fmeasure(rouge_type: str, target: str, prediction: str) -> float:
    t = rouge_tokens(target)
    p = rouge_tokens(prediction)
    if rouge_type == "rougeL":
        return rouge_l(t, p)
    if rouge_type in ("rouge1", "rouge2"):
        return rouge_n(t, p, int(rouge_type[5:]))
    raise ValueError(f"unsupported rouge type {rouge_type!r}")
