"""`medhelm-run` expands its confs once and decides once which runs are up to date (issue 41):
the register_suite job takes the entries the command expanded, and the execution the command
starts takes the plan's verdict. A rerun with nothing new decides from the plan alone, without
registering anything or starting a Dagster run."""
from pathlib import Path

import pytest

from medhelm_cli import run_main
from medhelm_core.run import entries as entry_layer
from medhelm_core.run import suite as suite_layer
from tests.mock_server import MockServer
from tests.oracle import SYNTHETIC
from tests.parity import lay_out_inputs

ARGS = ["--conf-paths", "work/conf/private.conf", "--suite", "once", "--max-eval-instances", "3",
        "--output-path", "out", "--local-path", "work/prod_env"]


@pytest.fixture
def laid_out(tmp_path, monkeypatch):
    """The golden synthetic inputs at tmp_path/work against a mock model server, in tmp_path (the working
    directory) with tmp_path/dagster_home the Dagster home (set through the test's monkeypatch); yields
    the server."""
    server = MockServer()
    try:
        env = lay_out_inputs(SYNTHETIC / "inputs", tmp_path, server.base_url) / "prod_env"
        (env / "credentials.conf").write_text('mockaiApiKey: "sk-mock-not-a-secret"\n')
        monkeypatch.chdir(tmp_path)
        monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "dagster_home"))
        yield server
    finally:
        server.close()


def _counting(monkeypatch, module, name: str) -> list:
    calls, real = [], getattr(module, name)

    def counted(*args, **kwargs):
        calls.append(args)
        return real(*args, **kwargs)

    monkeypatch.setattr(module, name, counted)
    return calls


def _dagster_runs(home: Path) -> int:
    import dagster as dg

    with dg.DagsterInstance.from_config(str(home)) as instance:
        return instance.get_runs_count()


def test_one_expansion_and_one_up_to_date_decision_per_invocation(tmp_path, monkeypatch, laid_out, capsys):
    expansions = _counting(monkeypatch, entry_layer, "expand_selection")
    decisions = _counting(monkeypatch, suite_layer, "up_to_date")
    registered = _counting(monkeypatch, entry_layer, "register_runs")

    assert run_main(ARGS) == 0
    runs = len(registered[0][2])
    assert runs > 1
    assert (len(expansions), len(decisions), len(registered)) == (1, 1, 1)
    first_dagster_runs = _dagster_runs(tmp_path / "dagster_home")
    assert "0 reused" in capsys.readouterr().err

    expansions.clear(), decisions.clear(), registered.clear()
    assert run_main(ARGS) == 0
    assert (len(expansions), len(decisions), len(registered)) == (1, 1, 0)
    assert _dagster_runs(tmp_path / "dagster_home") == first_dagster_runs
    assert f"{runs} runs: {runs} reused, 0 new calls" in capsys.readouterr().err


def test_the_runs_build_their_datasets_and_the_dagster_job_records_those_builds(tmp_path, monkeypatch, laid_out):
    """medhelm-run starts its runs before the Dagster jobs that record the suite and its datasets:
    the first run of a dataset builds it (once) unless the dataset job got there first, and that
    job reports each build as its own."""
    import threading

    import dagster as dg

    from medhelm_core.run import datasets as dataset_layer

    builds, callers, caller = [], [], threading.local()
    real_build, real_asked = dataset_layer._build_dataset, dataset_layer.build_dataset

    def counted(ws, key):
        info = real_build(ws, key)
        builds.append((key, info["built"], caller.who))
        return info

    def asked(ws, key, for_run=False):
        caller.who = "run" if for_run else "dagster job"
        callers.append(caller.who)
        return real_asked(ws, key, for_run=for_run)

    monkeypatch.setattr(dataset_layer, "_build_dataset", counted)
    monkeypatch.setattr(dataset_layer, "build_dataset", asked)
    assert run_main(ARGS) == 0
    built = [key for key, did, _ in builds if did]
    assert built and len(built) == len(set(built))  # each dataset built once ...
    # ... the first by a run, before the Dagster job (which builds those no started run reached yet)
    assert [who for _, did, who in builds if did][0] == "run", builds
    assert "dagster job" in callers
    with dg.DagsterInstance.from_config(str(tmp_path / "dagster_home")) as instance:
        events = instance.fetch_materializations(dg.AssetKey("private_datasets"), limit=100).records
        recorded = {e.asset_materialization.partition: e.asset_materialization.metadata["rebuilt"].value
                    for e in events}
    assert recorded == {key: True for key in built}
