"""Rubric juries: medhelm 0.8.0's HealthBench annotators (`annotation/health_bench_annotator.py`),
as a `JuryDef` with several calls per judge (`JuryDef.calls` / `JuryDef.annotate`).

What medhelm asks, per request state whose answer is not blank (a blank answer: no call, HELM's
`{"prompt_text": None, "empty_output_equivalence_judgement": False}`), judge after judge in the
AnnotatorSpec's order (an instance without `extra_data["rubrics"]` asks no judge: annotation `{}`):

* one call per rubric item: the rubric template with `<<conversation>>` replaced by the
  conversation (the instance's `input.messages` plus `{"role": "assistant", "content": answer}`,
  each `"<role>: <content>"`, joined by a blank line), then `<<rubric_item>>` by `str(item)` (the
  Python repr of the item's dict: a chained `str.replace`, so a `<<rubric_item>>` inside the
  conversation is replaced too);
* HealthBench Professional, when `extra_data["physician_response"] is not None`: one more call, the
  physician template with `<<user_message>>` (the same conversation string, answer included),
  `<<llm_response>>` (the answer) and `<<physician_response>>` replaced in that order.

Each answer is parsed as every LLM jury's (`parse_judge_output`: greedy `{...}`, one `}` repair,
both keys of `criteria` present); a call that fails (request, JSON or key check) is dropped.

HELM's score of a judge (`calculate_score`, reproduced with its bugs; they are medhelm's, not
OpenAI's simple-evals scoring):

* BUG (kept): a negative-point item counts `10 + points` (-6 -> 4) in the denominator and is
  *earned* when its undesirable criterion is met (simple-evals subtracts its points then);
* BUG (kept): the failed calls are dropped and the remaining responses are paired with the items by
  `zip(items, responses)`, so after a failure every later response scores the wrong item and the
  last items score nothing;
* met = `str(response.get("criteria_met", "")).lower() == "true"` (a string "True" counts);
* a rubric whose counted points sum to 0 (no items, or only -10 items) scores None, which
  LLMJuryMetric's `float()` then fails on (the run fails, as in medhelm);
* Professional: with a physician comparison whose `criteria_met` k is not None, the score is
  `(rubric score + k / 10) / 2` (a None rubric score, or a k that is not a number, fails the run).
  BUG (kept): the annotator keeps ONE list of grading responses for all judges, so judge 2 and 3's
  rubric fractions are computed on the first entries of that list (judge 1's responses, then judge
  1's physician answer if judge 1 had failed calls), and every judge's stored `criteria` is the
  whole list (all judges' responses, physician answers included) as it is at the end.

HELM's annotation: `{judge: {"accuracy": {"score": score, "criteria": responses}}}`, no prompt text.

Beside it (never in it) each judge gets a `summary` verdict row: HELM's score, and the corrected
score: every item paired with its own verdict (a failed call's item left out of numerator and
denominator), positive points over the positive total, negative points subtracted when the
undesirable criterion is met (simple-evals' per-example score, not clipped), and for Professional
the judge's own rubric responses, averaged with its own physician comparison as medhelm intends.
"""
from __future__ import annotations

from dataclasses import dataclass
from numbers import Number
from typing import Any, Optional

from medhelm_core.errors import MedhelmError
from medhelm_core.jury.annotation import OK, Verdict, completion_text
from medhelm_core.parts import JudgeCall, JuryAnnotation, JuryDef

PHYSICIAN_CALL = "physician_comparison"


def rubric_call(index: int) -> str:
    return f"rubric_item_{index}"


@dataclass(frozen=True)
class RubricJury:
    """One rubric annotator: its name (the annotation key), texts and judges.

    `physician_template` None: no physician comparison (HealthBench). `shared_responses`: the
    Professional annotator's one list of grading responses for all judges (medhelm's bug)."""

    name: str
    rubric_template: str
    criteria: dict[str, list[str]]
    judges: dict[str, dict[str, str]]
    physician_template: Optional[str] = None
    shared_responses: bool = False

    def jury(self) -> JuryDef:
        return JuryDef(name=self.name, prompt_template=self.rubric_template, criteria=self.criteria,
                       judges=self.judges, calls=self.calls, annotate=self.annotate)

    # -- the calls ---------------------------------------------------------------------------
    def calls(self, request_state: dict[str, Any]) -> Optional[dict[str, list[JudgeCall]]]:
        answer = completion_text(request_state)
        if not answer.strip():
            return None  # HELM: "Annotator skipped sending requests because the model response was empty"
        inst = request_state["instance"]
        extra = inst.get("extra_data")
        if extra is None or "rubrics" not in extra:
            return {}  # HELM: "missing rubric information, skipping annotation" for every judge
        try:
            convo = conversation((inst.get("input") or {}).get("messages"), answer)
            questions = [JudgeCall(rubric_call(i), rubric_prompt(self.rubric_template, convo, item))
                         for i, item in enumerate(extra.get("rubrics", []))]
            physician = extra.get("physician_response", None)
            # A physician response that is not a string fails medhelm's str.replace inside its
            # try block: that comparison is skipped (counted as failed), the rest goes on.
            if self.physician_template is not None and isinstance(physician, str):
                questions.append(JudgeCall(PHYSICIAN_CALL,
                                           physician_prompt(self.physician_template, convo, answer, physician)))
        except (KeyError, TypeError, AttributeError) as e:  # HELM's annotator raises too: the run fails
            raise MedhelmError(f"{self.name}: instance {inst.get('id')!r}: cannot build the judge prompts "
                               f"({type(e).__name__}: {e})") from None
        return {judge: list(questions) for judge in self.judges}

    # -- the annotation ----------------------------------------------------------------------
    def annotate(self, request_state: dict[str, Any], verdicts: dict[str, list[Verdict]]) -> JuryAnnotation:
        inst = request_state["instance"]
        try:
            return self._annotate(request_state, verdicts)
        except (KeyError, TypeError, ValueError, AttributeError) as e:  # HELM's annotate() raises: run fails
            raise MedhelmError(f"{self.name}: instance {inst.get('id')!r}: medhelm's annotator fails here too "
                               f"({type(e).__name__}: {e})") from None

    def _annotate(self, request_state: dict[str, Any], verdicts: dict[str, list[Verdict]]) -> JuryAnnotation:
        rubrics = (request_state["instance"].get("extra_data") or {}).get("rubrics", [])
        annotation: dict[str, Any] = {}
        summaries: dict[str, dict[str, Any]] = {}
        shared: list[dict] = []  # BUG (kept, Professional): one list for every judge
        for judge in self.judges:
            if judge not in verdicts:
                continue
            item_verdicts = [v for v in verdicts[judge] if v.call != PHYSICIAN_CALL]
            physician = next((v for v in verdicts[judge] if v.call == PHYSICIAN_CALL), None)
            responses = shared if self.shared_responses else []
            # BUG (kept): failed grading calls are dropped before zip() pairs responses with items.
            responses.extend(v.parsed for v in item_verdicts if v.status == OK)
            score = helm_rubric_score(rubrics, responses)
            physician_score = None
            if physician is not None and physician.status == OK:
                physician_score = physician.parsed.get("criteria_met", None)
                responses.append(physician.parsed)
            if physician_score is not None:
                score = (score + physician_score / 10) / 2
            annotation[judge] = {"accuracy": {"score": score, "criteria": responses}}
            summaries[judge] = self._summary(rubrics, item_verdicts, physician, score)
        if self.shared_responses:  # what HELM serializes: the shared list as it is at the end
            for judge in annotation:
                annotation[judge]["accuracy"]["criteria"] = list(shared)
        return JuryAnnotation(annotation, summaries)

    def _summary(self, rubrics: list[dict], item_verdicts: list[Verdict], physician: Optional[Verdict],
                 helm_score: Any) -> dict[str, Any]:
        met = [criteria_met(v.parsed) if v.status == OK else None for v in item_verdicts]
        corrected = corrected_rubric_score(rubrics, met)
        out: dict[str, Any] = {
            "helm_score": helm_score,
            "corrected_score": corrected,
            "items": [{"points": item.get("points"), "criteria_met": m} for item, m in zip(rubrics, met)],
            "failed_calls": sum(1 for v in item_verdicts if v.status != OK),
        }
        if self.physician_template is not None:
            k = physician.parsed.get("criteria_met") if physician is not None and physician.status == OK else None
            out["physician_score"] = k
            if physician is not None and physician.status != OK:
                out["failed_calls"] += 1
            if isinstance(k, Number) and not isinstance(k, bool):
                out["corrected_score"] = k / 10 if corrected is None else (corrected + k / 10) / 2
        return out


# ----------------------------------------------------------------------------- the prompts
def conversation(messages: Optional[list[dict]], answer: str) -> str:
    """The conversation medhelm shows the grader: the messages, then the answer as the assistant's."""
    turns = list(messages or []) + [{"content": answer, "role": "assistant"}]
    return "\n\n".join(f"{m['role']}: {m['content']}" for m in turns)


def rubric_prompt(template: str, convo: str, item: Any) -> str:
    return template.replace("<<conversation>>", convo).replace("<<rubric_item>>", str(item))


def physician_prompt(template: str, convo: str, answer: str, physician: str) -> str:
    return (template.replace("<<user_message>>", convo).replace("<<llm_response>>", answer)
            .replace("<<physician_response>>", physician))


# ----------------------------------------------------------------------------- the scores
def counted_points(points: Any) -> Any:
    """medhelm's points of an item: BUG (kept) a negative item counts 10 + points."""
    return 10 + points if points < 0 else points


def helm_rubric_score(rubrics: list[dict], responses: list[dict]) -> Optional[float]:
    """medhelm's `calculate_score`: the counted points of the items paired (by position, `zip`)
    with a response that says met, over all counted points; None when those sum to 0."""
    points = [counted_points(item["points"]) for item in rubrics]
    total = sum(points)
    if total == 0:
        return None
    earned = sum(p for p, response in zip(points, responses) if criteria_met(response))
    return earned / total


def criteria_met(response: dict) -> bool:
    return str(response.get("criteria_met", "")).lower() == "true"


def corrected_rubric_score(rubrics: list[dict], met: list[Optional[bool]]) -> Optional[float]:
    """simple-evals' per-example score with each item graded by its own call: the points of the met
    items (negative ones subtract) over the positive points; an item whose call failed is left out.
    None when no positive item was graded."""
    graded = [(item.get("points"), m) for item, m in zip(rubrics, met) if m is not None]
    if not all(isinstance(p, Number) and not isinstance(p, bool) for p, _ in graded):
        return None
    total = sum(p for p, _ in graded if p > 0)
    if total <= 0:
        return None
    return sum(p for p, m in graded if m) / total


def rubric_jury(bench, args: dict[str, Any], shared_responses: bool = False) -> JuryDef:
    """The JuryDef of a benchmark's `jury:` block (`rubric_prompt_template`, optional
    `physician_prompt_template`) on the AnnotatorSpec's judges."""
    from medhelm_core.jury.judges import normalize_annotator_models

    cls = bench.annotator_class
    unknown = sorted(set(args) - {"annotator_models", "template_name"})
    if unknown:
        raise MedhelmError(f"{cls}: unexpected annotator arguments {unknown}")
    if "annotator_models" not in args:
        raise MedhelmError(f"{cls}: annotator spec lacks 'annotator_models'")
    text = bench.text["jury"]
    return RubricJury(
        name=text["name"],
        rubric_template=text["rubric_prompt_template"],
        criteria={k: list(v) for k, v in text["criteria"].items()},
        judges=normalize_annotator_models(args["annotator_models"], where=f"{cls} annotator_models"),
        physician_template=text.get("physician_prompt_template"),
        shared_responses=shared_responses,
    ).jury()
