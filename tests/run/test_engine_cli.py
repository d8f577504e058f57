"""The completion engine through `medhelm-run`, on the inputs of the golden HELM 0.5.16 output
(../shared/oracle/synthetic), against ../shared/tools/mock_openai_server.py started here:

* a flaky endpoint (30% of attempts answered 429 or 500 with retry-after-ms 20) gives HELM's
  results exactly, and the API key appears nowhere: DuckDB, output files, Dagster's storage, logs;
* kill -9 during completions, the jury or a commit, at mock latencies 0, 20 and 200 ms, then rerun:
  the full (golden) result, and only requests in flight at the kill asked again;
* --estimate-cost, and --budget stopping cleanly then resuming."""
import hashlib
import json
import logging
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from medhelm_cli import run_main
from medhelm_core.store import Store
from tests.mock_server import MockServer
from tests.oracle import SYNTHETIC
from tests.parity import assert_runs_equal_gold, lay_out_inputs

ROOT = Path(__file__).resolve().parents[2]
GOLD = SYNTHETIC / "benchmark_output" / "runs"
SECRET = "sk-SECRET-medhelm-0123456789abcdef"


def _lay_out(root: Path, server: MockServer, api_key: str = "sk-mock-not-a-secret", settings: str = "") -> None:
    env = lay_out_inputs(SYNTHETIC / "inputs", root, server.base_url) / "prod_env"
    (env / "credentials.conf").write_text(f'mockaiApiKey: "{api_key}"\n')
    if settings:
        (env / "medhelm_deployments.yaml").write_text(settings)


def _args(suite: str, conf: str = "work/conf/private.conf", n: int = 50, threads: int = 4) -> list[str]:
    return ["--conf-paths", conf, "--suite", suite, "--max-eval-instances", str(n), "--num-threads", str(threads),
            "--output-path", "out", "--local-path", "work/prod_env"]


def _completion_keys(out: Path) -> tuple[int, int, int]:
    with Store(out / "medhelm.duckdb").connect() as conn:
        rows, distinct = conn.execute("SELECT count(*), count(DISTINCT request_key) FROM completions").fetchone()
        claims = conn.execute("SELECT count(*) FROM completion_claims").fetchone()[0]
    return rows, distinct, claims


def test_flaky_endpoint_gives_helms_results_and_the_key_is_nowhere(tmp_path, monkeypatch, capfd, caplog):
    server = MockServer("--fail-rate", "0.3", "--fail-codes", "429,500", "--retry-after-ms", "20",
                        "--api-key", SECRET)
    try:
        _lay_out(tmp_path, server, api_key=SECRET)
        monkeypatch.chdir(tmp_path)
        monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "dagster_home"))
        caplog.set_level(logging.DEBUG)
        assert run_main(_args("oracle-private")) == 0
        stats = server.stats()
    finally:
        server.close()
    assert stats["injected_failures"] > 50 and {"429", "500"} <= set(stats["by_status"])
    assert assert_runs_equal_gold(tmp_path / "out", "oracle-private", "oracle-private") == 300
    rows, distinct, claims = _completion_keys(tmp_path / "out")
    assert rows == distinct == stats["distinct_requests"] and claims == 0

    # The key: not in any file written (DuckDB and its WAL, HELM files, Dagster's storage and logs) ...
    needle = SECRET.encode()
    written = [p for base in (tmp_path / "out", tmp_path / "dagster_home") for p in base.rglob("*") if p.is_file()]
    assert any(p.name == "medhelm.duckdb" for p in written)
    for path in written:
        assert needle not in path.read_bytes(), path
    # ... nor in any value of any table (DuckDB compresses strings, so ask it too) ...
    with Store(tmp_path / "out" / "medhelm.duckdb").connect() as conn:
        tables = [r[0] for r in conn.execute("SELECT table_name FROM information_schema.tables"
                                             " WHERE table_type = 'BASE TABLE'").fetchall()]
        for table in tables:
            hit = conn.execute(f"SELECT count(*) FROM {table} t WHERE CAST(t AS VARCHAR) LIKE ?",
                               [f"%{SECRET}%"]).fetchone()[0]
            assert hit == 0, table
    # ... nor in what was printed or logged.
    captured = capfd.readouterr()
    assert SECRET not in captured.out + captured.err
    assert SECRET not in caplog.text


# The subprocess runs medhelm-run; for the "commit" kill point it first makes the engine's first
# commit of answers hang inside its DuckDB transaction (rows inserted, not committed) and say so.
_RUN = """
import sys, time
from pathlib import Path
from medhelm_core import engine
from medhelm_cli import run_main
marker = {marker!r}
if marker:
    original, calls = engine.CompletionEngine._commit_batch, []
    def hanging(self, conn, rows, *rest):
        original(self, conn, rows, *rest)
        if rows:
            Path(marker).write_text(str(len(rows)))
            time.sleep(600)
    engine.CompletionEngine._commit_batch = hanging
sys.exit(run_main({args!r}))
"""


def _received_at_kill(out: Path) -> set[tuple[str, str]]:
    """Every answer the killed process had received: committed to DuckDB, or in its journal."""
    from medhelm_core import journal
    from medhelm_core.store import COMPLETION_COLUMNS

    with Store(out / "medhelm.duckdb").connect(read_only=True) as conn:  # read-only: replays nothing
        rows = conn.execute("SELECT model, request->>'prompt' FROM completions").fetchall()
    for path in journal.orphan_segments(out / "medhelm.duckdb"):
        rows += [(json.loads(r[3])["model"], json.loads(r[3])["prompt"])
                 for r in journal.read_segment(path, len(COMPLETION_COLUMNS))]
    return {(model.split("/", 1)[1], hashlib.sha256(prompt.encode() + b"\x00").hexdigest()[:16])
            for model, prompt in rows}


@pytest.mark.parametrize("latency_ms,kill_at,threads", [
    (0, "completions", 2), (20, "completions", 2), (200, "completions", 4), (20, "jury", 2), (50, "commit", 2)])
def test_kill_9_then_rerun_repeats_only_what_was_in_flight(tmp_path, latency_ms, kill_at, threads):
    log = tmp_path / "mock.jsonl"
    marker = tmp_path / "commit-hangs" if kill_at == "commit" else None
    server = MockServer("--latency-ms", str(latency_ms), "--log-jsonl", str(log))
    try:
        _lay_out(tmp_path, server)
        env = {**os.environ, "DAGSTER_HOME": str(tmp_path / "dagster_home"), "PYTHONPATH": str(ROOT)}
        code = _RUN.format(marker=str(marker) if marker else "", args=_args("killed", threads=threads))

        def medhelm_run() -> subprocess.Popen:
            return subprocess.Popen([sys.executable, "-c", code], cwd=tmp_path, env=env, start_new_session=True,
                                    stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)

        def reached() -> bool:
            stats = server.stats()
            if kill_at == "jury":  # mental_health's judges, after its model answers
                return stats["by_model"].get("mock-judge", 0) >= 10
            if kill_at == "commit":  # the commit hangs; answers keep arriving meanwhile
                return marker.exists() and stats["total_requests"] >= int(marker.read_text() or 0) + 20
            return stats["total_requests"] >= 60  # the second run (clear)

        proc = medhelm_run()
        deadline = time.time() + 240
        while not reached():
            assert proc.poll() is None, proc.stdout.read()[-3000:]
            assert time.time() < deadline, "medhelm-run made no progress"
            time.sleep(0.005)
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
        killed_at = time.time()
        time.sleep(latency_ms / 1000 + 0.5)  # let the mock finish what was in flight
        before = server.stats()

        received = _received_at_kill(tmp_path / "out")
        assert 0 < len(received) <= before["total_requests"]
        rerun = medhelm_run() if not marker else subprocess.Popen(
            [sys.executable, "-c", _RUN.format(marker="", args=_args("killed", threads=threads))], cwd=tmp_path,
            env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        out, _ = rerun.communicate(timeout=600)
        assert rerun.returncode == 0, out[-3000:]
        after = server.stats()
    finally:
        server.close()

    # The full result: every run equals HELM's golden output.
    assert assert_runs_equal_gold(tmp_path / "out", "killed", "oracle-private") == 300
    rows, distinct, claims = _completion_keys(tmp_path / "out")
    assert rows == distinct and claims == 0
    assert not list((tmp_path / "out").glob("medhelm.duckdb.journal/*")), "journal segments left behind"
    # Every distinct request was asked; the only ones asked twice were in flight at the kill: at most
    # what the killed process could have in flight, every deployment at its limit (the runs execute at
    # once: gpt-a, gpt-b and the judge, `threads` each; an answer already sent by the mock but not yet
    # read is in flight too); no answer that had arrived was paid for again.
    assert after["distinct_requests"] == distinct
    # (A request the kill cut off mid-body reaches the mock as a malformed one, answered 400 and never
    # paid for: it is not a request asked twice.)
    truncated = after["by_status"].get("400", 0)
    asked_again = after["total_requests"] - truncated - after["distinct_requests"]
    assert asked_again <= 3 * threads, (before, after)
    records = [json.loads(line) for line in log.read_text().splitlines()]
    rerun_asked = {(r["model"], r["prompt_sha"]) for r in records if r["t"] > killed_at}
    assert rerun_asked and not (rerun_asked & received)
    assert len(rerun_asked) == after["total_requests"] - before["total_requests"]
    print(f"\nkill -9 ({kill_at}, {latency_ms} ms) after {before['total_requests']} requests ({len(received)} "
          f"received); rerun asked {len(rerun_asked)}; {asked_again} asked twice, at most {3 * threads} in flight "
          f"(the mock saw {before['max_in_flight']} at once)")


def _latest_metadata(asset: str) -> dict:
    import dagster as dg

    with dg.DagsterInstance.get() as instance:
        event = instance.get_latest_materialization_event(dg.AssetKey(asset))
    return dict(event.asset_materialization.metadata)


SETTINGS = """deployments:
  "mockai/*": {input_per_million: 0, output_per_million: 100000}   # $0.10 per answer token
"""


def test_estimate_cost_and_budget_stop_then_resume(tmp_path, monkeypatch, capsys):
    server = MockServer()
    try:
        _lay_out(tmp_path, server, settings=SETTINGS)
        monkeypatch.chdir(tmp_path)
        monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "dagster_home"))
        args = _args("budget", conf="work/conf/configurable_exact_match.conf", n=20)  # 2 runs x 20, max_tokens 1

        assert run_main(args + ["--estimate-cost"]) == 0
        printed = capsys.readouterr().out
        assert "Total: 40 new calls" in printed and "$4.0000" in printed
        assert server.stats()["total_requests"] == 0 and not (tmp_path / "out" / "medhelm.duckdb").exists()
        assert run_main(args + ["--dry-run"]) == 0 and capsys.readouterr().out.count("\n") == 2

        # Worst case = actual cost here ($0.10 a request): 10 fit in $1.05, the 11th does not.
        assert run_main(args + ["--budget", "1.05"]) == 3
        err = capsys.readouterr().err
        assert "budget of $1.0500 reached" in err and "Rerun the same command to resume" in err
        assert server.stats()["total_requests"] == 10

        assert run_main(args + ["--progress"]) == 0
        err = capsys.readouterr().err  # one display for the invocation: a line per deployment, and the total
        assert re.search(r"^mockai/mock-gpt-a\s+0/\d+\s+in flight .* done\s+\$", err, re.M)
        assert re.search(r"^total\s+\$3\.0000$", err, re.M)
        stats = server.stats()
        assert stats["total_requests"] == stats["distinct_requests"] == 40
        metadata = _latest_metadata("completions")
        assert {"done", "remaining", "failed", "cost_usd", "throughput_per_s", "run_model_cost_usd"} <= set(metadata)
        assert metadata["done"].value == 20 and metadata["remaining"].value == 0
        assert run_main(args + ["--estimate-cost"]) == 0
        assert "Total: 0 new calls" in capsys.readouterr().out
    finally:
        server.close()
    with Store(tmp_path / "out" / "medhelm.duckdb").connect() as conn:
        runs = conn.execute("SELECT model_calls, model_cost_usd FROM run_costs WHERE suite = 'budget'"
                            " ORDER BY run_name").fetchall()
    assert runs == [(20, pytest.approx(2.0)), (20, pytest.approx(2.0))]


def test_a_dagster_runs_budget_is_its_run_config(tmp_path, monkeypatch, capsys):
    """What the launchpad sets (`ops: layers: config: budget_usd`) caps that Dagster run as --budget does."""
    import dagster as dg

    from medhelm_dagster.definitions import defs
    from medhelm_dagster.partitions import grid_partitions, grid_range_tags
    from medhelm_dagster.resources import MedhelmResource
    from medhelm_core.engine import RunControls
    from medhelm_core.run.grid import Cell

    server = MockServer()
    try:
        _lay_out(tmp_path, server, settings=SETTINGS)
        monkeypatch.chdir(tmp_path)
        monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "dagster_home"))
        args = _args("budget", conf="work/conf/configurable_exact_match.conf", n=20)
        assert run_main(args + ["--budget", "0"]) == 3  # registers the suite, builds its datasets, sends nothing
        assert server.stats()["total_requests"] == 0
        instance = dg.DagsterInstance.get()
        cells = [Cell.from_key(k) for k in grid_partitions.get_partition_keys(dynamic_partitions_store=instance)]
        assert len(cells) == 2
        result = defs.get_job_def("run_layers").execute_in_process(
            instance=instance, raise_on_error=False, tags=grid_range_tags(instance, cells),
            resources={"medhelm": MedhelmResource(output_path="out", local_path="work/prod_env"),
                       "run_controls": RunControls()},
            run_config={"ops": {"layers": {"config": {"budget_usd": 1.05}}}})
        assert not result.success and server.stats()["total_requests"] == 10  # $0.10 each: 10 fit in $1.05
        [failure] = [e for e in result.all_events if e.is_step_failure]
        assert "2 of 2 runs did not complete" in failure.step_failure_data.error.message
        assert run_main(args) == 0 and server.stats()["distinct_requests"] == 40  # the rest, none asked twice
        assert server.stats()["total_requests"] == 40
    finally:
        server.close()
