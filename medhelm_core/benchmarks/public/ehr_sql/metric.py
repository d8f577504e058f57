"""HELM's `EhrSqlMetric` (`metrics/ehr_sql_metrics.py`), on the EhrSqlAnnotator's annotation.

Per instance (no stat at all when the `ehr_sql` annotation, the prediction or the references are
missing): prediction = `completions[0].text.strip()`, gold query = `references[0].text.strip()`,
answerable = not `is_impossible` and a non-empty gold query, predicted answerable = a non-empty
prediction.

* `ehr_sql_execution_accuracy`: with a gold query, `set(predicted rows) == set(gold rows)` when both
  results are non-empty; 1 when both are empty *and* the prediction is empty; else 0. The gold
  result that falls back to `extra_data["value"]` is a flat list of values while predicted rows are
  tuples, so those never match (as in HELM). Rows arrive here from the stored JSON as lists and are
  turned back into the tuples `fetchall()` returned.
* `ehr_sql_query_validity`: 1 iff there is a prediction and it executed without error.
* `ehr_sql_precision_answerable` / `ehr_sql_recall_answerable`: answerable and predicted answerable,
  counted when predicted answerable / when answerable (else 0).
* `ehr_sql_total_predicted_answerable`, `ehr_sql_total_ground_truth_answerable`.
"""
from __future__ import annotations

from typing import Any

from medhelm_core.metrics.base import EvalContext, Metric, MetricError, helm_metric
from medhelm_core.metrics.stat import Stat, metric_name

ANNOTATION = "ehr_sql"


def _hashable(value: Any) -> Any:
    if isinstance(value, list):
        return tuple(_hashable(v) for v in value)
    return value


def execution_accuracy(prediction: str, gold_query: str, predicted_result: list, gold_result: list) -> int:
    if gold_query:
        if gold_result and predicted_result:
            try:
                return int({_hashable(r) for r in predicted_result} == {_hashable(r) for r in gold_result})
            except TypeError as e:  # HELM cannot hash such rows either
                raise MetricError(f"EhrSqlMetric: unhashable result rows: {e}") from e
        if not gold_result and not predicted_result and not prediction:
            return 1
    return 0


def ehr_sql_stats(prediction: str, gold_query: str, is_impossible: Any, annotation: dict[str, Any]) -> list[Stat]:
    predicted_result = annotation.get("predicted_result", [])
    gold_result = annotation.get("ground_truth_result", [])
    query_error = annotation.get("query_error", None)
    is_answerable = not is_impossible and bool(gold_query)
    is_predicted_answerable = bool(prediction)
    correct_answerable = int(is_answerable and is_predicted_answerable)
    accuracy = execution_accuracy(prediction, gold_query, predicted_result, gold_result)
    validity = 0 if not prediction else (1 if query_error is None else 0)
    return [
        Stat(metric_name("ehr_sql_execution_accuracy")).add(accuracy),
        Stat(metric_name("ehr_sql_query_validity")).add(validity),
        Stat(metric_name("ehr_sql_precision_answerable")).add(correct_answerable if is_predicted_answerable else 0),
        Stat(metric_name("ehr_sql_recall_answerable")).add(correct_answerable if is_answerable else 0),
        Stat(metric_name("ehr_sql_total_predicted_answerable")).add(int(is_predicted_answerable)),
        Stat(metric_name("ehr_sql_total_ground_truth_answerable")).add(int(is_answerable)),
    ]


@helm_metric("helm.benchmark.metrics.ehr_sql_metrics.EhrSqlMetric")
class EhrSqlMetric(Metric):
    def evaluate_generation(self, adapter_spec: dict[str, Any], request_state: dict[str, Any],
                            ctx: EvalContext) -> list[Stat]:
        annotations = request_state.get("annotations")
        if not annotations or ANNOTATION not in annotations:
            return []
        result = request_state.get("result")
        predictions = [c["text"].strip() for c in (result or {}).get("completions") or []]
        if not predictions:
            return []
        prediction = predictions[0].strip()
        instance = request_state["instance"]
        references = instance.get("references") or []
        if not references:
            return []
        gold_query = references[0]["output"]["text"].strip()
        extra = instance.get("extra_data")
        is_impossible = extra.get("is_impossible", False) if extra else False
        return ehr_sql_stats(prediction, gold_query, is_impossible, annotations[ANNOTATION])
