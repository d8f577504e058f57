"""medhelm 0.8.0's `SCTBenchMetric` (`metrics/sct_bench_metrics.py`, after SCT-Bench's modeling.py)
-> `sct_score` and `sct_expert_set_membership`.

response = `completions[0].text.strip()`; panel = `extra_data["expert_distribution"]`.

* The rating: the 5 characters after the *first* "Rating: "; every `+2|+1|0|-1|-2` token found there
  is joined into one string, read with `int()`, and kept only if it is -2..2. Otherwise (no
  "Rating: ", no token, not an integer, out of range) the answer is unparsable and both stats are 0.
  Upstream bugs of this parser (SCT-Bench's, kept by medhelm), reproduced:
  * "Rating: 10" scores as 0 (the "1" is no token, the "0" is);
  * "Rating: 1", "Rating: 2" are unparsable (a rating without its "+" is no token), and so is
    "Rating:+1" (no space after the colon);
  * "Rating: -2, 0" joins to "-20": out of range, unparsable; "Rating: 0 0" joins to "00", i.e. 0.
* `sct_score` = the panel's weight of the rating / the panel's maximum; 0 for an all-zero panel
  (whatever the rating).
* `sct_expert_set_membership` = 1 iff the panel's weight of the rating is > 0.

No stat when there is no completion (medhelm logs a warning and returns []); a request state
without a result or an instance without extra_data fails, as medhelm's assertions do.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Optional

from medhelm_core.metrics.base import EvalContext, Metric, MetricError, helm_metric
from medhelm_core.metrics.stat import Stat, metric_name


@dataclass(frozen=True)
class RatingRule:
    """How a rating is read from an answer (the benchmark's `metric:` text)."""

    marker: str
    window: int
    pattern: re.Pattern
    valid: tuple[int, ...]

    @classmethod
    def from_text(cls, text: dict[str, Any]) -> "RatingRule":
        return cls(text["rating_marker"], int(text["rating_window"]), re.compile(text["rating_pattern"]),
                   tuple(int(v) for v in text["valid_ratings"]))


def parse_sct_rating(response: str, rule: RatingRule) -> Optional[int]:
    """The rating in `response`, or None when medhelm cannot parse one."""
    pieces = response.split(rule.marker)
    if len(pieces) < 2:
        return None
    # medhelm reads the piece between the first and the second marker (if any), cut to the window.
    # Upstream bug, reproduced: tokens are joined, not validated one by one, so "10" reads as 0
    # (its "1" is no token), "-2, 0" as -20 (rejected below), and "1" (no "+") as nothing.
    joined = "".join(rule.pattern.findall(pieces[1][:rule.window]))
    try:
        rating = int(joined)
    except ValueError:  # nothing found ("" is no integer), or tokens like "+1-1"
        return None
    return rating if rating in rule.valid else None


def _weight(distribution: list[float], rating: int) -> float:
    # The panel is indexed by rating + 2 (-2 -> the first column).
    return distribution[rating + 2]


def sct_score(distribution: list[float], rating: int) -> float:
    """The rating's weight relative to the panel's maximum; 0.0 for an all-zero panel."""
    top = max(distribution)
    if top == 0:  # an all-zero panel: 0 whatever the rating (its reference is still "-2")
        return 0.0
    return _weight(distribution, rating) / top


def expert_set_membership(distribution: list[float], rating: int) -> float:
    return 1.0 if _weight(distribution, rating) > 0 else 0.0


def sct_scores(response: str, distribution: list[float], rule: RatingRule) -> tuple[float, float]:
    """(sct_score, sct_expert_set_membership) of one answer: (0.0, 0.0) when it is unparsable."""
    rating = parse_sct_rating(response, rule)
    if rating is None:
        return 0.0, 0.0
    return sct_score(distribution, rating), expert_set_membership(distribution, rating)


@helm_metric("helm.benchmark.metrics.sct_bench_metrics.SCTBenchMetric")
class SCTBenchMetric(Metric):
    def __init__(self, *, bench):
        text = bench.text["metric"]
        self.rule = RatingRule.from_text(text)
        self.names = (text["sct_score"], text["expert_set_membership"])

    def evaluate_generation(self, adapter_spec: dict[str, Any], request_state: dict[str, Any],
                            ctx: EvalContext) -> list[Stat]:
        result = request_state.get("result")
        if result is None:
            raise MetricError("SCTBenchMetric: request_state.result is unexpectedly None")
        predictions = [c["text"].strip() for c in result.get("completions") or []]
        if not predictions:
            return []
        instance = request_state["instance"]
        extra = instance.get("extra_data")
        if not extra:
            raise MetricError(f"SCTBenchMetric: instance {instance.get('id')!r} has no extra_data "
                              "(expert_distribution is required)")
        scores = sct_scores(predictions[0], extra["expert_distribution"], self.rule)
        return [Stat(metric_name(name)).add(value) for name, value in zip(self.names, scores)]
