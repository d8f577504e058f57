"""The batch pass in front of the online runs (`run.batch_pass`), on the inputs of HELM 0.5.16's golden
synthetic output, against the mock batch server (tests/mock_openai_batch.py) in front of the repo's mock
model server:

* the suite by batch equals the same suite run online (files under benchmark_output/runs and the
  per-instance tables, the clock fields aside) and HELM's golden output; the jury is batched behind the
  model; spend is the batch price; a rerun asks nothing;
* a kill -9 between submission and collection, then a rerun that submits nothing twice and pays once;
* an expired batch, partial failures: asked again (online, or in the next pass), none dropped;
* --no-wait then a later collect; --collect only collects; --budget counts a batch's worst case;
* a deployment without a batch API runs online in the same invocation."""
from __future__ import annotations

import json
import re
import textwrap
from pathlib import Path

import duckdb
import pytest

from medhelm_core.batch import ledger
from medhelm_core.costs import Budget
from medhelm_core.engine import RunControls
from medhelm_core.run import datasets, entries, suite
from medhelm_core.run import requests as request_layer
from medhelm_core.run.batch_first import outstanding
from medhelm_core.run.batch_pass import batch_pass
from medhelm_core.run.workspace import RunRef, Workspace
from medhelm_core.selections import RunSelection
from tests.batch.conftest import batch_polls, kill_9_when, spawn_python
from tests.mock_openai_batch import MockBatchServer
from tests.oracle import SYNTHETIC
from tests.parity import assert_runs_equal_gold, lay_out_inputs

POLL = 0.05
PRICES = "input_per_million: 1.0, output_per_million: 2.0"
MENTAL_A = ("mental_health:data_path=work/private/mental_health.csv,jury_config_path=work/private/jury_config.yaml,"
            "model=mockai/mock-gpt-a,model_deployment=mockai/mock-gpt-a")
CLEAR_B = "clear:condition=alcohol_dependence,data_path=work/private/clear/,model=mockai/mock-gpt-b," \
          "model_deployment=mockai/mock-gpt-b"


def lay_out(root: Path, url: str, batch: bool = True, run_entries: list[str] | None = None, n: int = 50,
            budget: float | None = None, judge_without_batch_api: bool = False) -> tuple[Workspace, list[RunRef]]:
    """The golden synthetic inputs at root/work, every deployment at `url`, runs registered and their
    datasets built (the caller is in `root`: the confs' paths are relative to it)."""
    env = lay_out_inputs(SYNTHETIC / "inputs", root, url) / "prod_env"
    (env / "credentials.conf").write_text('mockaiApiKey: "sk-mock-not-a-secret"\n')
    (env / "medhelm_deployments.yaml").write_text(
        f'deployments:\n  "mockai/*": {{batch: {str(batch).lower()}, batch_poll_seconds: {POLL}, {PRICES}}}\n')
    if judge_without_batch_api:  # vLLM's OpenAI-compatible server: no batch API
        path = env / "model_deployments.yaml"
        text = path.read_text()
        head, _, judge = text.partition("  - name: mockai/mock-judge")
        judge = judge.replace("helm.clients.openai_client.OpenAIClient", "helm.clients.vllm_client.VLLMChatClient")
        path.write_text(head + "  - name: mockai/mock-judge" + judge.replace("openai_model_name", "vllm_model_name"))
    ws = Workspace(root / "out", env, num_threads=8,
                   controls=RunControls(budget=Budget(budget) if budget is not None else None))
    if run_entries is None:
        selection = RunSelection(conf_paths=["work/conf/private.conf"], suite="oracle-private", max_eval_instances=n)
    else:
        selection = RunSelection(conf_paths=[], run_entries=run_entries, suite="small", max_eval_instances=n)
    with_entries = entries.expand_selection(ws, selection)
    runs = entries.register_runs(ws, selection.suite, with_entries)
    for keys in entries.scenario_partitions(with_entries, ws.catalog).values():
        for key in keys:
            datasets.build_dataset(ws, key)
    return ws, runs


def run_online(ws: Workspace, runs: list[RunRef]) -> list[suite.RunOutcome]:
    outcomes = list(suite.run_suite(ws, runs))
    assert [o.error for o in outcomes] == [None] * len(runs)
    return outcomes


def model_keys(ws: Workspace, runs: list[RunRef]) -> list[str]:
    keys = []
    for run in runs:
        request_layer.build_requests(ws, run)
        keys += [k for _, k, _, _ in request_layer.request_rows(ws, run)]
    return keys


def rows(ws: Workspace, sql: str, params=()) -> list[tuple]:
    with ws.store.connect() as conn:
        return conn.execute(sql, list(params)).fetchall()


# -- comparing two outputs ------------------------------------------------------------------------
CLOCK = re.compile(rb'("request_time|"request_datetime)": [-+0-9.eE]+')


def without_runtime(obj):
    """A stats file without its wall-clock stats (inference_runtime is request_time's)."""
    if isinstance(obj, list):
        return [without_runtime(x) for x in obj
                if not (isinstance(x, dict) and "runtime" in str((x.get("name") or {}).get("name", "")))]
    if isinstance(obj, dict):
        return {k: without_runtime(v) for k, v in obj.items()}
    return obj


def normalised(path: Path) -> bytes:
    """The file's bytes with the clock fields masked (no two calls share them, online or batch)."""
    data = path.read_bytes()
    if path.name in ("stats.json", "per_instance_stats.json"):
        return json.dumps(without_runtime(json.loads(data)), indent=2).encode()
    return CLOCK.sub(rb"\1: 0", data)


def run_files(out: Path, suite_name: str) -> dict[str, Path]:
    base = out / "runs" / suite_name
    return {str(p.relative_to(base)): p for p in sorted(base.rglob("*")) if p.is_file()}


PER_INSTANCE = {
    "requests": "SELECT * FROM requests ORDER BY suite, run_name, position",
    "annotations": "SELECT * FROM annotations ORDER BY ALL",
    "judge_verdicts": "SELECT * FROM judge_verdicts ORDER BY ALL",
    "jury_scores": "SELECT * FROM jury_scores ORDER BY ALL",
    "instance_stats": "SELECT * FROM instance_stats WHERE name NOT LIKE '%runtime%' ORDER BY ALL",
    "run_stats": "SELECT * FROM run_stats WHERE name NOT LIKE '%runtime%' ORDER BY ALL",
}
# All but the clock fields, the cost (half by batch) and `attempts` (how many tries the answer took online:
# operational, and a loaded loopback server drops a connection now and then).
COMPLETION_FIELDS = ("request_key, model_deployment, model, request, result, success, prompt_tokens,"
                     " completion_tokens, usage, outcome, untruncated, model_logprobs")


def table(db: Path, sql: str) -> list[tuple]:
    conn = duckdb.connect(str(db), read_only=True)
    try:
        return conn.execute(sql).fetchall()
    finally:
        conn.close()


def completions(db: Path) -> dict[str, tuple]:
    out = {}
    for row in table(db, f"SELECT {COMPLETION_FIELDS} FROM completions ORDER BY request_key"):
        result = {k: v for k, v in json.loads(row[4]).items() if k not in ("request_time", "request_datetime")}
        out[row[0]] = row[:4] + (result,) + row[5:]
    return out


# -- a suite by batch against the same suite online -----------------------------------------------
@pytest.fixture(scope="module")
def pair(tmp_path_factory, mock_server):
    """oracle-private (6 runs, 2 with a jury) run online, and by batch, both against one batch server
    (a vendor serves both APIs at one base URL, so both workspaces' deployments are the same)."""
    server = MockBatchServer(upstream=mock_server.base_url)
    mp = pytest.MonkeyPatch()
    try:
        out = {}
        for mode in ("online", "batch"):
            root = tmp_path_factory.mktemp(mode)
            mp.chdir(root)
            ws, runs = lay_out(root, server.base_url, batch=mode == "batch")
            online_before = len(server.online)
            events, sleeps = [], []
            report = batch_pass(ws, runs, wait=True, on_event=events.append, sleep=sleeps.append) \
                if mode == "batch" else None
            batched_online = len(server.online) - online_before
            outcomes = run_online(ws, runs)
            out[mode] = {"ws": ws, "runs": runs, "root": root, "report": report, "events": events, "sleeps": sleeps,
                         "outcomes": outcomes, "online_calls": len(server.online) - online_before,
                         "online_during_pass": batched_online}
        out["server"] = server
        yield out
    finally:
        mp.undo()
        server.close()


def test_the_suite_by_batch_asks_everything_in_three_batches_and_nothing_online(pair):
    report, server = pair["batch"]["report"], pair["server"]
    assert pair["online"]["online_calls"] == 399 and pair["online"]["report"] is None
    # Two model batches (one per deployment), then one jury batch: 300 + 99 requests, all answered.
    assert len(report.submitted) == len(report.collected) == 3 and report.outstanding == []
    assert report.requests_submitted == {"model": 300, "judge": 99}
    assert (report.answered, report.retry, report.failed, report.invalid) == (399, 0, 0, 0)
    assert report.pending_runs == [] and report.errors == []
    assert server.creates == 3 and len(server.answered) == len(set(server.answered)) == 399
    # The online runs after the pass found every answer stored: not one call.
    assert pair["batch"]["online_calls"] == 0
    assert all(o.new_calls == 0 for o in pair["batch"]["outcomes"])
    assert report.summary_line().startswith("batch: 3 submitted (399 requests), 3 collected: 399 answered, 0 to ask "
                                            "again, 0 failed, $")
    # Polled at the deployments' batch_poll_seconds.
    assert pair["batch"]["sleeps"] and set(pair["batch"]["sleeps"]) == {POLL}


def test_the_jury_is_batched_behind_the_model(pair):
    ws = pair["batch"]["ws"]
    batches = rows(ws, "SELECT model_deployment, created_at, collected_at FROM batches ORDER BY created_at")
    assert [d for d, _, _ in batches] == ["mockai/mock-gpt-a", "mockai/mock-gpt-b", "mockai/mock-judge"]
    judge_created = batches[2][1]
    assert all(collected <= judge_created for _, _, collected in batches[:2])
    events = pair["batch"]["events"]
    assert [e.split(":")[0] + " " + e.split(" ")[1] for e in events] == [
        "mockai/mock-gpt-a submitted", "mockai/mock-gpt-b submitted", "mockai/mock-gpt-a collected",
        "mockai/mock-gpt-b collected", "mockai/mock-judge submitted", "mockai/mock-judge collected"]


def test_files_and_tables_equal_the_online_run(pair):
    online, batch = pair["online"], pair["batch"]
    a, b = run_files(online["root"] / "out", "oracle-private"), run_files(batch["root"] / "out", "oracle-private")
    assert set(a) == set(b) and len(a) == 5 * 6
    differ_raw = 0
    for name in a:
        differ_raw += a[name].read_bytes() != b[name].read_bytes()
        assert normalised(a[name]) == normalised(b[name]), name
    # Only the clock fields told them apart (scenario_state and the two stats files of each run).
    assert differ_raw == 3 * 6
    db_a, db_b = online["root"] / "out" / "medhelm.duckdb", batch["root"] / "out" / "medhelm.duckdb"
    for name, sql in PER_INSTANCE.items():
        got, want = table(db_b, sql), table(db_a, sql)
        assert got == want and got, name
    assert completions(db_b) == completions(db_a)


def test_the_suite_by_batch_equals_helms_golden_output(pair):
    assert assert_runs_equal_gold(pair["batch"]["root"] / "out", "oracle-private") == 300


def test_spend_is_the_batch_price(pair):
    costs = {}
    for mode in ("online", "batch"):
        db = pair[mode]["root"] / "out" / "medhelm.duckdb"
        costs[mode] = dict(table(db, "SELECT request_key, cost_usd FROM completions"))
    assert set(costs["batch"]) == set(costs["online"])
    assert all(costs["batch"][k] == pytest.approx(costs["online"][k] / 2) for k in costs["online"])
    report = pair["batch"]["report"]
    assert report.spend_usd == pytest.approx(sum(costs["batch"].values()))
    assert report.online_usd == pytest.approx(sum(costs["online"].values()))
    ws = pair["batch"]["ws"]
    (paid,) = rows(ws, "SELECT sum(cost_usd) FROM completion_costs")[0]  # the cost views: each call paid once
    assert paid == pytest.approx(report.spend_usd)


def test_a_rerun_submits_and_asks_nothing(pair):
    ws, runs, server = pair["batch"]["ws"], pair["batch"]["runs"], pair["server"]
    before = (server.creates, len(server.uploads), len(server.online), len(server.answered))
    report = batch_pass(ws, runs, wait=True)
    assert (report.submitted, report.collected, report.answered) == ([], [], 0)
    again = list(suite.run_suite(ws, runs))
    assert all(o.reused for o in again)
    assert (server.creates, len(server.uploads), len(server.online), len(server.answered)) == before
    # The key is in no file the pass or the runs wrote (the ledger keeps no key, URL path or token).
    written = [p for p in (pair["batch"]["root"] / "out").rglob("*") if p.is_file()]
    assert any(p.name == "medhelm.duckdb" for p in written)
    assert not [p for p in written if b"sk-mock-not-a-secret" in p.read_bytes()]


# -- a killed process -----------------------------------------------------------------------------
CHILD = textwrap.dedent("""
    import json, sys
    from pathlib import Path
    from medhelm_core.run.batch_pass import batch_pass
    from medhelm_core.run.workspace import RunRef, Workspace
    ws = Workspace(Path("out"), Path(sys.argv[1]), num_threads=4)
    runs = [RunRef(*r) for r in json.loads(sys.argv[2])]
    batch_pass(ws, runs, wait=True, on_event=lambda line: print(line, flush=True))
    print("done", flush=True)
""")


def test_kill_9_between_submission_and_collection_then_a_rerun_pays_once(tmp_path, monkeypatch, batch_server):
    server = batch_server(polls_per_state=10**9)  # never ends while it waits
    monkeypatch.chdir(tmp_path)
    ws, runs = lay_out(tmp_path, server.base_url, run_entries=[MENTAL_A, CLEAR_B], n=8)
    child = spawn_python(CHILD, str(ws.local_path), json.dumps([[r.suite, r.run_name] for r in runs]),
                         cwd=tmp_path)
    # Both model batches created, and polled (so the child is waiting on them), then kill -9.
    kill_9_when(child, lambda: batch_polls(server) >= 4, timeout_s=120, poll_s=0.02)
    assert server.creates == 2 and server.answered == []
    live = ledger.outstanding(ws.store)
    assert len(live) == 2 and all(r.acknowledged for r in live)
    assert outstanding(ws)

    server.polls_per_state = 1  # the vendor gets on with it
    report = batch_pass(ws, runs, wait=True)
    # The two batches the dead process submitted are collected, not submitted again; the jury follows.
    assert sorted(report.collected[:2]) == sorted(r.batch_id for r in live)
    assert report.requests_submitted == {"judge": 8} and len(report.submitted) == 1
    assert server.creates == 3 and len(server.uploads) == 3
    assert len(server.answered) == len(set(server.answered)) == 8 + 8 + 8  # each request run (paid) once
    assert report.outstanding == [] and not outstanding(ws)
    online_before = len(server.online)
    outcomes = run_online(ws, runs)
    assert len(server.online) == online_before and all(o.new_calls == 0 for o in outcomes)
    (paid,) = rows(ws, "SELECT count(*) FROM completions")[0]
    assert paid == 24
    # A third pass: nothing.
    assert batch_pass(ws, runs).submitted == [] and server.creates == 3


# -- expiry and failures --------------------------------------------------------------------------
def test_an_expired_batch_is_asked_online(tmp_path, monkeypatch, batch_server):
    server = batch_server(expire=True)
    monkeypatch.chdir(tmp_path)
    ws, runs = lay_out(tmp_path, server.base_url, run_entries=[CLEAR_B], n=6)
    report = batch_pass(ws, runs, wait=True)
    assert (report.answered, report.retry, report.failed) == (0, 6, 0) and len(report.collected) == 1
    (batch_id,) = report.collected
    assert {s for s, _ in ledger.items(ws.store, batch_id).values()} == {"retry"}
    assert ledger.get(ws.store, batch_id).state == "collected"
    assert rows(ws, "SELECT count(*) FROM completions")[0][0] == 0
    outcomes = run_online(ws, runs)
    assert len(server.online) == 6 and outcomes[0].model.new == 6 and server.answered == []


def test_partial_failures_are_asked_again_in_the_next_pass(tmp_path, monkeypatch, batch_server):
    server = batch_server()
    monkeypatch.chdir(tmp_path)
    ws, runs = lay_out(tmp_path, server.base_url, run_entries=[CLEAR_B], n=8)
    keys = model_keys(ws, runs)
    expired, transient, refused = keys[0], keys[1], keys[2]
    server.expire = {expired}
    server.item_errors = {
        transient: (500, {"error": {"message": "The server had an error", "type": "server_error"}}),
        refused: (400, {"error": {"message": "Invalid prompt", "type": "invalid_request_error"}})}
    first = batch_pass(ws, runs, wait=True)
    assert (first.answered, first.retry, first.failed) == (5, 2, 1)
    items = ledger.items(ws.store, first.collected[0])
    assert (items[expired][0], items[transient][0], items[refused][0]) == ("retry", "retry", "failed")
    assert "batch_expired" in items[expired][1] and "Invalid prompt" in items[refused][1]
    stored = {k for (k,) in rows(ws, "SELECT request_key FROM completions")}
    assert stored == set(keys) - {expired, transient, refused}  # none stored, none dropped

    server.expire, server.item_errors = False, {}
    second = batch_pass(ws, runs, wait=True)
    assert second.requests_submitted == {"model": 3} and second.answered == 3
    assert {k for (k,) in rows(ws, "SELECT request_key FROM completions")} == set(keys)
    outcomes = run_online(ws, runs)
    assert server.online == [] and outcomes[0].model.new == 0


# -- --no-wait, --collect -------------------------------------------------------------------------
def test_no_wait_then_collect(tmp_path, monkeypatch, batch_server):
    server = batch_server()
    monkeypatch.chdir(tmp_path)
    ws, runs = lay_out(tmp_path, server.base_url, run_entries=[MENTAL_A], n=5)
    first = batch_pass(ws, runs, wait=False)
    assert first.requests_submitted == {"model": 5} and len(first.outstanding) == 1
    assert first.pending_runs == runs and first.collected == []
    # A second invocation: polls (the batch moves on), submits nothing twice.
    second = batch_pass(ws, runs, wait=False)
    assert second.submitted == [] and second.outstanding == first.outstanding and server.creates == 1
    # --collect: waits for the outstanding batch and collects it; submits no jury.
    collected = batch_pass(ws, runs, wait=True, collect_only=True)
    assert collected.collected == first.submitted and collected.answered == 5
    assert collected.submitted == [] and server.creates == 1 and collected.pending_runs == []
    # The next --no-wait invocation submits the jury behind the stored answers ...
    third = batch_pass(ws, runs, wait=False)
    assert third.requests_submitted == {"judge": 5} and third.pending_runs == runs
    # ... and a waiting one collects it.
    fourth = batch_pass(ws, runs, wait=True)
    assert fourth.collected == third.submitted and fourth.submitted == [] and fourth.answered == 5
    assert not outstanding(ws) and server.creates == 2
    outcomes = run_online(ws, runs)
    assert server.online == [] and outcomes[0].new_calls == 0


def test_collect_only_with_nothing_outstanding_does_nothing(tmp_path, monkeypatch, batch_server):
    server = batch_server()
    monkeypatch.chdir(tmp_path)
    ws, runs = lay_out(tmp_path, server.base_url, run_entries=[CLEAR_B], n=3)
    report = batch_pass(ws, runs, collect_only=True)
    assert report.submitted == report.collected == [] and server.log == []


# -- budget -----------------------------------------------------------------------------------------
def test_budget_counts_a_batchs_worst_case_when_submitted(tmp_path, monkeypatch, batch_server):
    server = batch_server()
    monkeypatch.chdir(tmp_path)
    # Worst case of one request of this run: its prompt tokens + max_tokens, at half the price.
    ws, runs = lay_out(tmp_path, server.base_url, run_entries=[CLEAR_B], n=10, budget=1.0)
    settings, count = ws.deployment_settings("mockai/mock-gpt-b"), ws.token_counter("mockai/mock-gpt-b")
    model_keys(ws, runs)
    worst = [settings.batch_cost(count(json.loads(s)["request"]["prompt"]), json.loads(s)["request"]["max_tokens"],
                                 0.5) for (s,) in rows(ws, "SELECT request_state FROM requests ORDER BY position")]
    limit = sum(worst[:4]) + worst[4] / 2  # four fit, the fifth does not
    ws.controls.budget = budget = Budget(limit)
    report = batch_pass(ws, runs, wait=False)
    assert report.requests_submitted == {"model": 4} and report.budget_skipped == 6
    assert budget.reserved == pytest.approx(sum(worst[:4])) and budget.exhausted
    later = batch_pass(ws, runs, wait=True)
    assert later.answered == 4 and budget.reserved == pytest.approx(0.0, abs=1e-12)
    assert budget.spent == pytest.approx(later.spend_usd) and budget.spent <= limit
    assert budget.paid_calls == 4


# -- a deployment without a batch API ----------------------------------------------------------------
def test_a_judge_without_a_batch_api_is_asked_online_in_the_same_invocation(tmp_path, monkeypatch, batch_server):
    server = batch_server()
    monkeypatch.chdir(tmp_path)
    ws, runs = lay_out(tmp_path, server.base_url, run_entries=[MENTAL_A], n=5, judge_without_batch_api=True)
    report = batch_pass(ws, runs, wait=True)
    assert report.requests_submitted == {"model": 5} and report.online_deployments == {"mockai/mock-judge"}
    outcomes = run_online(ws, runs)
    assert outcomes[0].model.new == 0 and outcomes[0].judge.new == 5 and len(server.online) == 5


def test_force_batch_batches_deployments_whose_setting_is_off(tmp_path, monkeypatch, batch_server):
    server = batch_server()
    monkeypatch.chdir(tmp_path)
    ws, runs = lay_out(tmp_path, server.base_url, batch=False, run_entries=[CLEAR_B], n=3)
    assert batch_pass(ws, runs).submitted == [] and server.log == []
    report = batch_pass(ws, runs, force_batch=True)
    assert report.requests_submitted == {"model": 3} and report.answered == 3


# -- --estimate-cost ---------------------------------------------------------------------------------
def test_the_estimate_shows_the_batch_price_beside_the_online_one(tmp_path, monkeypatch, mock_server):
    from medhelm_core.run.estimate import estimate_runs, format_estimate, with_batch_prices

    monkeypatch.chdir(tmp_path)
    ws, _ = lay_out(tmp_path, mock_server.base_url, run_entries=[MENTAL_A], n=5, judge_without_batch_api=True)
    selection = RunSelection(conf_paths=[], run_entries=[MENTAL_A], suite="small", max_eval_instances=5)
    plain = format_estimate(estimate_runs(ws, entries.expand_selection(ws, selection)), budget=1.0)
    assert "by batch" not in plain.lower()  # without batch prices: as before
    est = with_batch_prices(ws, estimate_runs(ws, entries.expand_selection(ws, selection)))
    model, judge = est.rows
    assert (model.kind, model.batched, judge.kind, judge.batched) == ("model", True, "judge", False)
    assert model.usd > 0 and model.batch_usd == pytest.approx(model.usd / 2)  # mockai/*: the vendor's 0.5
    assert judge.batch_usd == judge.usd > 0  # no batch API: the online price
    assert est.total_batch_usd == pytest.approx(model.usd / 2 + judge.usd)
    text = format_estimate(est, budget=est.total_batch_usd + 1e-9)
    assert "USD by batch" in text
    assert (f"By batch: ${est.total_batch_usd:,.4f} instead of ${est.total_usd:,.4f} online "
            f"(saves ${model.usd / 2:,.4f}): 5 of 10 new calls through the vendors' batch APIs (mockai/mock-gpt-a)"
            ) in text
    assert text.endswith(f"The estimate by batch fits within --budget ${est.total_batch_usd + 1e-9:,.4f}.")
    # --batch on a workspace whose settings batch nothing: every deployment with a batch API.
    (ws.local_path / "medhelm_deployments.yaml").write_text(f'deployments:\n  "mockai/*": {{{PRICES}}}\n')
    ws = Workspace(ws.output_path, ws.local_path)
    est = estimate_runs(ws, entries.expand_selection(ws, selection))
    assert not with_batch_prices(ws, est).priced_for_batch
    assert with_batch_prices(ws, est, force_batch=True).rows[0].batched


# -- an Anthropic jury behind an OpenAI model --------------------------------------------------------
CLAUDE = "anthropic/claude-3-7-sonnet-20250219"


def with_claude_judge(root: Path, base_url: str, batch: bool) -> str:
    """A Claude deployment (HELM's AnthropicMessagesClient) at `base_url` and a jury of it alone; the
    mental_health run entry judged by it."""
    env = root / "work" / "prod_env"
    with (env / "model_deployments.yaml").open("a") as f:
        f.write(f"  - name: {CLAUDE}\n    model_name: {CLAUDE}\n    tokenizer_name: simple/tokenizer1\n"
                f"    max_sequence_length: 200000\n    client_spec:\n"
                f'      class_name: "helm.clients.anthropic_client.AnthropicMessagesClient"\n'
                f'      args:\n        base_url: "{base_url}"\n')
    (env / "credentials.conf").write_text('mockaiApiKey: "sk-mock-not-a-secret"\n'
                                          'anthropicApiKey: "sk-ant-mock-not-a-secret"\n')
    flag = str(batch).lower()
    (env / "medhelm_deployments.yaml").write_text(
        f'deployments:\n  "mockai/*": {{batch: {flag}, batch_poll_seconds: {POLL}, {PRICES}}}\n'
        f'  "anthropic/*": {{batch: {flag}, batch_poll_seconds: {POLL}, input_per_million: 3.0, '
        f'output_per_million: 15.0}}\n')
    (root / "work" / "private" / "jury_claude.yaml").write_text(
        f'judges:\n  - name: "claude"\n    model: "{CLAUDE}"\n    model_deployment: "{CLAUDE}"\n')
    return MENTAL_A.replace("jury_config.yaml", "jury_claude.yaml")


def test_an_anthropic_jury_batched_behind_an_openai_model_equals_online(tmp_path_factory, monkeypatch,
                                                                        mock_server):
    pytest.importorskip("anthropic")
    from tests.mock_anthropic_batch import MockAnthropicBatchServer
    from tests.mock_server import MockServer
    from tests.oracle import VENDOR_MOCK_SERVER

    if not VENDOR_MOCK_SERVER.is_file():
        pytest.skip("shared/tools/mock_vendor_server.py not present")
    vendor = MockServer(script=VENDOR_MOCK_SERVER)
    vendor_origin = vendor.base_url[: -len("/v1")]
    openai_batch = MockBatchServer(upstream=mock_server.base_url)
    claude_batch = MockAnthropicBatchServer(upstream=vendor_origin)
    try:
        out = {}
        for mode in ("online", "batch"):
            root = tmp_path_factory.mktemp(f"claude-{mode}")
            monkeypatch.chdir(root)
            lay_out_inputs(SYNTHETIC / "inputs", root, openai_batch.base_url)  # placed first, then extended
            entry = with_claude_judge(root, claude_batch.origin if mode == "batch" else vendor_origin,
                                      batch=mode == "batch")
            ws = Workspace(root / "out", root / "work" / "prod_env", num_threads=4)
            selection = RunSelection(conf_paths=[], run_entries=[entry], suite="claude", max_eval_instances=5)
            with_entries = entries.expand_selection(ws, selection)
            runs = entries.register_runs(ws, "claude", with_entries)
            for keys in entries.scenario_partitions(with_entries, ws.catalog).values():
                for key in keys:
                    datasets.build_dataset(ws, key)
            report = batch_pass(ws, runs, wait=True) if mode == "batch" else None
            outcomes = run_online(ws, runs)
            out[mode] = (root, report, outcomes)
        root, report, outcomes = out["batch"]
        assert report.requests_submitted == {"model": 5, "judge": 5} and report.answered == 10, report
        assert report.batch_deployments == {"mockai/mock-gpt-a", CLAUDE} and report.errors == []
        assert outcomes[0].new_calls == 0 and claude_batch.creates == 1
        ws = Workspace(root / "out", root / "work" / "prod_env")
        assert {s for (s,) in rows(ws, "SELECT status FROM judge_verdicts")} == {"ok"}
        a, b = run_files(out["online"][0] / "out", "claude"), run_files(root / "out", "claude")
        assert set(a) == set(b) and len(a) == 5
        for name in a:
            assert normalised(a[name]) == normalised(b[name]), name
    finally:
        claude_batch.close()
        openai_batch.close()
        vendor.close()
