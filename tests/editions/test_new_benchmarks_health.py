"""health_bench and health_bench_professional (medhelm 0.8.0 only) against medhelm 0.8.0's own output
(../shared/oracle/medhelm-0.8.0/new-benchmarks), plus medhelm's scoring rules on hand-written cases."""
from __future__ import annotations

import json

import duckdb
import pytest

from medhelm_core import adapt, jury
from medhelm_core.clients.openai_compatible import OpenAICompatibleClient
from medhelm_core.errors import MedhelmError
from medhelm_core.jury.rubric import (
    PHYSICIAN_CALL,
    RubricJury,
    conversation,
    corrected_rubric_score,
    helm_rubric_score,
    rubric_call,
)
from tests.editions.new_benchmarks import GOLD, assert_run_equals_medhelm, golden_runs

BENCHMARKS = ["health_bench", "health_bench_professional"]
RUNS = [r for b in BENCHMARKS for r in golden_runs(b)]


def test_every_benchmark_has_golden_runs():
    assert len(RUNS) == 4


@pytest.mark.parametrize("run", RUNS)
def test_run_equals_medhelm(out, run):
    assert_run_equals_medhelm(out, run)


def test_verdicts_one_row_per_judge_call_and_a_summary_per_judge(out):
    with duckdb.connect(str(out / "medhelm.duckdb"), read_only=True) as con:
        rows = con.execute("SELECT run_name, position, annotator, judge, status, parsed FROM judge_verdicts"
                           " WHERE run_name LIKE 'health_bench%'").fetchall()
    assert rows
    calls = [r for r in rows if r[4] != jury.SUMMARY]
    summaries = [r for r in rows if r[4] == jury.SUMMARY]
    assert {r[4] for r in calls} <= {jury.OK, jury.PARSE_FAILED, jury.REQUEST_FAILED}
    assert any(r[4] == jury.PARSE_FAILED for r in calls)  # the mock's unparsable / key-less grader answers
    assert all("/" in r[2] for r in calls) and all("/" not in r[2] for r in summaries)
    # HELM's score in each summary equals the annotation's.
    for run in RUNS:
        states = json.loads((GOLD / run / "scenario_state.json").read_text())["request_states"]
        name = run.split(":")[0]
        for run_name, pos, _, judge, _, parsed in summaries:
            if run_name == run:
                assert json.loads(parsed)["helm_score"] == states[pos]["annotations"][name][judge]["accuracy"]["score"]


# ----------------------------------------------------------------------------- hand-written cases
JUDGES = {"gpt": {"model_name": "o/a", "model_deployment": "d/a"},
          "llama": {"model_name": "o/b", "model_deployment": "d/b"}}
CRITERIA = {"explanation": [], "criteria_met": ["true", "false"]}


def _jury(physician: bool = False) -> RubricJury:
    return RubricJury("hb", "C=<<conversation>>\nR=<<rubric_item>>", CRITERIA, JUDGES,
                      physician_template="U=<<user_message>>|L=<<llm_response>>|P=<<physician_response>>"
                      if physician else None, shared_responses=physician)


def _state(rubrics, answer="an answer", **extra):
    return {"instance": {"id": "0", "input": {"text": "", "messages": [{"role": "user", "content": "hi"}]},
                         "extra_data": {"rubrics": rubrics, **extra}},
            "result": {"completions": [{"text": answer}]}}


def _ok(met, call, judge="gpt"):
    return jury.Verdict(judge, jury.OK, parsed={"explanation": "e", "criteria_met": met}, call=call)


def _failed(call, judge="gpt"):
    return jury.Verdict(judge, jury.PARSE_FAILED, raw_text="no json", call=call)


def test_negative_item_met_is_earned_with_ten_plus_points():
    rubrics = [{"criterion": "good", "points": 6}, {"criterion": "bad", "points": -6}]
    # medhelm: the -6 item counts 4 and is EARNED when its undesirable criterion is met.
    assert helm_rubric_score(rubrics, [{"criteria_met": False}, {"criteria_met": True}]) == 4 / 10
    # simple-evals: 6 possible, the met undesirable item subtracts 6.
    assert corrected_rubric_score(rubrics, [False, True]) == -1.0
    assert helm_rubric_score([{"points": -10}], [{"criteria_met": True}]) is None  # 10 + -10 = 0 points


def test_string_verdicts_count():
    assert helm_rubric_score([{"points": 2}], [{"criteria_met": "True"}]) == 1.0
    assert helm_rubric_score([{"points": 2}], [{"criteria_met": "false"}]) == 0.0


def test_failed_grading_call_shifts_the_zip_alignment():
    rubrics = [{"criterion": "a", "points": 5}, {"criterion": "b", "points": 3}, {"criterion": "c", "points": 2}]
    j = _jury()
    verdicts = {"gpt": [_failed(rubric_call(0)), _ok(True, rubric_call(1)), _ok(False, rubric_call(2))],
                "llama": [_ok(False, rubric_call(0), "llama"), _ok(True, rubric_call(1), "llama"),
                          _ok(False, rubric_call(2), "llama")]}
    outcome = j.annotate(_state(rubrics), verdicts)
    # gpt's item-b "met" is paired with item a (5 points): 5/10; the correct pairing, the failed
    # item a left out, gives 3/5.
    assert outcome.annotation["gpt"]["accuracy"]["score"] == 0.5
    assert len(outcome.annotation["gpt"]["accuracy"]["criteria"]) == 2
    assert outcome.summaries["gpt"]["corrected_score"] == 3 / 5
    assert outcome.summaries["gpt"]["failed_calls"] == 1
    assert outcome.annotation["llama"]["accuracy"]["score"] == 0.3 == outcome.summaries["llama"]["corrected_score"]
    assert list(outcome.annotation) == ["gpt", "llama"] and "prompt_text" not in outcome.annotation


def test_calls_one_per_rubric_item_and_blank_answers_ask_nothing():
    rubrics = [{"criterion": "It's \"quoted\"", "points": 1}, {"criterion": "b", "points": -2}]
    calls = _jury().calls(_state(rubrics))
    assert list(calls) == ["gpt", "llama"]
    assert [c.label for c in calls["gpt"]] == [rubric_call(0), rubric_call(1)]
    assert calls["gpt"][0].prompt == "C=user: hi\n\nassistant: an answer\nR=" + str(rubrics[0])
    assert _jury().calls(_state(rubrics, answer="  \n")) is None
    assert _jury().calls({"instance": {"id": "0", "input": {"text": ""}, "extra_data": {}},
                          "result": {"completions": [{"text": "x"}]}}) == {}
    assert conversation(None, "x") == "assistant: x"


def test_physician_response_null_vs_absent():
    rubrics = [{"criterion": "a", "points": 4}]
    j = _jury(physician=True)
    absent = j.calls(_state(rubrics, physician_response=""))  # the scenario's default for an absent one
    assert [c.label for c in absent["gpt"]] == [rubric_call(0), PHYSICIAN_CALL]
    assert absent["gpt"][1].prompt == "U=user: hi\n\nassistant: an answer|L=an answer|P="
    null = j.calls(_state(rubrics, physician_response=None))
    assert [c.label for c in null["gpt"]] == [rubric_call(0)]
    verdicts = {"gpt": [_ok(True, rubric_call(0))], "llama": [_ok(False, rubric_call(0), "llama")]}
    outcome = j.annotate(_state(rubrics, physician_response=None), verdicts)
    # Shared list: llama is scored on gpt's response (met), its own "not met" is ignored.
    assert outcome.annotation["gpt"]["accuracy"]["score"] == 1.0
    assert outcome.annotation["llama"]["accuracy"]["score"] == 1.0
    assert outcome.summaries["llama"]["corrected_score"] == 0.0
    assert outcome.annotation["llama"]["accuracy"]["criteria"] == [v.parsed for v in
                                                                  verdicts["gpt"] + verdicts["llama"]]


def test_professional_physician_score_and_shared_list():
    rubrics = [{"criterion": "a", "points": 4}, {"criterion": "b", "points": 6}]
    phys = lambda k, judge: jury.Verdict(judge, jury.OK, parsed={"criteria_met": k, "explanation": "e"},
                                         call=PHYSICIAN_CALL)
    verdicts = {"gpt": [_ok(False, rubric_call(0)), _ok(True, rubric_call(1)), phys(4, "gpt")],
                "llama": [_ok(True, rubric_call(0), "llama"), _ok(True, rubric_call(1), "llama"), phys(8, "llama")]}
    outcome = _jury(physician=True).annotate(_state(rubrics, physician_response="doc"), verdicts)
    assert outcome.annotation["gpt"]["accuracy"]["score"] == (0.6 + 0.4) / 2
    assert outcome.annotation["llama"]["accuracy"]["score"] == (0.6 + 0.8) / 2  # judge 1's rubric fraction
    assert outcome.summaries["llama"]["corrected_score"] == (1.0 + 0.8) / 2
    assert len(outcome.annotation["gpt"]["accuracy"]["criteria"]) == 6
    with pytest.raises(MedhelmError, match="medhelm's annotator fails here too"):
        bad = {"gpt": [_ok(True, rubric_call(0)), _ok(True, rubric_call(1)), phys("7", "gpt")], "llama": []}
        _jury(physician=True).annotate(_state(rubrics, physician_response="doc"), bad)


def test_chat_request_is_helms_chat_adapter():
    spec = {"method": "chat", "model": "m/x", "model_deployment": "d/x", "temperature": 0.0, "num_outputs": 1,
            "max_tokens": 512, "stop_sequences": [], "num_train_trials": 1, "max_train_instances": 0,
            "instructions": "You are a helpful assistant."}
    msgs = [{"role": "system", "content": "s"}, {"role": "user", "content": "u"}]
    inst = {"input": {"text": "", "messages": msgs}, "references": [], "split": "test", "id": "0"}
    (state,) = adapt.build_request_states(spec, [inst])
    assert state["request"]["prompt"] == "" and state["request"]["messages"] == msgs
    assert list(state["request"])[-1] == "messages" and "output_mapping" not in state
    client = OpenAICompatibleClient(base_url="http://127.0.0.1:9/v1", api_key="k")
    assert client.raw_request(state["request"])["messages"] == msgs
    bad = dict(state["request"], messages=[{"role": "user", "content": "u"}, {"role": "assistant", "content": "a"}])
    assert client.attempt(bad).kind == "fatal"
