"""The multiple-choice benchmarks medhelm 0.8.0 adds (`synt_family_disclosure`, `synt_right_of_access`,
`synt_written_consent`, `medxpert_qa_text`) against medhelm 0.8.0's own output
(../shared/oracle/medhelm-0.8.0/new-benchmarks), and their absence from the default edition."""
from __future__ import annotations

import pytest

from medhelm_cli import run_main
from tests.editions.new_benchmarks import assert_run_equals_medhelm, golden_runs

BENCHMARKS = ["synt_family_disclosure", "synt_right_of_access", "synt_written_consent", "medxpert_qa_text"]
RUNS = [run for benchmark in BENCHMARKS for run in golden_runs(benchmark)]


def test_every_benchmark_has_golden_runs():
    assert len(RUNS) == 2 * len(BENCHMARKS)


@pytest.mark.parametrize("run", RUNS)
def test_run_equals_medhelm(out, run):
    assert_run_equals_medhelm(out, run)


def test_medxpert_qa_text_is_refused_under_helm_0516(tmp_path, monkeypatch, capsys):
    conf = tmp_path / "one.conf"
    conf.write_text('entries: [{description: "medxpert_qa_text:model=mockai/mock-gpt-a", priority: 1}]\n')
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "dagster_home"))
    (tmp_path / "prod_env").mkdir()
    code = run_main(["--conf-paths", str(conf), "--suite", "s", "--max-eval-instances", "1",
                     "--output-path", str(tmp_path / "benchmark_output"), "--local-path", str(tmp_path / "prod_env")])
    err = capsys.readouterr().err
    assert code == 2
    lines = err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("medhelm-run: error: ")
    assert ("Unknown run spec name: 'medxpert_qa_text' (medxpert_qa_text is a benchmark of medhelm-0.8.0 only: "
            "run it with --edition medhelm-0.8.0)") in lines[0]
