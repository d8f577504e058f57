"""A recomputed stat that differs from the published one says why when the published run was made
by a HELM older than a change of that stat's definition (medhelm_core/published/metric_history.yaml):
a published-format suite built here from the public oracle's med_qa runs, one of them with HELM's
`output_mapping_pattern` set (the condition of the 0.5.15 change), its published exact-match values
altered as an older HELM's could differ, dated before and after that release."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import duckdb
import pytest

from medhelm_cli.imports import main as import_main
from medhelm_core.published.metric_history import drift_causes, metric_changes, parse_date
from tests.oracle import PUBLIC

SUITE = PUBLIC / "benchmark_output" / "runs" / "public-n50"
WITH_PATTERN = "med_qa:model=mockai_mock-gpt-a,model_deployment=mockai_mock-gpt-a"
WITHOUT = "med_qa:model=mockai_mock-gpt-b,model_deployment=mockai_mock-gpt-b"


def _published(root: Path, date: str) -> Path:
    """Two med_qa runs as published on `date`; every instance's exact_match flipped in both."""
    suite = root / "benchmark_output" / "runs" / "old"
    for name in (WITH_PATTERN, WITHOUT):
        shutil.copytree(SUITE / name, suite / name)
        per_instance = json.loads((suite / name / "per_instance_stats.json").read_text())
        for entry in per_instance:
            for s in entry["stats"]:
                if s["name"]["name"] == "exact_match":
                    s["sum"] = s["mean"] = s["min"] = s["max"] = 1.0 - s["sum"]
                    s["sum_squared"] = s["sum"]
        (suite / name / "per_instance_stats.json").write_text(json.dumps(per_instance))
    spec = json.loads((suite / WITH_PATTERN / "run_spec.json").read_text())
    spec["adapter_spec"]["output_mapping_pattern"] = r"\b([A-E])\b"
    (suite / WITH_PATTERN / "run_spec.json").write_text(json.dumps(spec))
    (suite / "summary.json").write_text(json.dumps({"suites": ["old"], "suite": "old", "date": date}))
    return root / "benchmark_output"


def _causes(tmp_path: Path, date: str) -> dict[str, set[str]]:
    source = _published(tmp_path / date, date)
    out = tmp_path / date / "out"
    assert import_main(["--source", str(source), "--suite", "old", "--with-completions", "--rescore", "-o", str(out),
                        "-q"]) == 0
    with duckdb.connect(str(out / "medhelm.duckdb"), read_only=True) as conn:
        rows = conn.execute("SELECT run_name, cause FROM rescore_comparison WHERE name = 'exact_match' "
                            "AND level = 'instance' AND status = 'recomputed' AND NOT equal").fetchall()
    found: dict[str, set[str]] = {}
    for run, cause in rows:
        found.setdefault(run, set()).add(cause)
    return found


def test_a_stat_whose_definition_changed_since_the_run_names_the_change(tmp_path):
    before = _causes(tmp_path, "2026-03-01")
    (cause,) = before[WITH_PATTERN]
    assert cause.startswith("metric changed since the run's HELM version:") and "HELM 0.5.15" in cause \
        and "5dede25d4" in cause and "dated 2026-03-01" in cause
    assert before[WITHOUT] == {"value differs"}  # no output-mapping pattern: the change cannot explain it
    after = _causes(tmp_path, "2026-06-01")  # made after 0.5.15: the change is not the cause
    assert after[WITH_PATTERN] == {"value differs"}


def test_the_history_applies_by_class_condition_and_date():
    change = metric_changes()[0]
    spec = {"adapter_spec": {"output_mapping_pattern": "(x)"},
            "metric_specs": [{"class_name": change.classes[0], "args": {"names": ["exact_match", "f1_score"]}}]}
    assert set(drift_causes(spec, parse_date("2025-06-01"))) == {"exact_match", "f1_score"}
    assert "the run's HELM version is unknown" in drift_causes(spec, None)["exact_match"]
    assert drift_causes(spec, change.released) == {}  # released that day: may be the new definition
    assert drift_causes({**spec, "metric_specs": [{"class_name": "other.Metric"}]}, None) == {}
    assert drift_causes({**spec, "adapter_spec": {}}, None) == {}
    assert parse_date("2026-11-29T10:00:00") == parse_date("2026-11-29") and parse_date("n/a") is None


JURY_RUN = "medication_qa:model=mockai_mock-gpt-a,model_deployment=mockai_mock-gpt-a"
RETIRED = "helm.benchmark.metrics.medication_qa_metrics.MedicationQAMetric"


def _helm_055_run(root: Path, date: str | None) -> Path:
    """medication_qa as HELM 0.5.5 wrote it: its jury metric the retired per-scenario class (args {}),
    and one instance no judge scored (every judge's entry None), published as 0.0, 0.5.5's default."""
    suite = root / "benchmark_output" / "runs" / "v055"
    shutil.copytree(SUITE / JURY_RUN, suite / JURY_RUN)
    run = suite / JURY_RUN
    spec = json.loads((run / "run_spec.json").read_text())
    spec["metric_specs"] = [{"class_name": RETIRED, "args": {}} if m["class_name"].endswith("LLMJuryMetric") else m
                            for m in spec["metric_specs"]]
    (run / "run_spec.json").write_text(json.dumps(spec))
    state = json.loads((run / "scenario_state.json").read_text())
    first = state["request_states"][0]
    first["annotations"]["medication_qa"] = {k: (None if k != "prompt_text" else v)
                                             for k, v in first["annotations"]["medication_qa"].items()}
    (run / "scenario_state.json").write_text(json.dumps(state))
    per_instance = json.loads((run / "per_instance_stats.json").read_text())
    for entry in per_instance:
        for s in entry["stats"]:
            if entry["instance_id"] == first["instance"]["id"] and s["name"]["name"] == "medication_qa_accuracy":
                s.update(sum=0.0, mean=0.0, min=0.0, max=0.0, sum_squared=0.0)
    (run / "per_instance_stats.json").write_text(json.dumps(per_instance))
    if date:
        (suite / "summary.json").write_text(json.dumps({"suites": ["v055"], "suite": "v055", "date": date}))
    return root / "benchmark_output"


def _jury_rows(tmp_path: Path, date: str | None) -> list[tuple]:
    source = _helm_055_run(tmp_path / str(date), date)
    out = tmp_path / str(date) / "out"
    assert import_main(["--source", str(source), "--suite", "v055", "--with-completions", "--rescore", "-o", str(out),
                        "-q"]) == 0
    with duckdb.connect(str(out / "medhelm.duckdb"), read_only=True) as conn:
        return conn.execute("SELECT status, equal, cause, count(*) FROM rescore_comparison "
                            "WHERE name = 'medication_qa_accuracy' AND level = 'instance' GROUP BY ALL").fetchall()


def test_helm_055_jury_classes_are_recomputed_with_their_own_default(tmp_path):
    # dated before 0.5.6: the retired class's 0.0 for the unscored instance, every instance equal
    assert _jury_rows(tmp_path, "2025-05-01") == [("recomputed", True, None, 50)]
    # no date: 0.5.6-0.5.7's definition (1.0), and the one difference names the change
    rows = sorted(_jury_rows(tmp_path, None), key=lambda r: r[1])
    assert [(s, e, n) for s, e, _, n in rows] == [("recomputed", False, 1), ("recomputed", True, 49)]
    assert "b83a9bfeb" in rows[0][2] and "no judge scored" in rows[0][2] and "version is unknown" in rows[0][2]
