"""Batch mode through `medhelm-run` (--batch, --no-wait, --collect, --max-wait, batch: true) and the Dagster
sensor `medhelm_batches`, on the golden synthetic inputs against the mock batch server
(tests/mock_openai_batch.py) in front of the repo's mock model server:

* `medhelm-run --batch` writes the files and tables the online run writes, every call by batch, at half
  price; a rerun asks nothing;
* `--no-wait`, then `--collect`, then a plain rerun (deployments with `batch: true`): each request paid once,
  the files the online run's;
* a `medhelm-run --batch` killed (-9) between submission and collection, then a plain rerun: the batches are
  collected, nothing is asked twice;
* `--max-wait` reached: exit 4, the runs waiting; bad flag combinations: one line; `--estimate-cost`
  shows the batch price;
* a model without a batch API is asked online first, its jury by batch;
* a jury batch an earlier invocation submitted holds its run, whatever this one batches;
* the sensor collects, batches the jury behind the answers and launches run_layers for exactly the runs no
  batch holds; those runs complete without a call."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from medhelm_cli import run_main
from medhelm_core.batch import ledger
from medhelm_core.engine import RunControls
from medhelm_core.run.workspace import Workspace
from tests.batch.test_batch_pass import (CLEAR_B, COMPLETION_FIELDS, MENTAL_A, PER_INSTANCE, POLL, PRICES, normalised,
                                         run_files, table)
from tests.batch.conftest import batch_polls, kill_9_when, spawn_python
from tests.mock_openai_batch import MockBatchServer
from tests.oracle import SYNTHETIC
from tests.parity import lay_out_inputs

SUITE = "cli"
N = 5
ARGS = ["-r", MENTAL_A, CLEAR_B, "--suite", SUITE, "--max-eval-instances", str(N), "-o", "out",
        "--local-path", "work/prod_env"]
RUNS = 2  # MENTAL_A (with a jury), CLEAR_B (without)
JUDGE = "mockai/mock-judge"


def lay_out_env(root: Path, url: str, batch: bool) -> Path:
    """The golden synthetic inputs at root/work, every deployment at `url`, `batch` their setting."""
    env = lay_out_inputs(SYNTHETIC / "inputs", root, url) / "prod_env"
    (env / "credentials.conf").write_text('mockaiApiKey: "sk-mock-not-a-secret"\n')
    (env / "medhelm_deployments.yaml").write_text(
        f'deployments:\n  "mockai/*": {{batch: {str(batch).lower()}, batch_poll_seconds: {POLL}, {PRICES}}}\n')
    return env


@pytest.fixture
def at(tmp_path_factory, monkeypatch):
    """A fresh folder, the current directory, with its own Dagster home."""
    def make(name: str, url: str, batch: bool) -> Path:
        root = tmp_path_factory.mktemp(name)
        lay_out_env(root, url, batch)
        monkeypatch.chdir(root)
        monkeypatch.setenv("DAGSTER_HOME", str(root / "dagster_home"))
        return root
    return make


@pytest.fixture(scope="module")
def server(mock_server):
    s = MockBatchServer(upstream=mock_server.base_url)
    yield s
    s.close()


def counts(server: MockBatchServer) -> tuple[int, int, int]:
    return server.creates, len(server.answered), len(server.online)


@pytest.fixture(scope="module")
def online(tmp_path_factory, server):
    """The same suite run online (no batch), the reference of the files and tables."""
    root = tmp_path_factory.mktemp("online")
    lay_out_env(root, server.base_url, batch=False)
    mp = pytest.MonkeyPatch()
    try:
        mp.chdir(root)
        mp.setenv("DAGSTER_HOME", str(root / "dagster_home"))
        before = counts(server)
        assert run_main(ARGS) == 0
        creates, answered, calls = (a - b for a, b in zip(counts(server), before))
        assert (creates, answered) == (0, 0) and calls > 2 * N
        yield root, calls
    finally:
        mp.undo()


def db(root: Path) -> Path:
    return root / "out" / "medhelm.duckdb"


def assert_same_as_online(root: Path, online_root: Path) -> None:
    a, b = run_files(online_root / "out", SUITE), run_files(root / "out", SUITE)
    assert set(a) == set(b) and len(a) == 5 * RUNS
    for name in a:
        assert normalised(a[name]) == normalised(b[name]), name
    for name, sql in PER_INSTANCE.items():
        got = table(db(root), sql)
        assert got == table(db(online_root), sql) and got, name
    fields = f"SELECT {COMPLETION_FIELDS.replace('result, ', '')} FROM completions ORDER BY request_key"
    assert table(db(root), fields) == table(db(online_root), fields)


def costs(root: Path) -> dict[str, float]:
    return dict(table(db(root), "SELECT request_key, cost_usd FROM completions"))


def assert_half_price(root: Path, online_root: Path) -> None:
    ours, theirs = costs(root), costs(online_root)
    assert set(ours) == set(theirs)
    assert all(ours[k] == pytest.approx(theirs[k] / 2) for k in theirs)


# -- --batch ---------------------------------------------------------------------------------------
def test_batch_flag_equals_the_online_run_at_half_price(at, server, online, capsys):
    online_root, online_calls = online
    root = at("batch", server.base_url, batch=False)  # the settings batch nothing: --batch does
    before = counts(server)
    assert run_main(ARGS + ["--batch"]) == 0
    creates, answered, calls = (a - b for a, b in zip(counts(server), before))
    # Two model batches, then the jury's: every call the online run made, by batch, none online.
    assert (creates, answered, calls) == (3, online_calls, 0)
    err = capsys.readouterr().err
    assert "medhelm-run: batch: 3 submitted" in err and "WAITING" not in err
    assert_same_as_online(root, online_root)
    assert_half_price(root, online_root)
    # A rerun: nothing submitted, nothing asked.
    before = counts(server)
    assert run_main(ARGS + ["--batch"]) == 0
    assert counts(server) == before


# -- --no-wait, --collect, a plain rerun ---------------------------------------------------------------
def test_no_wait_then_collect_then_a_plain_rerun_pays_each_request_once(at, server, online, capsys):
    online_root, online_calls = online
    root = at("nowait", server.base_url, batch=True)  # batch: true: no --batch needed
    before = counts(server)
    assert run_main(ARGS + ["--no-wait"]) == 0
    err = capsys.readouterr().err
    assert err.count("WAITING") == 2 and "2 run(s) wait on 2 outstanding batch(es): rerun the same command" in err
    assert "add --collect" in err and "--max-wait reached" not in err
    assert counts(server)[0] - before[0] == 2 and counts(server)[2] == before[2]  # model batches, nothing online
    assert not (root / "out" / "runs" / SUITE).exists() or not run_files(root / "out", SUITE)

    assert run_main(ARGS + ["--collect"]) == 0
    err = capsys.readouterr().err
    assert "2 collected" in err and "every batch collected" in err
    assert counts(server)[0] - before[0] == 2  # --collect submits nothing (no jury)
    assert not ledger.outstanding(Workspace(root / "out", root / "work" / "prod_env").store)

    assert run_main(ARGS) == 0  # batch: true: the jury goes by batch behind the stored answers
    creates, answered, calls = (a - b for a, b in zip(counts(server), before))
    assert (creates, answered, calls) == (3, online_calls, 0)
    assert len(set(server.answered[before[1]:])) == answered  # no request answered twice
    assert_same_as_online(root, online_root)
    assert_half_price(root, online_root)


# -- kill -9 -----------------------------------------------------------------------------------------
CHILD = "import sys; from medhelm_cli import run_main; sys.exit(run_main(sys.argv[1:]))"


def test_a_killed_batch_run_then_a_plain_rerun_pays_nothing_twice(at, mock_server):
    slow = MockBatchServer(upstream=mock_server.base_url, polls_per_state=10**9)  # never ends while it waits
    try:
        root = at("killed", slow.base_url, batch=False)
        child = spawn_python(CHILD, *ARGS, "--batch", cwd=root)
        # Both model batches created and polled (the child waits on them), then kill -9.
        kill_9_when(child, lambda: batch_polls(slow) >= 4, timeout_s=180)
        ws = Workspace(root / "out", root / "work" / "prod_env")
        live = ledger.outstanding(ws.store)
        assert len(live) == 2 and all(r.acknowledged for r in live) and slow.answered == []

        slow.polls_per_state = 1  # the vendor gets on with it
        # A plain rerun (no --batch, nothing batches by setting): the outstanding batches are collected
        # first, so the online runs ask only what no batch held (the jury).
        assert run_main(ARGS) == 0
        assert slow.creates == 2 and len(slow.uploads) == 2
        assert len(slow.answered) == len(set(slow.answered)) == 2 * N
        judged = table(db(root), f"SELECT count(*) FROM completions WHERE model_deployment = '{JUDGE}'")[0][0]
        assert judged > 0 and len(slow.online) == judged  # only the judges online, each once
        assert table(db(root), "SELECT count(*) FROM completions")[0][0] == 2 * N + judged
        assert not ledger.outstanding(ws.store)
        before = counts(slow)
        assert run_main(ARGS) == 0 and counts(slow) == before
    finally:
        slow.close()


# -- --max-wait, --collect --no-wait ---------------------------------------------------------------------
def test_max_wait_reached_leaves_the_runs_waiting_with_exit_4(at, mock_server, capsys):
    slow = MockBatchServer(upstream=mock_server.base_url, polls_per_state=10**9)
    try:
        at("maxwait", slow.base_url, batch=False)
        assert run_main(ARGS + ["--batch", "--max-wait", "0.3"]) == 4
        err = capsys.readouterr().err
        assert err.count("WAITING") == 2 and "(--max-wait reached): rerun the same command" in err
        assert slow.online == [] and slow.creates == 2
        # --collect --no-wait: polls once, exit 0; the batches stay outstanding.
        assert run_main(ARGS + ["--collect", "--no-wait"]) == 0
        assert "2 run(s) wait on 2 outstanding batch(es): rerun" in capsys.readouterr().err
        slow.polls_per_state = 1
        assert run_main(ARGS + ["--collect"]) == 0
        assert "every batch collected" in capsys.readouterr().err
        assert slow.creates == 2 and len(slow.answered) == 2 * N and slow.online == []
    finally:
        slow.close()


@pytest.mark.parametrize("flags, says", [
    (["--collect", "--dry-run"], "--collect with --dry-run"),
    (["--no-wait", "--estimate-cost"], "--no-wait with --estimate-cost"),
    (["--no-wait", "--max-wait", "5"], "--max-wait with --no-wait"),
    (["--max-wait", "-1"], "--max-wait -1"),
])
def test_bad_batch_flag_combinations_are_one_line(tmp_path, monkeypatch, capsys, flags, says):
    monkeypatch.chdir(tmp_path)
    assert run_main(["-r", CLEAR_B, "--suite", "x", "--max-eval-instances", "1", *flags]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("medhelm-run: error: ") and says in err
    assert not (tmp_path / "benchmark_output").exists()


def test_estimate_cost_shows_the_batch_price_with_batch_or_a_batch_setting(at, mock_server, capsys):
    at("estimate", mock_server.base_url, batch=False)
    assert run_main(ARGS + ["--estimate-cost"]) == 0
    assert "USD by batch" not in capsys.readouterr().out
    assert run_main(ARGS + ["--estimate-cost", "--batch"]) == 0
    out = capsys.readouterr().out
    assert "USD by batch" in out and "By batch: $" in out
    Path("work/prod_env/medhelm_deployments.yaml").write_text(
        f'deployments:\n  "mockai/mock-judge": {{batch: true}}\n  "mockai/*": {{{PRICES}}}\n')
    assert run_main(ARGS + ["--estimate-cost"]) == 0
    out = capsys.readouterr().out
    assert "USD by batch" in out and "(mockai/mock-judge)" in out


# -- the Dagster sensor ----------------------------------------------------------------------------------
def tick(sensor, instance, resources, cursor):
    """One evaluation as the daemon does it (run requests resolved against the code location's job)."""
    import dagster as dg

    from medhelm_dagster.definitions import defs

    with dg.build_sensor_context(instance=instance, cursor=cursor, resources=resources, definitions=defs) as context:
        return sensor.evaluate_tick(context)


def test_the_sensor_collects_batches_the_jury_and_launches_the_runs_no_batch_holds(at, mock_server, capsys):
    import dagster as dg

    from medhelm_dagster.batches import batch_sensor
    from medhelm_dagster.definitions import defs
    from medhelm_dagster.resources import MedhelmResource

    vendor = MockBatchServer(upstream=mock_server.base_url, polls_per_state=2)
    try:
        root = at("sensor", vendor.base_url, batch=True)
        assert run_main(ARGS + ["--no-wait"]) == 0  # submits the model batches and leaves
        assert vendor.creates == 2
        resources = {"medhelm": MedhelmResource(output_path=str(root / "out"), local_path=str(root / "work/prod_env"))}
        instance = dg.DagsterInstance.get()
        launched, cursor, observed = [], None, []
        for _ in range(40):
            result = tick(batch_sensor, instance, resources, cursor)
            cursor = result.cursor
            launched += result.run_requests or []
            assert not (result.run_requests and result.skip_message)
            observed += [e for e in result.asset_events if e.asset_key == dg.AssetKey("vendor_batches")]
            if len(launched) == 2:
                break
        # CLEAR_B (no jury) first, as soon as its model batch is collected; MENTAL_A once the jury batch the
        # sensor submitted behind its answers is collected. Each once, one run_layers run per launch.
        names = {n.split(":")[0]: n for (n,) in table(db(root), "SELECT run_name FROM run_entries")}
        assert [r.run_config["ops"]["layers"]["config"]["runs"] for r in launched] == [
            [f"{SUITE}/{names['clear']}"], [f"{SUITE}/{names['mental_health']}"]]
        assert vendor.creates == 3 and len(vendor.answered) == len(set(vendor.answered)) and vendor.online == []
        assert all(r.job_name in (None, "run_layers") and r.tags["medhelm/launched_by"] == "medhelm_batches"
                   for r in launched)
        assert len({r.run_key for r in launched}) == 2
        # The UI's view of the ledger: observed when it changed, each batch's state and items.
        assert observed and "| collected |" in observed[-1].metadata["batches"].value
        assert observed[-1].metadata["outstanding"].value == 0
        # Nothing more to launch while the runs are not run; the runs launched complete without a call.
        again = tick(batch_sensor, instance, resources, cursor)
        assert not again.run_requests and not again.asset_events
        job = defs.get_job_def("run_layers")
        for request in launched:
            result = job.execute_in_process(instance=instance, resources={**resources, "run_controls": RunControls()},
                                            run_config=request.run_config,
                                            tags=request.tags, raise_on_error=False)
            assert result.success
        assert vendor.online == []
        done = tick(batch_sensor, instance, resources, cursor)
        assert not done.run_requests
        assert json.loads(done.cursor)["launched"] == []  # complete: forgotten
        assert run_main(ARGS) == 0 and vendor.online == [] and vendor.creates == 3
        assert "2 reused" in capsys.readouterr().err
    finally:
        vendor.close()


def test_the_sensor_skips_without_batches(tmp_path):
    import dagster as dg

    from medhelm_dagster.batches import batch_sensor
    from medhelm_dagster.resources import MedhelmResource

    resources = {"medhelm": MedhelmResource(output_path=str(tmp_path / "out"), local_path=str(tmp_path))}
    result = tick(batch_sensor, dg.DagsterInstance.ephemeral(), resources, None)
    assert result.skip_message == "no store yet" and not result.run_requests


# -- a jury batch the pass did not compute ----------------------------------------------------------------
def test_a_run_whose_jury_an_earlier_pass_batched_is_pending_whatever_the_settings(tmp_path, monkeypatch,
                                                                                   mock_server):
    """--batch --no-wait submitted the jury; a later invocation without --batch (its judges do not batch by
    setting) must not run that run online: the judges' requests are in a live batch."""
    from medhelm_core.run.batch_pass import batch_pass, batch_runs
    from tests.batch.test_batch_pass import lay_out

    vendor = MockBatchServer(upstream=mock_server.base_url)
    try:
        monkeypatch.chdir(tmp_path)
        ws, runs = lay_out(tmp_path, vendor.base_url, batch=False, run_entries=[MENTAL_A], n=3)
        assert batch_pass(ws, runs, force_batch=True, wait=True).requests_submitted == {"model": 3, "judge": 3}
        vendor.polls_per_state = 10**9  # the next jury batch does not end
        with ws.store.transaction() as conn:  # forget the jury's answers: asked again by the next --batch
            conn.execute(f"DELETE FROM completions WHERE model_deployment = '{JUDGE}'")
        assert batch_pass(ws, runs, force_batch=True, wait=False).requests_submitted == {"judge": 3}
        for kwargs in ({}, {"collect_only": True}, {"jury_only": True}):
            report = batch_pass(ws, runs, wait=False, **kwargs)
            assert report.submitted == [] and report.pending_runs == runs, kwargs
        assert batch_runs(ws) == runs
    finally:
        vendor.close()


# -- a model without a batch API, its jury by batch -------------------------------------------------------
def test_the_jury_of_a_model_asked_online_goes_by_batch(at, mock_server, capsys):
    """mock-gpt-a served by vLLM (no batch API): its answers are asked online first, then its judges'
    requests go into the judge's batch with the other model's batch; nothing of the jury online."""
    vendor = MockBatchServer(upstream=mock_server.base_url)
    try:
        root = at("vllm", vendor.base_url, batch=False)
        path = root / "work" / "prod_env" / "model_deployments.yaml"
        head, sep, rest = path.read_text().partition("  - name: mockai/mock-gpt-b")
        head = head.replace("helm.clients.openai_client.OpenAIClient", "helm.clients.vllm_client.VLLMChatClient")
        path.write_text(head.replace("openai_model_name", "vllm_model_name") + sep + rest)
        assert run_main(ARGS + ["--batch"]) == 0
        judged = table(db(root), f"SELECT count(*) FROM completions WHERE model_deployment = '{JUDGE}'")[0][0]
        assert judged == N  # one judge call per instance in this jury
        assert len(vendor.online) == N  # mock-gpt-a's answers, nothing else
        assert vendor.creates == 2 and len(vendor.answered) == N + judged  # mock-gpt-b's batch, the jury's
        err = capsys.readouterr().err
        assert "mockai/mock-judge: submitted batch" in err and "mockai/mock-gpt-a: submitted" not in err
        before = counts(vendor)
        assert run_main(ARGS + ["--batch"]) == 0 and counts(vendor) == before
    finally:
        vendor.close()
