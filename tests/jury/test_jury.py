"""Jury parsing and repair rules (HELM's LLMAsJuryAnnotator), with explicit statuses."""
from medhelm_core import jury
from medhelm_core.parts import JuryDef

J = JuryDef(name="demo", prompt_template="Q={QUESTION}\nR={RESPONSE}\nG={GOLD_RESPONSE}\n$$ not a placeholder",
            criteria={"accuracy": ["score", "explanation"], "clarity": ["score", "explanation"]},
            judges={"gpt": {"model_name": "o/a", "model_deployment": "d/a"},
                    "claude": {"model_name": "o/b", "model_deployment": "d/b"}})
GOOD = '{"accuracy": {"score": 4, "explanation": "x"}, "clarity": {"score": 5, "explanation": "y"}}'


def _state(text):
    return {"instance": {"input": {"text": "why?"}, "references": [{"output": {"text": "gold"}, "tags": ["correct"]}]},
            "result": {"completions": [{"text": text}]}}


def test_prompt_uses_raw_input_response_and_first_reference():
    assert jury.jury_prompt(J, _state(" answer ")) == "Q=why?\nR= answer \nG=gold\n$ not a placeholder"


def test_blank_output_skips_the_jury():
    assert jury.jury_prompt(J, _state("  \n")) is None
    assert jury.assemble_annotation(None, []) == {"prompt_text": None, "empty_output_equivalence_judgement": False}


def test_parse_ok_with_surrounding_text_and_extra_keys():
    v = jury.parse_judge_output(J, "gpt", "Sure!\n" + GOOD[:-1] + ', "note": "extra"}\nThanks')
    assert v.status == jury.OK and v.parsed["note"] == "extra"


def test_missing_closing_brace_is_repaired_once():
    text = '{"accuracy": {"score": 4, "explanation": "x"}, "clarity": {"score": 5, "explanation": "y"}'
    assert jury.parse_judge_output(J, "gpt", text).status == jury.OK


def test_parse_failures_are_explicit():
    assert jury.parse_judge_output(J, "gpt", "no json here").status == jury.PARSE_FAILED
    v = jury.parse_judge_output(J, "gpt", '{"accuracy": {"score": 4, "explanation": "x"}}')
    assert v.status == jury.PARSE_FAILED and "clarity" in v.error
    assert jury.parse_judge_output(J, "gpt", '{"accuracy": 3, "clarity": 4}').status == jury.PARSE_FAILED


def test_annotation_keeps_only_judges_that_parsed():
    ok = jury.parse_judge_output(J, "gpt", GOOD)
    bad = jury.Verdict("claude", jury.REQUEST_FAILED, error="HTTP 500")
    ann = jury.assemble_annotation("P", [ok, bad])
    assert ann == {"prompt_text": "P", "gpt": ok.parsed}


def test_judge_request_is_helms():
    req = jury.judge_request(J.judges["gpt"], "P")
    assert (req["temperature"], req["max_tokens"], req["stop_sequences"], req["model_deployment"]) == \
        (0.0, 4096, [], "d/a")
