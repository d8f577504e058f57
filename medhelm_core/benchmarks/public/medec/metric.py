"""HELM's `MedecMetric` (`metrics/medec_metrics.py`): MEDEC error flag and error sentence accuracy.

* gold = the first correct reference, `.replace(".", "").strip()`: "CORRECT" -> flag 0, id -1;
  otherwise flag 1 and id = `int(gold)`, which fails for the scenario's "<id> <sentence>" references,
  so the gold id is -1 (unless the corrected sentence was empty);
* prediction = `completions[0].text.strip()`: exactly "CORRECT" -> flag 0, id -1; a leading number
  -> flag 1 and that id; anything else -> flag 1, id -2;
* `medec_error_flag_accuracy` = predicted flag == gold flag;
* `medec_error_sentence_accuracy` = ids equal when both flags are 1 (gold id -1 never equals a
  parsed id, so error notes are never credited), else 1 iff both say CORRECT. Reproduced as is.
"""
from __future__ import annotations

import re
from typing import Any

from medhelm_core.metrics.base import EvalContext, Metric, MetricError, helm_metric
from medhelm_core.metrics.stat import Stat, metric_name

CORRECT_TAG = "correct"
_LEADING_NUMBER = re.compile(r"^(\d+)")


def medec_scores(prediction: str, gold_text: str, correct: str = "CORRECT") -> tuple[int, int]:
    gold = gold_text.replace(".", "").strip()
    if gold == correct:
        gold_flag, gold_id = 0, -1
    else:
        gold_flag = 1
        try:
            gold_id = int(gold)
        except ValueError:
            gold_id = -1
    prediction = prediction.strip()
    if prediction == correct:
        pred_flag, pred_id = 0, -1
    else:
        match = _LEADING_NUMBER.match(prediction)
        pred_flag, pred_id = (1, int(match.group(1))) if match else (1, -2)
    flag_accuracy = 1 if pred_flag == gold_flag else 0
    if gold_flag == 1 and pred_flag == 1:
        sentence_accuracy = 1 if pred_id == gold_id else 0
    else:
        sentence_accuracy = 1 if gold_flag == 0 and pred_flag == 0 else 0
    return flag_accuracy, sentence_accuracy


@helm_metric("helm.benchmark.metrics.medec_metrics.MedecMetric")
class MedecMetric(Metric):
    def __init__(self, *, bench):
        self.correct_answer = bench.text["scenario"]["correct_answer"]

    def evaluate_generation(self, adapter_spec: dict[str, Any], request_state: dict[str, Any],
                            ctx: EvalContext) -> list[Stat]:
        result = request_state.get("result")
        predictions = [c["text"].strip() for c in (result or {}).get("completions") or []]
        instance = request_state["instance"]
        if not predictions:  # HELM raises ValueError("No predictions found in the completions.")
            raise MetricError(f"MedecMetric: no predictions found in the completions of instance {instance.get('id')!r}")
        references = instance.get("references") or []
        if not references:
            return []
        gold = next((r for r in references if CORRECT_TAG in r.get("tags", [])), None)
        if gold is None:
            return []
        flag, sentence = medec_scores(predictions[0], gold["output"]["text"], self.correct_answer)
        return [Stat(metric_name("medec_error_flag_accuracy")).add(flag),
                Stat(metric_name("medec_error_sentence_accuracy")).add(sentence)]
