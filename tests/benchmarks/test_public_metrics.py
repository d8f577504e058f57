"""The public tier's own metrics and the EhrSqlAnnotator, case by case against HELM 0.5.16's rules
(`metrics/medcalc_bench_metrics.py`, `metrics/medec_metrics.py`, `metrics/ehr_sql_metrics.py`,
`annotation/ehr_sql_annotator.py`), bugs included."""
from __future__ import annotations

import hashlib

import pytest

from medhelm_core import data_sources
from medhelm_core.catalog import default_catalog
from medhelm_core.metrics import create_metric
from medhelm_core.parts import LocalAnnotatorDef
from tests.oracle import SHARED

cat = default_catalog()
execution_accuracy = cat.benchmark("ehr_sql").module("metric").execution_accuracy
medcalc_accuracy = cat.benchmark("medcalc_bench").module("metric").medcalc_accuracy
medec_scores = cat.benchmark("medec").module("metric").medec_scores
MIRROR = SHARED / "data" / "public"


# ----------------------------------------------------------------------------- MedCalc-Bench
@pytest.mark.parametrize("prediction,reference,extra,expected", [
    ("9", "9", {"category": "risk"}, 1),
    ("9.0", "9", {"category": "severity"}, 0),                      # exact string for rule-based categories
    ("B", "B", {"category": "diagnosis"}, 1),
    ("25.2", "25.238", {"category": "lab", "lower_limit": "23.9", "upper_limit": "26.4"}, 0),  # HELM bug: lab -> 0
    ("25.2", "25.238", {"category": "lab test", "lower_limit": "23.9", "upper_limit": "26.4"}, 0),
    ("25.2", "25.238", {"category": "physical", "lower_limit": "23.9", "upper_limit": "26.4"}, 1),
    ("26.4", "25", {"category": "dosage conversion", "lower_limit": "23.9", "upper_limit": "26.4"}, 1),
    ("about 25", "25", {"category": "physical", "lower_limit": "23.9", "upper_limit": "26.4"}, 0),
    ("06/15/2021", "06/15/2021", {"category": "date", "lower_limit": "06/14/2021", "upper_limit": "06/16/2021"}, 1),
    ("2021-06-15", "06/15/2021", {"category": "date", "lower_limit": "06/14/2021", "upper_limit": "06/16/2021"}, 0),
    ("('14 weeks', '2 days')", "('14 weeks', '2 days')",
     {"category": "date", "lower_limit": "('14 weeks', '1 days')", "upper_limit": "('14 weeks', '3 days')"}, 1),
    ("14 weeks 2 days", "('14 weeks', '2 days')",
     {"category": "date", "lower_limit": "('14 weeks', '1 days')", "upper_limit": "('14 weeks', '3 days')"}, 0),
])
def test_medcalc_category_rules(prediction, reference, extra, expected):
    assert medcalc_accuracy(prediction, reference, extra, cat.benchmark("medcalc_bench").text["scenario"]) == expected


def _state(text, references, extra=None, annotations=None, iid="id0"):
    inst = {"input": {"text": "q"}, "references": references, "split": "test", "id": iid}
    if extra is not None:
        inst["extra_data"] = extra
    st = {"instance": inst, "train_trial_index": 0, "request": {"prompt": "p"},
          "result": {"completions": [{"text": text, "logprob": 0, "tokens": []}]}}
    if annotations is not None:
        st["annotations"] = annotations
    return st


def _ref(text):
    return {"output": {"text": text}, "tags": ["correct"]}


def _evaluate(class_name, state):
    from medhelm_core.metrics.base import EvalContext
    from medhelm_core.tokenizers import get_tokenizer

    ctx = EvalContext(adapter_spec={"method": "generation", "num_train_trials": 1}, request_states=[state],
                      tokenizer=get_tokenizer(None))
    result = create_metric({"class_name": class_name, "args": {}}, cat.metrics).evaluate(ctx)
    return {s.name["name"]: s.mean for s in result.per_instance_stats[0].stats} if result.per_instance_stats else {}


def test_medcalc_metric_strips_prediction_only():
    stats = _evaluate("helm.benchmark.metrics.medcalc_bench_metrics.MedCalcBenchMetric",
                      _state(" 9 \n", [_ref("9")], {"category": "risk", "lower_limit": "9", "upper_limit": "9"}, iid=898))
    assert stats == {"medcalc_bench_accuracy": 1}


# ----------------------------------------------------------------------------- MEDEC
@pytest.mark.parametrize("prediction,gold,expected", [
    ("CORRECT", "CORRECT", (1, 1)),
    ("CORRECT.", "CORRECT", (0, 0)),                  # exact "CORRECT" only
    ("correct", "CORRECT", (0, 0)),
    ("3 The patient has X.", "CORRECT", (0, 0)),
    ("3 The patient has X.", "3 The patient has Y.", (1, 0)),   # HELM bug: gold id is always -1
    ("CORRECT", "3 The patient has Y.", (0, 0)),
    ("There is an error", "3 The patient has Y.", (1, 0)),
    ("3", "3 ", (1, 1)),                                # an empty corrected sentence leaves a parsable id
])
def test_medec_scores(prediction, gold, expected):
    assert medec_scores(prediction, gold) == expected


def test_medec_metric_stats():
    stats = _evaluate("helm.benchmark.metrics.medec_metrics.MedecMetric", _state("CORRECT", [_ref("CORRECT")]))
    assert stats == {"medec_error_flag_accuracy": 1, "medec_error_sentence_accuracy": 1}


# ----------------------------------------------------------------------------- EHRSQL metric
def test_ehr_sql_execution_accuracy_rules():
    assert execution_accuracy("SELECT 1", "SELECT 1", [[1]], [[1]]) == 1          # rows come back from JSON as lists
    assert execution_accuracy("SELECT 1", "SELECT 1", [[1], [1]], [[1]]) == 1     # sets
    assert execution_accuracy("SELECT 1", "SELECT 1", [[1]], [1]) == 0            # value fallback never matches rows
    assert execution_accuracy("", "SELECT 1", [], []) == 1                        # both empty, no prediction
    assert execution_accuracy("SELECT 2", "SELECT 1", [], []) == 0                # both empty but a prediction
    assert execution_accuracy("", "", [], []) == 0                                # no gold query


def test_ehr_sql_metric_stats():
    name = "helm.benchmark.metrics.ehr_sql_metrics.EhrSqlMetric"
    ann = {"ehr_sql": {"predicted_result": [[0]], "ground_truth_result": [[0]], "query_error": None}}
    stats = _evaluate(name, _state("SELECT 0", [_ref("select 0")], {"is_impossible": False}, ann))
    assert stats == {"ehr_sql_execution_accuracy": 1, "ehr_sql_query_validity": 1, "ehr_sql_precision_answerable": 1,
                     "ehr_sql_recall_answerable": 1, "ehr_sql_total_predicted_answerable": 1,
                     "ehr_sql_total_ground_truth_answerable": 1}
    ann = {"ehr_sql": {"predicted_result": [], "ground_truth_result": [], "query_error": "No query generated"}}
    stats = _evaluate(name, _state("  ", [_ref("null")], {"is_impossible": True}, ann))
    assert stats == {"ehr_sql_execution_accuracy": 1, "ehr_sql_query_validity": 0, "ehr_sql_precision_answerable": 0,
                     "ehr_sql_recall_answerable": 0, "ehr_sql_total_predicted_answerable": 0,
                     "ehr_sql_total_ground_truth_answerable": 0}
    assert _evaluate(name, _state("SELECT 0", [_ref("select 0")])) == {}  # no annotation: no stat (as HELM)


# ----------------------------------------------------------------------------- EhrSqlAnnotator
@pytest.fixture
def ehr_annotator(tmp_path, monkeypatch):
    monkeypatch.setattr(data_sources, "DEFAULT_CACHE_ROOT", tmp_path / "cache")
    monkeypatch.setenv(data_sources.MIRROR_ENV, str(MIRROR))
    factory = cat.annotators["helm.benchmark.annotation.ehr_sql_annotator.EhrSqlAnnotator"]
    defn = factory({})
    assert isinstance(defn, LocalAnnotatorDef) and defn.name == "ehr_sql"
    return defn


def test_ehr_sql_annotator_executes_gold_and_prediction(ehr_annotator):
    before = hashlib.sha256((MIRROR / "ehr_sql" / "eicu.sqlite").read_bytes()).hexdigest()
    gold = "SELECT COUNT(*) FROM patient"
    out = ehr_annotator.annotate(_state("<SQL>\n```sql\nSELECT COUNT(*) FROM patient\n```\n</sql>", [_ref(gold)],
                                        {"value": {}}))
    assert out["query_error"] is None and out["predicted_result"] == out["ground_truth_result"]
    assert isinstance(out["predicted_result"][0], tuple)
    out = ehr_annotator.annotate(_state("   ", [_ref(gold)]))
    assert out["query_error"] == "No query generated" and out["predicted_result"] == []
    out = ehr_annotator.annotate(_state("SELEC nonsense", [_ref("null")], {"value": {"x": "1"}}))
    assert out["query_error"] == 'near "SELEC": syntax error'
    assert out["ground_truth_result"] == ["1"]                    # gold fails -> the values as they are
    out = ehr_annotator.annotate(_state("SELECT 1", [_ref("SELECT patientunitstayid FROM patient WHERE 0")],
                                        {"value": {"a": "7"}}))
    assert out["ground_truth_result"] == ["7"]                    # no row -> the values as they are
    out = ehr_annotator.annotate(_state("SELECT 1", [_ref("SELECT COUNT(*) FROM patient WHERE 0")],
                                        {"value": {"a": "7"}}))
    assert out["ground_truth_result"] == [(0,)]                   # a COUNT row: no fallback
    # A prediction that writes only touches this run's private copy, never the data files.
    out = ehr_annotator.annotate(_state("DELETE FROM patient", [_ref(gold)]))
    assert out["query_error"] is None
    after = ehr_annotator.annotate(_state(gold, [_ref(gold)]))
    assert after["predicted_result"] == [(0,)]                    # visible later in the same run, as in HELM
    assert hashlib.sha256((MIRROR / "ehr_sql" / "eicu.sqlite").read_bytes()).hexdigest() == before

