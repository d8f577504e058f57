"""`--offline` (or MEDHELM_OFFLINE=1) refuses, before any call, every deployment not on this machine;
a suite with private-tier runs says where their text goes before the first call."""
import pytest

from medhelm_cli import run_main
from tests.oracle import SYNTHETIC
from tests.parity import lay_out_inputs


@pytest.fixture
def work(tmp_path, monkeypatch, mock_server):
    lay_out_inputs(SYNTHETIC / "inputs", tmp_path, mock_server.base_url)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "dagster_home"))
    return tmp_path


def _args(*extra):
    return ["--conf-paths", "work/conf/private.conf", "--suite", "p", "--max-eval-instances", "2",
            "--output-path", "out", "--local-path", "work/prod_env", *extra]


def test_offline_refuses_a_deployment_off_this_machine_before_any_call(work, mock_server, capsys, monkeypatch):
    deployments = work / "work" / "prod_env" / "model_deployments.yaml"
    deployments.write_text(deployments.read_text().replace(mock_server.base_url, "https://api.example.org/v1", 1))
    before = mock_server.stats()["total_requests"]
    monkeypatch.setenv("MEDHELM_OFFLINE", "1")
    assert run_main(_args()) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("medhelm-run: error: --offline: 1 deployment(s) would send text off "
                                               "this machine: ") and "(https://api.example.org)" in err[0]
    assert mock_server.stats()["total_requests"] == before and not (work / "out" / "medhelm.duckdb").exists()


def test_a_private_suite_says_where_its_text_goes_and_runs_offline_on_loopback(work, mock_server, capsys):
    assert run_main(_args("--offline")) == 0
    err = capsys.readouterr().err
    port = mock_server.base_url.split(":")[2].split("/")[0]
    line = next(ln for ln in err.splitlines() if "private-tier text" in ln)
    assert line.startswith("medhelm-run: private-tier text of 6 run(s) goes to: ")
    assert f"http://127.0.0.1:{port} (" in line and "mockai/mock-gpt-a" in line and "OFF THIS MACHINE" not in line
