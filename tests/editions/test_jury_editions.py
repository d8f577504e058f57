"""The jury under each edition: HELM 0.5.16 reads a judge's score with int() and drops a judge whose
criterion lacks `score`; medhelm 0.8.0 reads float() and lets that reply through, so the metric fails
the run (medhelm-upstream-drift.md section 3)."""
import pytest

from medhelm_core import jury
from medhelm_core.catalog import load_catalog
from medhelm_core.metrics.base import MetricError
from medhelm_core.parts import JuryDef

J = JuryDef(name="demo", prompt_template="R={RESPONSE}",
            criteria={"accuracy": ["score", "explanation"], "clarity": ["score", "explanation"]},
            judges={"gpt": {"model_name": "o/a", "model_deployment": "d/a"},
                    "claude": {"model_name": "o/b", "model_deployment": "d/b"}})
JURY_METRIC = "helm.benchmark.metrics.llm_jury_metrics.LLMJuryMetric"
NO_SCORE = '{"accuracy": {"explanation": "x"}, "clarity": {"score": 4, "explanation": "y"}}'


def _metric(edition: str):
    factory = load_catalog((), edition).metrics[JURY_METRIC]
    return factory(metric_name="demo_accuracy", scenario_name="demo",
                   annotator_models={"gpt": {}, "claude": {}}, default_score=1.0)


def _score(edition: str, annotation: dict) -> float:
    state = {"instance": {"id": "id1"}, "annotations": {"demo": annotation}}
    return _metric(edition).evaluate_generation({}, state, None)[0].sum


def test_fractional_scores_are_truncated_by_helm_and_kept_by_medhelm():
    annotation = {"prompt_text": "p", "gpt": {"accuracy": {"score": 4.5}, "clarity": {"score": 3}}}
    assert _score("helm-0.5.16", annotation) == 3.5          # int(4.5) = 4
    assert _score("medhelm-0.8.0", annotation) == 3.75
    as_text = {"prompt_text": "p", "gpt": {"accuracy": {"score": "4.5"}, "clarity": {"score": "3"}}}
    with pytest.raises(MetricError, match="ValueError"):
        _score("helm-0.5.16", as_text)                        # int("4.5") fails the run
    assert _score("medhelm-0.8.0", as_text) == 3.75


def test_a_reply_without_score_drops_the_judge_in_helm_and_fails_the_run_in_medhelm():
    assert jury.parse_judge_output(J, "gpt", NO_SCORE).status == jury.PARSE_FAILED
    lax = jury.parse_judge_output(J, "gpt", NO_SCORE, validation="top_level")
    assert lax.status == jury.OK
    with pytest.raises(MetricError, match="KeyError"):
        _score("medhelm-0.8.0", jury.assemble_annotation("p", [lax]))
    # Both still drop a reply that misses a criterion.
    missing = '{"accuracy": {"score": 4, "explanation": "x"}}'
    assert jury.parse_judge_output(J, "gpt", missing, validation="top_level").status == jury.PARSE_FAILED
