"""`medhelm-run` is one Dagster run over every cell of the invocation's benchmark × model grid, and
each cell still records its own materializations, check results and status (the synthetic private conf:
6 runs on two model deployments and one judge, against the mock server)."""
import re
import socket
import threading

import dagster as dg
from dagster._core.storage.dagster_run import RunsFilter

from medhelm_cli import run_main
from medhelm_dagster.partitions import grid_partitions
from tests.oracle import SYNTHETIC
from tests.parity import lay_out_inputs

PER_RUN = ["requests", "completions", "annotations", "instance_stats", "run_stats"]


def _dead_url() -> str:
    """An endpoint that accepts each connection and closes it at once: every request fails when it
    is sent (a port where nothing listens is refused before the run starts, by medhelm-run's check)."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen(64)

    def hang_up() -> None:
        while True:
            try:
                conn, _ = s.accept()
            except OSError:
                return
            conn.close()

    threading.Thread(target=hang_up, daemon=True).start()
    return f"http://127.0.0.1:{s.getsockname()[1]}/v1"


def _point(deployments, model: str, url: str) -> None:
    text = deployments.read_text()
    head, _, tail = text.partition(f"name: mockai/{model}\n")
    deployments.write_text(head + f"name: mockai/{model}\n" + re.sub(r"http://127\.0\.0\.1:\d+/v1", url, tail, count=1))


def test_one_dagster_run_per_invocation_with_per_partition_status(tmp_path, monkeypatch, mock_server, capsys):
    work = lay_out_inputs(SYNTHETIC / "inputs", tmp_path, mock_server.base_url)
    (work / "prod_env" / "credentials.conf").write_text('mockaiApiKey: "sk-mock-not-a-secret"\n')
    (work / "prod_env" / "medhelm_deployments.yaml").write_text(
        'deployments:\n  "mockai/mock-gpt-b": {max_attempts: 1}\n')
    deployments = work / "prod_env" / "model_deployments.yaml"
    _point(deployments, "mock-gpt-b", _dead_url())  # gpt-b's three runs fail, gpt-a's complete
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "dagster_home"))
    args = ["--conf-paths", "work/conf/private.conf", "--suite", "s", "--max-eval-instances", "10",
            "--output-path", "out", "--local-path", "work/prod_env"]

    assert run_main(args) == 1
    err = capsys.readouterr().err
    assert err.count("] FAILED ") == 3 and "3 of 6 runs failed" in err
    instance = dg.DagsterInstance.get()
    keys = grid_partitions.get_partition_keys(dynamic_partitions_store=instance)
    assert len(keys) == 6 and len(instance.get_dynamic_partitions("models")) == 2  # 3 benchmarks × 2 models
    assert all(k.endswith(("|s/mockai/mock-gpt-a", "|s/mockai/mock-gpt-b")) and "model=" not in k for k in keys)
    assert len(instance.get_runs(RunsFilter(job_name="run_layers"))) == 1
    # Every Dagster run of the invocation says which suite, edition and conf it was.
    tagged = instance.get_runs(RunsFilter(tags={"medhelm/suite": "s", "medhelm/edition": "helm-0.5.16"}))
    assert {r.job_name for r in tagged} >= {"register_suite", "build_private_datasets", "run_layers"}
    assert all(r.tags["medhelm/conf"] == "work/conf/private.conf" for r in tagged)
    gpt_a = {k for k in keys if "mock-gpt-a" in k}
    for asset in PER_RUN:
        assert instance.get_materialized_partitions(dg.AssetKey(asset)) == (gpt_a if asset != "requests" else set(keys))
    status = instance.get_status_by_partition(dg.AssetKey("run_stats"), keys, grid_partitions)
    assert {k for k, s in status.items() if s == dg.AssetPartitionStatus.FAILED} == set(keys) - gpt_a
    history = instance.event_log_storage.get_asset_check_execution_history(
        dg.AssetCheckKey(dg.AssetKey("completions"), "every_request_answered"), limit=50)
    evaluated = {r.partition for r in history if r.event and r.event.dagster_event.event_type_value
                 == "ASSET_CHECK_EVALUATION"}
    assert evaluated == gpt_a
    jury_run = next(k for k in gpt_a if k.startswith("mental_health"))
    records = instance.fetch_materializations(
        dg.AssetRecordsFilter(asset_key=dg.AssetKey("annotations"), asset_partitions=[jury_run]), limit=1).records
    meta = records[0].asset_materialization.metadata
    assert meta["judge_calls_new"].value > 0 and meta["new"].value == meta["judge_calls_new"].value

    # gpt-b answers again: its runs complete, gpt-a's are reused without a call, in one more Dagster run.
    _point(deployments, "mock-gpt-b", mock_server.base_url)
    assert run_main(args) == 0
    last = capsys.readouterr().err.strip().splitlines()[-1]
    assert re.fullmatch(r"6 runs: 3 reused, [1-9]\d* new calls, \$0\.00", last), last
    assert len(instance.get_runs(RunsFilter(job_name="run_layers"))) == 2
    for asset in PER_RUN:
        assert instance.get_materialized_partitions(dg.AssetKey(asset)) == set(keys)

    # Nothing new: every run is up to date, and no Dagster run is launched for the layers.
    assert run_main(args) == 0
    assert capsys.readouterr().err.strip().splitlines()[-1] == "6 runs: 6 reused, 0 new calls, $0.00"
    assert len(instance.get_runs(RunsFilter(job_name="run_layers"))) == 2


def test_progress_display_shows_every_deployment(tmp_path, monkeypatch, mock_server, capsys):
    work = lay_out_inputs(SYNTHETIC / "inputs", tmp_path, mock_server.base_url)
    (work / "prod_env" / "credentials.conf").write_text('mockaiApiKey: "sk-mock-not-a-secret"\n')
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "dagster_home"))
    assert run_main(["--conf-paths", "work/conf/private.conf", "--suite", "p", "--max-eval-instances", "5",
                     "--output-path", "out", "--local-path", "work/prod_env", "--progress"]) == 0
    err = capsys.readouterr().err
    for dep in ("mockai/mock-gpt-a", "mockai/mock-gpt-b", "mockai/mock-judge"):
        line = [ln for ln in err.splitlines() if ln.startswith(dep)][-1]
        assert re.search(r"\s+0/\d+\s+in flight\s+[\d.]+ req/s\s+(\d+)/(\1)\s+done", line), line
