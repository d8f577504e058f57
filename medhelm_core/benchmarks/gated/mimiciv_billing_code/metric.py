"""HELM's `MIMICIVBillingCodeMetric` (`metrics/mimiciv_billing_code_metrics.py`).

Per instance: the prediction is the first completion's text, stripped (no completion: no stats);
no reference: no stats. ICD-10 codes are extracted from each non-empty reference text and from the
prediction: "**" removed, then every match of `\\b[A-Z]\\d{1,3}(?:\\.\\d{1,4})?\\.?\\b` with trailing
periods dropped; both sides are de-duplicated into sets R and P.

HELM then scores the single sample with scikit-learn's micro-averaged precision/recall/F1 over a
MultiLabelBinarizer of sorted(R | P), `zero_division=0`. That is, with tp = |R & P|:
precision = tp/|P| (0 if P is empty), recall = tp/|R| (0 if R is empty),
F1 = 2*tp/(|R| + |P|) (scikit-learn's fbeta from the confusion counts; 0 if both empty).
These closed forms were checked against scikit-learn 1.9 on thousands of random code sets, bit for
bit, including |R | P| == 1 (where scikit-learn sees a binary column, with the same values).

Quirks kept:
* when neither the references nor the prediction contain a code (R | P empty) scikit-learn raises
  "unknown is not supported" and HELM's run fails; this metric raises the same failure;
* the pattern allows at most 3 digits before an optional dot, so a code written without its dot
  and with 4+ digits after the letter (MIMIC's "Z8673") is not extracted at all; "E119" is.

Names, pattern and metadata: the benchmark's text (`metric:` of benchmark.yaml; the catalog builds
the metric with its benchmark).
"""
from __future__ import annotations

import re
from typing import Any

from medhelm_core.metrics.base import EvalContext, Metric, MetricError, helm_metric
from medhelm_core.metrics.stat import Stat, metric_name

CLASS_NAME = "helm.benchmark.metrics.mimiciv_billing_code_metrics.MIMICIVBillingCodeMetric"


def extract_icd_codes(text: str, pattern: re.Pattern) -> list[str]:
    """HELM's `extract_icd_codes` (in match order, duplicates kept)."""
    if not text:
        return []
    cleaned = re.sub(r"\*\*", "", text)
    return [code.rstrip(".").strip() for code in pattern.findall(cleaned)]


def billing_scores(ref_codes: set[str], pred_codes: set[str]) -> tuple[float, float, float]:
    """(precision, recall, F1) as scikit-learn's micro average computes them for one sample."""
    if not ref_codes and not pred_codes:
        raise MetricError("MIMICIVBillingCodeMetric: neither the references nor the prediction contain an ICD-10 "
                          "code; HELM's scikit-learn call fails here ('unknown is not supported') and so does the run")
    tp = len(ref_codes & pred_codes)
    precision = tp / len(pred_codes) if pred_codes else 0.0
    recall = tp / len(ref_codes) if ref_codes else 0.0
    f1 = 2 * tp / (len(ref_codes) + len(pred_codes))
    return precision, recall, f1


@helm_metric(CLASS_NAME)
class MIMICIVBillingCodeMetric(Metric):
    def __init__(self, *, bench, **kwargs: Any):
        if kwargs:
            raise MetricError(f"MIMICIVBillingCodeMetric takes no arguments, got {sorted(kwargs)}")
        self.text = bench.text["metric"]
        self.pattern = re.compile(self.text["icd_pattern"])

    def evaluate_generation(
        self, adapter_spec: dict[str, Any], request_state: dict[str, Any], ctx: EvalContext
    ) -> list[Stat]:
        result = request_state.get("result")
        predictions = [] if result is None else [c["text"].strip() for c in result.get("completions") or []]
        if not predictions:
            return []
        prediction = predictions[0]
        references = request_state["instance"].get("references")
        if not references:
            return []
        ref_codes: list[str] = []
        for ref in references:
            text = ref["output"].get("text")
            if text:
                ref_codes.extend(extract_icd_codes(text, self.pattern))
        try:
            precision, recall, f1 = billing_scores(set(ref_codes), set(extract_icd_codes(prediction, self.pattern)))
        except MetricError as e:
            raise MetricError(f"instance {request_state['instance'].get('id')!r}: {e}") from None
        names = self.text["names"]
        return [
            Stat(metric_name(names["precision"])).add(precision),
            Stat(metric_name(names["recall"])).add(recall),
            Stat(metric_name(names["f1"])).add(f1),
        ]
