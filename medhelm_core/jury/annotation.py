"""The LLM jury, as HELM's `LLMAsJuryAnnotator` runs it, plus an explicit status per judge.

HELM keeps only the judges whose answer parsed and validated; the metric then averages whatever
is left and silently scores 1.0 (0.0 for configurable benchmarks) when nothing is. We build the
identical HELM annotation and, beside it, a verdict per judge whose `status` says what happened:
`ok`, `parse_failed`, `request_failed` or `skipped_empty_output`.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass
from string import Template
from typing import Any

from medhelm_core.parts import JuryDef

JUDGE_MAX_TOKENS = 4096
_JSON_OBJECT = re.compile(r"\{.*\}", re.DOTALL)

OK, PARSE_FAILED, REQUEST_FAILED, SKIPPED_EMPTY_OUTPUT = "ok", "parse_failed", "request_failed", "skipped_empty_output"


@dataclass
class Verdict:
    judge: str
    status: str
    parsed: dict | None = None
    raw_text: str | None = None
    error: str | None = None


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
