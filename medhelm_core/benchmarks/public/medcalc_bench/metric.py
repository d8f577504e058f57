"""HELM's `MedCalcBenchMetric` (`metrics/medcalc_bench_metrics.py`) -> `medcalc_bench_accuracy`.

prediction = `completions[0].text.strip()`, reference = `references[0].text` (not stripped),
category = `extra_data["category"]`:

* "risk", "severity", "diagnosis": 1 iff prediction == reference (exact string);
* "date": a reference like `('14 weeks', '2 days')` -> lower, upper and prediction must all be in that
  tuple format and are compared in days (inclusive); otherwise all three parse as `%m/%d/%Y` dates;
* "dosage conversion", "physical": `float(lower) <= float(prediction) <= float(upper)`;
* any other category -- "lab" in MedCalc-Bench v1.0, "lab test" later -- raises HELM's
  "Category ... not supported" ValueError, which HELM itself catches: **0 whatever the answer**.
  Any ValueError on the way (an unparsable number or date) is 0 too. Reproduced as is.

No stat when there is no completion or no reference (HELM logs a warning and returns []).
"""
from __future__ import annotations

import re
from datetime import datetime
from typing import Any

from medhelm_core.metrics.base import EvalContext, Metric, MetricError, helm_metric
from medhelm_core.metrics.stat import Stat, metric_name

_DURATION = re.compile(r"\('(\d+) weeks', '(\d+) days'\)")


def parse_duration(value: str) -> int:
    match = _DURATION.match(value)
    if not match:
        raise ValueError(f"Invalid format: {value}")
    weeks, days = map(int, match.groups())
    return weeks * 7 + days


def _date(value: str) -> datetime:
    return datetime.strptime(value, "%m/%d/%Y")


def check_date(prediction: str, reference: str, extra: dict[str, Any]) -> int:
    if _DURATION.match(reference):
        lower, upper = parse_duration(extra["lower_limit"]), parse_duration(extra["upper_limit"])
        return 1 if lower <= parse_duration(prediction) <= upper else 0
    predicted = _date(prediction)
    return 1 if _date(extra["lower_limit"]) <= predicted <= _date(extra["upper_limit"]) else 0


def check_in_range(prediction: str, reference: str, extra: dict[str, Any], category: str, cats: dict[str, Any]) -> int:
    try:
        if category == cats["date_category"]:
            return check_date(prediction, reference, extra)
        if category in cats["range_categories"]:
            return 1 if float(extra["lower_limit"]) <= float(prediction) <= float(extra["upper_limit"]) else 0
        raise ValueError(f"Category {category} not supported")
    except ValueError:
        return 0


def medcalc_accuracy(prediction: str, reference: str, extra: dict[str, Any], cats: dict[str, Any]) -> int:
    """`cats`: the category lists (`scenario:` of the benchmark's text)."""
    category = extra["category"]
    if category in cats["exact_categories"]:
        return 1 if prediction == reference else 0
    return check_in_range(prediction, reference, extra, category, cats)


@helm_metric("helm.benchmark.metrics.medcalc_bench_metrics.MedCalcBenchMetric")
class MedCalcBenchMetric(Metric):
    def __init__(self, *, bench):
        self.categories = bench.text["scenario"]

    def evaluate_generation(self, adapter_spec: dict[str, Any], request_state: dict[str, Any],
                            ctx: EvalContext) -> list[Stat]:
        result = request_state.get("result")
        if result is None:
            raise MetricError("MedCalcBenchMetric: request_state.result is unexpectedly None")
        predictions = [c["text"].strip() for c in result.get("completions") or []]
        if not predictions:
            return []
        instance = request_state["instance"]
        references = instance.get("references") or []
        if not references:
            return []
        extra = instance.get("extra_data")
        if not extra:
            raise MetricError(f"MedCalcBenchMetric: instance {instance.get('id')!r} has no extra_data")
        score = medcalc_accuracy(predictions[0], references[0]["output"]["text"], extra, self.categories)
        return [Stat(metric_name("medcalc_bench_accuracy")).add(score)]
