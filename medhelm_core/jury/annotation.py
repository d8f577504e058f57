"""The LLM jury, as HELM's `LLMAsJuryAnnotator` runs it, plus an explicit status per judge.

HELM keeps only the judges whose answer parsed and validated; the metric then averages whatever
is left and silently scores 1.0 (0.0 for configurable benchmarks) when nothing is. We build the
identical HELM annotation and, beside it, a verdict per judge call whose `status` says what
happened: `ok`, `parse_failed`, `request_failed` or `skipped_empty_output`. A jury whose judges
are asked several questions (`JuryDef.calls`, e.g. HealthBench's rubric items) has one verdict per
judge and question, and may add one `summary` row per judge (`JuryAnnotation.summaries`).
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass
from string import Template
from typing import Any

from medhelm_core.parts import JudgeCall, JuryAnnotation, JuryDef

JUDGE_MAX_TOKENS = 4096
_JSON_OBJECT = re.compile(r"\{.*\}", re.DOTALL)

OK, PARSE_FAILED, REQUEST_FAILED, SKIPPED_EMPTY_OUTPUT = "ok", "parse_failed", "request_failed", "skipped_empty_output"
SUMMARY = "summary"  # not a call: what an annotator stores per judge beside HELM's annotation


@dataclass
class Verdict:
    judge: str
    status: str
    parsed: dict | None = None
    raw_text: str | None = None
    error: str | None = None
    call: str | None = None  # the JudgeCall's label (None: the one call of a plain jury)


def completion_text(request_state: dict) -> str:
    result = request_state.get("result") or {}
    completions = result.get("completions") or []
    return completions[0]["text"] if completions else ""


def jury_prompt(jury: JuryDef, request_state: dict) -> str | None:
    """The interpolated judge prompt, or None when the model output is blank (no judge is asked)."""
    response = completion_text(request_state)
    if not response.strip():
        return None
    inst = request_state["instance"]
    refs = inst.get("references") or []
    values = {
        "QUESTION": inst["input"]["text"],
        "RESPONSE": response,
        "GOLD_RESPONSE": refs[0]["output"]["text"] if refs else "",
    }
    template = (jury.prompt_template.replace("{QUESTION}", "$QUESTION")
                .replace("{RESPONSE}", "$RESPONSE").replace("{GOLD_RESPONSE}", "$GOLD_RESPONSE"))
    return Template(template).substitute(values)


def judge_calls(jury: JuryDef, request_state: dict) -> dict[str, list[JudgeCall]] | None:
    """Each judge's questions about one request state, in HELM's order (None: none is asked, the
    model output is blank). A plain jury asks every judge its one filled-in template."""
    if jury.calls is not None:
        return jury.calls(request_state)
    prompt = jury_prompt(jury, request_state)
    if prompt is None:
        return None
    return {judge: [JudgeCall(None, prompt)] for judge in jury.judges}


def verdict_annotator(jury: JuryDef, call: str | None) -> str:
    """The `annotator` column of a verdict row: the jury's name, `/<label>` for a labelled call."""
    return jury.name if call is None else f"{jury.name}/{call}"


def jury_annotation(jury: JuryDef, request_state: dict, calls: dict[str, list[JudgeCall]] | None,
                    verdicts: dict[str, list[Verdict]]) -> JuryAnnotation:
    """HELM's annotation of one request state from its judges' verdicts (`calls` None: skipped)."""
    if calls is None:
        return JuryAnnotation(assemble_annotation(None, []))
    if jury.annotate is not None:
        return jury.annotate(request_state, verdicts)
    return JuryAnnotation(assemble_annotation(jury_prompt(jury, request_state),
                                              [v for vs in verdicts.values() for v in vs]))


def judge_request(judge: dict[str, str], prompt: str) -> dict[str, Any]:
    """HELM's Request(model, model_deployment, prompt, temperature=0.0, max_tokens=4096)."""
    return {
        "model_deployment": judge["model_deployment"],
        "model": judge["model_name"],
        "embedding": False,
        "prompt": prompt,
        "temperature": 0.0,
        "num_completions": 1,
        "top_k_per_token": 1,
        "max_tokens": JUDGE_MAX_TOKENS,
        "stop_sequences": [],
        "echo_prompt": False,
        "top_p": 1,
        "presence_penalty": 0,
        "frequency_penalty": 0,
    }


def parse_judge_output(jury: JuryDef, judge: str, text: str, validation: str = "strict") -> Verdict:
    """Greedy `{...}` extraction, `json.loads`, one `}` repair for "Expecting ',' delimiter",
    then HELM's `_validate_annotation`: every criterion must carry every expected sub-key
    (`strict`, HELM 0.5.16), or only be present (`top_level`, medhelm 0.8.0, whose recursive
    validator skips the sub-keys of set-valued criteria: a reply without `score` then reaches the
    metric, which fails the run)."""
    match = _JSON_OBJECT.search(text)
    candidate = match.group(0) if match else text
    try:
        parsed = json.loads(candidate)
    except json.JSONDecodeError as e:
        if e.msg != "Expecting ',' delimiter":
            return Verdict(judge, PARSE_FAILED, raw_text=text, error=f"invalid JSON: {e}")
        try:
            parsed = json.loads(candidate + "}")
        except Exception as e2:  # noqa: BLE001 - HELM drops the judge on any error here
            return Verdict(judge, PARSE_FAILED, raw_text=text, error=f"invalid JSON after repair: {e2}")
    if validation != "strict" and not isinstance(parsed, dict):
        # medhelm 0.8.0's recursive validator reads `data[key]`, which fails on a list or a string
        # (the annotator then drops the judge); 0.5.16 only tests `key in data`.
        return Verdict(judge, PARSE_FAILED, raw_text=text, error=f"unexpected JSON shape: {type(parsed).__name__}")
    try:
        for criterion, subkeys in jury.criteria.items():
            if criterion not in parsed:
                return Verdict(judge, PARSE_FAILED, raw_text=text, error=f"missing criterion {criterion!r}")
            for sub in (subkeys if validation == "strict" else ()):
                if sub not in parsed[criterion]:
                    return Verdict(judge, PARSE_FAILED, raw_text=text,
                                   error=f"criterion {criterion!r} lacks {sub!r}")
    except TypeError as e:  # e.g. a list or a number where an object was expected
        return Verdict(judge, PARSE_FAILED, raw_text=text, error=f"unexpected JSON shape: {e}")
    return Verdict(judge, OK, parsed=parsed, raw_text=text)


def assemble_annotation(prompt: str | None, verdicts: list[Verdict]) -> dict[str, Any]:
    """HELM's annotation dict: prompt_text plus one entry per judge that parsed."""
    if prompt is None:
        return {"prompt_text": None, "empty_output_equivalence_judgement": False}
    annotation: dict[str, Any] = {"prompt_text": prompt}
    for v in verdicts:
        if v.status == OK:
            annotation[v.judge] = v.parsed
    return annotation
