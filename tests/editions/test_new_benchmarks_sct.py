"""sct_bench (medhelm 0.8.0 only) against ../shared/oracle/medhelm-0.8.0/new-benchmarks: its 8 golden
runs (4 variants x 2 models), then the rating parser, the scores and the scenario's rules case by
case, upstream quirks included (`scenarios/sct_bench_scenario.py`, `metrics/sct_bench_metrics.py`)."""
from __future__ import annotations

import pytest

from medhelm_core.catalog import load_catalog
from medhelm_core.errors import MedhelmError
from medhelm_core.metrics import create_metric
from medhelm_core.metrics.base import EvalContext
from medhelm_core.tokenizers import get_tokenizer
from tests.editions.new_benchmarks import assert_run_equals_medhelm, golden_runs

EDITION = "medhelm-0.8.0"
CLASS = "helm.benchmark.metrics.sct_bench_metrics.SCTBenchMetric"
RUNS = golden_runs("sct_bench")

cat = load_catalog((), EDITION)
bench = cat.benchmark("sct_bench")
metric_module = bench.module("metric")
scenario_module = bench.module("scenario")
RULE = metric_module.RatingRule.from_text(bench.text["metric"])


def parse(text):
    return metric_module.parse_sct_rating(text, RULE)


# ----------------------------------------------------------------------------- golden runs
def test_the_golden_has_the_four_variants_of_both_models():
    assert len(RUNS) == 8


@pytest.mark.parametrize("run", RUNS)
def test_sct_bench_run_equals_medhelm(out, run):
    assert_run_equals_medhelm(out, run)


# ----------------------------------------------------------------------------- edition
def test_sct_bench_exists_only_in_medhelm_080():
    default = load_catalog()
    assert "sct_bench" not in default.benchmarks
    assert "--edition medhelm-0.8.0" in default.run_spec_functions.why_missing("sct_bench")
    assert bench.tier == "public"


# ----------------------------------------------------------------------------- rating parser
@pytest.mark.parametrize("text,expected", [
    ("Rating: -2", -2),
    ("Rating: -1\nExplanation: fever", -1),
    ("Rating: 0", 0),
    ("Rating: +1", 1),
    ("Rating: +2 because", 2),
    ("The answer.\nRating: +1", 1),
    ("Rating: 10", 0),              # "1" is no token, "0" is
    ("Rating: 1", None),            # no "+": unparsable
    ("Rating: 2", None),
    ("Rating:+1", None),            # no space after the colon
    ("Rating: -2, 0", None),        # joins to "-20": out of range
    ("Rating: 0 0", 0),             # joins to "00"
    ("Rating: +1-1", None),         # "+1-1" is no integer
    ("Rating:      +1", None),      # the token lies past the 5-character window
    ("I would rate this +1.", None),
    ("", None),
    ("rating: +1", None),           # the marker is case-sensitive
    ("Rating: +2 Rating: -1", 2),   # the first marker counts
])
def test_parse_sct_rating(text, expected):
    assert parse(text) == expected


# ----------------------------------------------------------------------------- scores
@pytest.mark.parametrize("distribution,rating,score,member", [
    ([0.0, 0.0, 7.0, 5.0, 7.0], 0, 1.0, 1.0),
    ([0.0, 0.0, 7.0, 5.0, 7.0], 1, 5.0 / 7.0, 1.0),
    ([0.0, 0.0, 7.0, 5.0, 7.0], -2, 0.0, 0.0),
    ([0.1, 0.0, 0.25, 0.5, 0.15], 2, 0.15 / 0.5, 1.0),   # fractional weights
    ([0.0, 0.0, 0.0, 0.0, 0.0], 0, 0.0, 0.0),            # all-zero panel: 0 whatever the rating
    ([0.0, 0.0, 0.0, 0.0, 0.0], -2, 0.0, 0.0),
])
def test_scores(distribution, rating, score, member):
    assert metric_module.sct_score(distribution, rating) == pytest.approx(score)
    assert metric_module.expert_set_membership(distribution, rating) == member


def _state(text, distribution, iid="1"):
    inst = {"input": {"text": "q"}, "references": [{"output": {"text": "0"}, "tags": ["correct"]}],
            "split": "test", "id": iid, "extra_data": {"expert_distribution": distribution}}
    return {"instance": inst, "train_trial_index": 0, "request": {"prompt": "q"},
            "result": {"completions": [{"text": text, "logprob": 0, "tokens": []}]}}


def _evaluate(texts, distribution):
    metric = create_metric({"class_name": CLASS, "args": {}}, cat.metrics)
    states = [_state(t, distribution, str(i)) for i, t in enumerate(texts)]
    ctx = EvalContext(adapter_spec={"method": "generation", "num_train_trials": 1}, request_states=states,
                      tokenizer=get_tokenizer(None))
    return [{s.name["name"]: s.mean for s in p.stats} for p in metric.evaluate(ctx).per_instance_stats]


@pytest.mark.parametrize("text,score,member", [
    ("  Rating: +1  ", 5.0 / 7.0, 1.0),   # stripped first
    ("Rating: 10", 1.0, 1.0),              # read as 0
    ("Rating: 1", 0.0, 0.0),               # unparsable: both 0
    ("Rating: -2, 0", 0.0, 0.0),
    ("Rating:+1", 0.0, 0.0),
])
def test_metric_stats(text, score, member):
    [stats] = _evaluate([text], [0.0, 0.0, 7.0, 5.0, 7.0])
    assert list(stats) == ["sct_score", "sct_expert_set_membership"]
    assert stats["sct_score"] == pytest.approx(score) and stats["sct_expert_set_membership"] == member


def test_metric_all_zero_panel_scores_zero():
    assert _evaluate(["Rating: 0"], [0.0] * 5) == [{"sct_score": 0.0, "sct_expert_set_membership": 0.0}]


def test_metric_without_completion_has_no_stats():
    metric = create_metric({"class_name": CLASS, "args": {}}, cat.metrics)
    state = _state("x", [1.0] * 5)
    state["result"]["completions"] = []
    assert metric.evaluate_generation({}, state, None) == []


# ----------------------------------------------------------------------------- scenario
@pytest.mark.parametrize("distribution,label", [
    ([0.0, 3.0, 2.0, 3.0, 3.0], "-1"),   # a tie: the first maximum
    ([7.0, 3.0, 7.0, 7.0, 1.0], "-2"),
    ([0.0, 1.0, 0.0, 0.0, 5.0], "+2"),
    ([0.1, 0.0, 0.25, 0.5, 0.15], "+1"),
    ([0.0, 0.0, 0.0, 0.0, 0.0], "-2"),   # all-zero panel
])
def test_reference_is_the_first_maximum(distribution, label):
    assert scenario_module.best_rating(distribution, bench.text["scenario"]["rating_labels"]) == label


def test_prompt_variants():
    text = bench.text["scenario"]
    plain = scenario_module.prompt_template(text, False, False)
    assert "(-2, -1, 0, +1, +2).\n" in plain and "brief explanation" not in plain
    assert "a brief explanation for your choice." in scenario_module.prompt_template(text, True, False)
    # Run-entry arguments are strings: "False" is truthy (medhelm's bug).
    assert scenario_module.prompt_template(text, "False", "False") == scenario_module.prompt_template(text, True, True)
    few = scenario_module.prompt_template(text, False, True)
    assert "## Examples with Response Labels### Scenario\n" in few and "Rating: -2\n### Scenario" in few
    assert few.endswith("Rating: +2\n## Scenario\n\n{{ scenario }}\n\n## Hypothesis\n\n{{ hypothesis }}\n\n"
                        "## Additional Information\n\n{{ additional information }}\n\n## Response")


def test_placeholders_are_a_replace_chain():
    row = {"sct_stem": "Stem with {{ hypothesis }} inside", "question": "Q", "additional_info": "I"}
    out = scenario_module.fill("{{ scenario }}|{{ hypothesis }}|{{ additional information }}", row,
                               bench.text["scenario"]["placeholders"])
    assert out == "Stem with Q inside|Q|I"


def _load(tmp_path, monkeypatch, data: bytes, args=None):
    (tmp_path / "sct_bench").mkdir()
    (tmp_path / "sct_bench" / "sct_cleaned_full.csv").write_bytes(data)
    monkeypatch.setenv("MEDHELM_DATA_MIRROR", str(tmp_path))
    return scenario_module.load(bench, args or {})


def test_csv_rules(tmp_path, monkeypatch):
    data = (b"question_id,sct_stem,question,additional_info,-2,-1,0,1,2\r\n"
            b"7,A\xffB,Q,I,0,1,1,0,0\r\n"
            b"8,S,,I,1,0,0,0,0\r\n"                       # empty field: skipped
            b'9,"line one\r\nline two",Q,I,0,0,0,0,0\r\n')
    instances = _load(tmp_path, monkeypatch, data)
    assert [i["id"] for i in instances] == ["7", "9"]
    first, second = instances
    assert "## Scenario\n\nAB\n\n" in first["input"]["text"]          # invalid UTF-8 byte dropped
    assert "line one\nline two" in second["input"]["text"]           # CR LF inside a quoted field -> LF
    assert first["references"] == [{"output": {"text": "-1"}, "tags": ["correct"]}]
    assert first["extra_data"] == {"expert_distribution": [0.0, 1.0, 1.0, 0.0, 0.0]}
    assert second["references"][0]["output"]["text"] == "-2" and first["split"] == "test"


def test_bad_panel_and_unknown_argument_fail(tmp_path, monkeypatch):
    with pytest.raises(MedhelmError, match="sct_bench: cannot parse"):
        _load(tmp_path, monkeypatch, b"question_id,sct_stem,question,additional_info,-2,-1,0,1,2\n7,S,Q,I,x,0,0,0,0\n")
    with pytest.raises(MedhelmError, match="SCTBenchScenario takes only reason, few_shot"):
        scenario_module.check(bench, {"language": "en"})


def test_run_spec_names_and_args():
    fn = cat.run_spec_functions["sct_bench"]
    assert fn()["name"] == "sct_bench" and fn()["scenario_spec"]["args"] == {"reason": False, "few_shot": False}
    spec = fn(reason="False")   # a string: truthy
    assert spec["name"] == "sct_bench:reason=True" and spec["scenario_spec"]["args"] == {"reason": "False", "few_shot": False}
    assert fn(reason="True", few_shot="True")["name"] == "sct_bench:reason=True,few_shot=True"
    assert fn(few_shot="True")["name"] == "sct_bench:few_shot=True"
    with pytest.raises(TypeError):
        fn(language="en")
