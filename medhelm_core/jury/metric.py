"""HELM's `LLMJuryMetric` (`metrics/llm_jury_metrics.py`) and a corrected per-instance jury score.

HELM's score for one request state, with `annotation = request_state.annotations[scenario_name]`::

    scores = [int(v["score"])                      # int() truncates 4.7 -> 4; "4" -> 4; "4.5" raises
              for key, judge_json in annotation.items()
              if key in annotator_models and judge_json is not None
              for v in judge_json.values()]        # ALL top-level values of each judge's JSON
    score = sum(scores) / len(scores) if scores else default_score

`default_score` is 1.0 for MedHELM's per-scenario juries and 0.0 (HELM's default) for the
configurable benchmark's `jury_score`. So an empty model output (the annotator stores
`{"prompt_text": None, "empty_output_equivalence_judgement": False}`) or a jury whose judges all
failed silently scores `default_score`.

medhelm 0.8.0 reads each score with `float()` instead (so 4.5 stays 4.5 and "4.5" no longer
crashes): the edition's `jury_score_type`.

`jury_score_corrected` gives the same number whenever at least one judge scored, and None
otherwise; medhelm stores it beside HELM's value and never lets it change HELM's numbers.
"""
from __future__ import annotations

from typing import Any, Iterable, Mapping, Optional

from medhelm_core.metrics.base import EvalContext, Metric, MetricError, helm_metric
from medhelm_core.metrics.stat import Stat, metric_name


SCORE_TYPES = {"int": int, "float": float}


def jury_scores(annotation: Mapping[str, Any], judges: Iterable[str], score_type: str = "int") -> list[float]:
    """The criterion scores HELM averages, read with `score_type` (int or float): every top-level
    value of every judge's JSON."""
    judge_names, read = set(judges), SCORE_TYPES[score_type]
    scores: list[float] = []
    for key, judge_json in annotation.items():
        if key in judge_names and judge_json is not None:
            for value in judge_json.values():
                scores.append(read(value["score"]))
    return scores


def jury_score(annotation: Mapping[str, Any], judges: Iterable[str], default_score: float,
               score_type: str = "int") -> float:
    """HELM's per-instance jury score (default_score when no judge produced a score)."""
    scores = jury_scores(annotation, judges, score_type)
    if scores:
        return sum(scores) / len(scores)
    return default_score


def jury_score_corrected(annotation: Optional[Mapping[str, Any]], judges: Iterable[str],
                         score_type: str = "int") -> Optional[float]:
    """HELM's jury mean, but None (not HELM's default score) when no judge produced a score.

    `annotation` is `request_state["annotations"][scenario_name]` (None/absent counts as no score);
    `judges` are the judge names (the keys of the metric's `annotator_models`).
    """
    if not annotation:
        return None
    try:
        scores = jury_scores(annotation, judges, score_type)
    except (TypeError, ValueError, KeyError):
        return None  # a reply the metric cannot score (it fails the run where HELM's does)
    if not scores:
        return None
    return sum(scores) / len(scores)


@helm_metric("helm.benchmark.metrics.llm_jury_metrics.LLMJuryMetric")
class LLMJuryMetric(Metric):
    def __init__(
        self,
        metric_name: str,
        scenario_name: str,
        annotator_models: dict[str, Any],
        default_score: float = 0.0,
        edition=None,
    ):
        self.metric_name = metric_name
        self.scenario_name = scenario_name
        self.annotator_models = dict(annotator_models)
        self.default_score = default_score
        # Not a HELM argument: the catalog binds its edition (how a judge's score is read).
        self.score_type = edition.jury_score_type if edition is not None else "int"

    def evaluate_generation(
        self, adapter_spec: dict[str, Any], request_state: dict[str, Any], ctx: EvalContext
    ) -> list[Stat]:
        annotations = request_state.get("annotations")
        if not annotations:
            raise MetricError(
                f"LLMJuryMetric({self.metric_name!r}): instance {request_state['instance'].get('id')!r} "
                "has no annotations (run the jury annotator first)"
            )
        if self.scenario_name not in annotations:
            raise MetricError(
                f"LLMJuryMetric({self.metric_name!r}): instance {request_state['instance'].get('id')!r} "
                f"has no annotation {self.scenario_name!r} (has {sorted(annotations)})"
            )
        try:
            score = jury_score(annotations[self.scenario_name], self.annotator_models, self.default_score,
                               self.score_type)
        except (TypeError, ValueError, KeyError) as e:
            # HELM crashes the whole run here too (int() of a non-numeric score, a judge value
            # that is not a {"score": ...} dict, ...).
            raise MetricError(
                f"LLMJuryMetric({self.metric_name!r}): instance {request_state['instance'].get('id')!r}: "
                f"a judge's JSON has a value HELM cannot score ({type(e).__name__}: {e})"
            ) from e
        return [Stat(metric_name(self.metric_name)).add(score)]
