"""medhelm-run on a shared DuckLake (catalog in a real PostgreSQL started here, Parquet in a folder),
with several processes at once, against HELM 0.5.16's golden output (../shared/oracle/synthetic).

The processes run in .venv-ducklake (the [ducklake] extra pins DuckDB to its extensions' 1.5.5);
the mock model server counts every request it answers, so a request paid twice shows as
`total_requests` above `distinct_requests`."""
from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from tests.mock_server import MockServer
from tests.oracle import SHARED, SYNTHETIC, load, run_dirs
from tests.parity import assert_leaderboard_equal, assert_stats_equal, lay_out_inputs, scenario_states
from tests.postgres import LAKE_PY, ROOT, running_postgres, skip_without_lake

BIN = LAKE_PY.parent
CONFS = {"oracle-cfg": "work/conf/configurable.conf", "oracle-private": "work/conf/private.conf"}
SCHEMA = ["--schema-path", str(SHARED / "helm" / "schema_medhelm.yaml")]


@pytest.fixture(scope="module")
def shared(tmp_path_factory):
    """The synthetic inputs laid out as upstream ran them, a mock server with 20 ms of latency (so
    the processes overlap), and one DuckLake for every process of this module."""
    skip_without_lake()
    root = tmp_path_factory.mktemp("lake-runs")
    server = MockServer("--latency-ms", "20")
    try:
        lay_out_inputs(SYNTHETIC / "inputs", root, server.base_url)
        with running_postgres() as url:
            env = {k: v for k, v in os.environ.items() if not k.startswith(("MEDHELM_", "DAGSTER_"))}
            env["MEDHELM_STORAGE"] = f"ducklake:{url}?data_path={root / 'lake'}"
            yield {"root": root, "server": server, "env": env}
    finally:
        server.close()


def _start(shared, out: str, suite: str, *extra: str, env: dict | None = None, name: str | None = None) -> subprocess.Popen:
    """medhelm-run in the lake environment, its own output path (as on another machine) and Dagster home;
    the conf of `suite`, run under `name` when given."""
    args = [str(BIN / "medhelm-run"), "--conf-paths", CONFS[suite], "--suite", name or suite, "--max-eval-instances", "50",
            "--output-path", out, "--local-path", "work/prod_env", "--num-threads", "4", *extra]
    return subprocess.Popen(args, cwd=shared["root"], env={**(env or shared["env"]), "DAGSTER_HOME": str(shared["root"] / out / "dh")},
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)


def _finish(proc: subprocess.Popen) -> str:
    out, _ = proc.communicate(timeout=900)
    assert proc.returncode == 0, out[-3000:]
    return out


def _summarize(shared, out: str, *args: str, env: dict | None = None) -> None:
    r = subprocess.run([str(BIN / "medhelm-summarize"), "--output-path", out, *args], cwd=shared["root"],
                       env={**(env or shared["env"]), "DAGSTER_HOME": str(shared["root"] / out / "dh")},
                       capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, (r.stdout + r.stderr)[-3000:]


def _assert_suite_equals_helm(out: Path, suite: str) -> None:
    gold = SYNTHETIC / "benchmark_output" / "runs" / suite
    for run in run_dirs(SYNTHETIC, suite):
        g_states, o_states = scenario_states(run, out / "runs" / suite / run.name, 50)
        for g, o in zip(g_states["request_states"], o_states["request_states"]):
            assert (o["request"], o["result"]["completions"], o.get("annotations")) == \
                (g["request"], g["result"]["completions"], g.get("annotations"))
        for name in ("per_instance_stats.json", "stats.json"):
            assert_stats_equal(load(run / name), load(out / "runs" / suite / run.name / name),
                               per_instance=name.startswith("per"))
    assert assert_leaderboard_equal(gold, out / "runs" / suite) > 0


def test_two_processes_on_overlapping_models_pay_each_request_once_and_equal_helm(shared):
    """Two machines' worth of medhelm-run (each its own output path) on one suite at once, models
    {a, b} and {b}: no request is paid twice, and the leaderboard summarized from the shared store
    by a third output path equals HELM's, file for file and cell for cell."""
    server = shared["server"]
    server.reset()
    both = _start(shared, "out_a", "oracle-cfg")
    only_b = _start(shared, "out_b", "oracle-cfg", "--models-to-run", "mockai/mock-gpt-b")
    _finish(both), _finish(only_b)
    stats = server.stats()
    assert stats["total_requests"] == stats["distinct_requests"] > 0, stats
    assert stats["max_in_flight"] > 4   # the two processes did call at the same time
    # Either process's output path, or a third one with no files at all, summarizes the shared suite.
    _summarize(shared, "out_c", "--suite", "oracle-cfg", "--auto-generate-schema")
    _assert_suite_equals_helm(shared["root"] / "out_c", "oracle-cfg")
    # a rerun anywhere asks nothing
    _finish(_start(shared, "out_b", "oracle-cfg"))
    assert server.stats()["total_requests"] == stats["total_requests"]


def test_a_process_killed_mid_way_loses_only_what_it_had_in_flight(shared):
    """kill -9 of one of two processes on the private suite while both call; the survivor finishes,
    a rerun on the killed one's machine finishes the rest: requests paid twice ≤ those in flight."""
    server = shared["server"]
    server.reset()
    victim = _start(shared, "out_k", "oracle-private")
    other = _start(shared, "out_l", "oracle-private", "--models-to-run", "mockai/mock-gpt-b")
    deadline = time.monotonic() + 300
    while server.stats()["total_requests"] < 60:
        assert victim.poll() is None and time.monotonic() < deadline, victim.communicate()[0][-3000:]
        time.sleep(0.05)
    in_flight = server.stats()["max_in_flight"]
    assert victim.poll() is None
    os.killpg(victim.pid, signal.SIGKILL)
    victim.wait(timeout=60)
    _finish(other)
    _finish(_start(shared, "out_k", "oracle-private"))
    stats = server.stats()
    print(f"kill -9: {stats['total_requests'] - stats['distinct_requests']} of {stats['distinct_requests']} "
          f"requests paid twice, at most {in_flight} in flight")
    assert stats["total_requests"] - stats["distinct_requests"] <= in_flight, stats
    _summarize(shared, "out_k", "--suite", "oracle-private", *SCHEMA)
    _assert_suite_equals_helm(shared["root"] / "out_k", "oracle-private")


def test_a_lake_whose_parquet_files_are_in_a_gs_bucket(shared):
    """data_path=gs://…: the Parquet files in a bucket of a local GCS emulator, written and read
    through gcsfs, the client that talks to real GCS. A suite run by two processes and summarized
    equals HELM's; the lake's files are objects in the bucket, none on disk."""
    from tests.gcs_emulator import Emulator

    emulator = Emulator()
    try:
        with running_postgres() as url:
            env = {**shared["env"], **emulator.env(), "MEDHELM_STORAGE": f"ducklake:{url}?data_path={emulator.uri('lake')}"}
            both = _start(shared, "gs_a", "oracle-cfg", env=env)
            only_b = _start(shared, "gs_b", "oracle-cfg", "--models-to-run", "mockai/mock-gpt-b", env=env)
            _finish(both), _finish(only_b)
            _summarize(shared, "gs_c", "--suite", "oracle-cfg", "--auto-generate-schema", env=env)
        _assert_suite_equals_helm(shared["root"] / "gs_c", "oracle-cfg")
        emulator.fs.invalidate_cache()
        objects = emulator.fs.find(f"{emulator.bucket}/lake")
        assert any(o.endswith(".parquet") and "/completions/" in o for o in objects), objects[:20]
        assert not list(shared["root"].glob("gs_*/**/*.parquet"))
    finally:
        emulator.close()


def test_processes_on_a_lake_keep_each_deployment_within_its_max_concurrency(tmp_path):
    """The same on a DuckLake (slots are the catalog's PostgreSQL advisory locks, for any machine)."""
    from tests.run.test_slots import peak_in_flight, two_runs_on_one_store

    skip_without_lake()
    server = MockServer("--latency-ms", "60", "--log-jsonl", str(tmp_path / "requests.jsonl"))
    try:
        lay_out_inputs(SYNTHETIC / "inputs", tmp_path, server.base_url)
        with running_postgres() as url:
            env = {k: v for k, v in os.environ.items() if not k.startswith(("MEDHELM_", "DAGSTER_"))}
            env["MEDHELM_STORAGE"] = f"ducklake:{url}?data_path={tmp_path / 'lake'}"
            two_runs_on_one_store(tmp_path, env, LAKE_PY)
    finally:
        server.close()
    peaks = peak_in_flight(tmp_path / "requests.jsonl")
    assert peaks["mock-gpt-a"] == peaks["mock-gpt-b"] == 2 and peaks["mock-judge"] > 2, peaks


def test_the_page_reads_the_shared_store_while_a_run_writes_it(shared):
    """medhelm-server on the lake answers every request, the same, while another process runs a suite
    into it (reads never wait for the write turn and see only committed snapshots)."""
    import json
    import socket
    import urllib.request

    _finish(_start(shared, "out_p", "oracle-cfg"))   # the suite the page shows (stored answers reused)
    _summarize(shared, "out_p", "--suite", "oracle-cfg", "--auto-generate-schema")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    log = shared["root"] / "page.log"
    page = subprocess.Popen([str(BIN / "medhelm-server"), "--suite", "oracle-cfg", "--output-path", "out_p",
                             "--port", str(port)], cwd=shared["root"], env=shared["env"],
                            stdout=subprocess.DEVNULL, stderr=open(log, "w"))
    try:
        def ask(endpoint: str):
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/{endpoint}", timeout=30) as r:
                assert r.status == 200
                return json.loads(r.read())

        deadline = time.monotonic() + 60
        while True:
            try:
                before = ask("runs")
                break
            except OSError:
                assert page.poll() is None and time.monotonic() < deadline, log.read_text()[-2000:]
                time.sleep(0.2)
        writer = _start(shared, "out_w", "oracle-cfg", name="watched")
        answers = 0
        while writer.poll() is None:
            assert ask("runs") == before
            answers += 1
        _finish(writer)
        assert answers >= 5 and ask("runs") == before
    finally:
        page.terminate()   # it stops on SIGTERM even where the tests run with SIGTERM ignored
        page.wait(timeout=30)
