"""Dollar cost: usage stored with each completion, cost views, old files, budget, estimate."""
import json
import shutil
import stat

import duckdb
import pytest

from medhelm_core.catalog import default_catalog
from medhelm_core.clients.openai_compatible import OpenAICompatibleClient
from medhelm_core.costs import Budget
from medhelm_core.engine import CompletionEngine, Job
from medhelm_core.ratelimit import DeploymentSettings
from medhelm_core.store import Store, request_key
from tests.mock_server import ScriptedServer
from tests.oracle import SYNTHETIC

PRICED = DeploymentSettings(max_concurrency=4, input_per_million=2.0, output_per_million=10.0)


def _req(prompt, dep="mockai/m", max_tokens=10):
    return {"model": dep, "model_deployment": dep, "prompt": prompt, "temperature": 0.0, "top_p": 1,
            "num_completions": 1, "stop_sequences": [], "max_tokens": max_tokens, "presence_penalty": 0,
            "frequency_penalty": 0, "echo_prompt": False}


def _job(prompt, dep="mockai/m", max_tokens=10):
    r = _req(prompt, dep, max_tokens)
    return Job(request_key(dep, r), dep, r)


OLD_COMPLETIONS = """CREATE TABLE completions (
    request_key VARCHAR PRIMARY KEY, model_deployment VARCHAR, model VARCHAR, request JSON,
    result JSON, success BOOLEAN, attempts INTEGER, completed_at TIMESTAMP DEFAULT current_timestamp)"""
OLD_ERRORS = """CREATE TABLE completion_errors (
    request_key VARCHAR, model_deployment VARCHAR, error VARCHAR, attempts INTEGER,
    failed_at TIMESTAMP DEFAULT current_timestamp)"""


def test_an_old_database_keeps_working_and_its_completions_are_reused(tmp_path):
    path = tmp_path / "medhelm.duckdb"
    old = _job("paid long ago")
    conn = duckdb.connect(str(path))
    conn.execute(OLD_COMPLETIONS)
    conn.execute(OLD_ERRORS)
    conn.execute("INSERT INTO completions (request_key, model_deployment, model, request, result, success, attempts)"
                 " VALUES (?, ?, ?, ?, ?, true, 1)",
                 [old.key, old.deployment, "mockai/m", json.dumps(old.request),
                  json.dumps({"success": True, "completions": [{"text": "old"}]})])
    conn.close()
    server = ScriptedServer(lambda prompt, n, srv: (200, None, {}, 0))
    try:
        client = OpenAICompatibleClient(server.base_url, "k", openai_model_name="m")
        store = Store(path)
        results, report = CompletionEngine(store, lambda d: client, settings_for=lambda d: PRICED).run(
            [old, _job("new one")])
    finally:
        server.close()
    assert results[old.key]["completions"][0]["text"] == "old"
    assert (report.reused, report.new, server.count) == (1, 1, 1)
    with store.connect() as conn:
        rows = dict(conn.execute("SELECT request_key, cost_usd FROM completion_costs").fetchall())
        cols = {r[0] for r in conn.execute("DESCRIBE completions").fetchall()}
    assert {"prompt_tokens", "completion_tokens", "usage", "cost_usd", "outcome"} <= cols
    assert rows[old.key] is None  # no usage was recorded back then
    assert rows[_job("new one").key] == pytest.approx((2 * 2.0 + 3 * 10.0) / 1e6)  # 2 prompt, 3 completion tokens


def test_cost_views_per_instance_run_model_and_judge(tmp_path):
    store = Store(tmp_path / "medhelm.duckdb")
    with store.transaction() as conn:
        conn.execute("INSERT INTO deployment_prices VALUES ('m/a', 1.0, 2.0, now()), ('j/x', 10.0, 20.0, now())")
        conn.execute("INSERT INTO run_entries (suite, run_name, model, model_deployment) VALUES"
                     " ('s', 'r1', 'm/a', 'm/a'), ('s', 'r2', 'm/a', 'm/a')")
        # r1: two instances; r2 asks the same request as r1/i1 (content-addressed: paid once)
        conn.execute("INSERT INTO requests (suite, run_name, position, instance_id, request_key, model_deployment)"
                     " VALUES ('s', 'r1', 0, 'i1', 'k1', 'm/a'), ('s', 'r1', 1, 'i2', 'k2', 'm/a'),"
                     " ('s', 'r2', 0, 'i1', 'k1', 'm/a')")
        conn.execute("INSERT INTO judge_verdicts (suite, run_name, position, instance_id, annotator, judge,"
                     " judge_deployment, status, request_key) VALUES"
                     " ('s', 'r1', 0, 'i1', 'jury', 'x', 'j/x', 'ok', 'jk1'),"
                     " ('s', 'r1', 1, 'i2', 'jury', 'x', 'j/x', 'skipped_empty_output', NULL)")
        conn.execute("INSERT INTO completions (request_key, model_deployment, success, prompt_tokens,"
                     " completion_tokens, cost_usd, outcome) VALUES"
                     " ('k1', 'm/a', true, 1000, 100, NULL, 'ok'),"      # priced afterwards: from deployment_prices
                     " ('k2', 'm/a', true, 2000, 200, 0.5, 'ok'),"       # the price when it was paid wins
                     " ('jk1', 'j/x', true, 100, 10, NULL, 'ok')")
    with store.connect() as conn:
        inst = {r[0]: r[1:] for r in conn.execute(
            "SELECT instance_id, model_cost_usd, judge_cost_usd, total_cost_usd FROM instance_costs"
            " WHERE run_name = 'r1'").fetchall()}
        runs = {r[0]: r[1:] for r in conn.execute(
            "SELECT run_name, model_calls, model_cost_usd, judge_calls, judge_cost_usd, total_cost_usd"
            " FROM run_costs").fetchall()}
        model = conn.execute("SELECT runs, model_cost_usd, judge_cost_usd FROM model_costs").fetchall()
        judge = conn.execute("SELECT judge, judge_deployment, calls, prompt_tokens, cost_usd FROM judge_costs").fetchall()
    k1, jk1 = (1000 * 1.0 + 100 * 2.0) / 1e6, (100 * 10.0 + 10 * 20.0) / 1e6
    assert inst["i1"] == pytest.approx((k1, jk1, k1 + jk1)) and inst["i2"] == pytest.approx((0.5, 0.0, 0.5))
    assert runs["r1"] == pytest.approx((2, k1 + 0.5, 1, jk1, k1 + 0.5 + jk1))
    assert runs["r2"] == pytest.approx((1, k1, 0, 0.0, k1))
    assert model == [(2, pytest.approx(2 * k1 + 0.5), pytest.approx(jk1))]
    assert judge == [("x", "j/x", 1, 100, pytest.approx(jk1))]


def test_budget_reserves_the_worst_case():
    b = Budget(1.0)
    assert b.reserve(0.6) and not b.reserve(0.5) and b.exhausted  # 0.6 + 0.5 > 1: stop, and stay stopped
    assert not b.reserve(0.01)
    b.settle(0.6, 0.2, paid=True)
    assert (b.spent, b.reserved, b.paid_calls, b.skipped) == (pytest.approx(0.2), 0.0, 1, 2)
    with pytest.raises(Exception):
        Budget(-1)


def test_budget_stops_cleanly_and_a_rerun_finishes_without_asking_twice(tmp_path):
    server = ScriptedServer(lambda prompt, n, srv: (200, None, {}, 0.01))
    # Worst case of one request: 3 prompt tokens (~4 chars a token) * 2 + 10 max_tokens * 10 = 106e-6 USD.
    jobs = [_job(f"request number {i:03d}") for i in range(30)]
    store = Store(tmp_path / "medhelm.duckdb")
    try:
        client = OpenAICompatibleClient(server.base_url, "k", openai_model_name="m")
        budget = Budget(0.001)
        engine = CompletionEngine(store, lambda d: client, settings_for=lambda d: PRICED, budget=budget)
        results, report = engine.run(jobs)
        first = server.count
        assert report.budget_stopped and report.skipped == 30 - report.new and report.new == first
        assert 0 < first < 30 and budget.spent <= 0.001
        assert budget.spent == pytest.approx(report.cost_usd)
        with pytest.raises(Exception, match="price"):  # --budget needs a price for every deployment
            CompletionEngine(store, lambda d: client, budget=Budget(1.0)).run([_job("unpriced", "other/x")])
        results2, report2 = CompletionEngine(store, lambda d: client, settings_for=lambda d: PRICED).run(jobs)
    finally:
        server.close()
    assert (report2.reused, report2.new, len(results2)) == (first, 30 - first, 30)
    assert server.count == 30 and len(set(server.prompts)) == 30
    with store.connect() as conn:
        assert conn.execute("SELECT count(*), count(DISTINCT request_key) FROM completions").fetchone() == (30, 30)


def test_estimate_counts_model_and_judge_calls_without_sending(tmp_path, monkeypatch):
    from medhelm_core.helm_config.expand import expand_confs
    from medhelm_core.run.estimate import estimate_runs, format_estimate
    from medhelm_core.run.workspace import Workspace

    shutil.copytree(SYNTHETIC / "inputs", tmp_path / "work")
    for p in (tmp_path / "work").rglob("*"):
        p.chmod(p.stat().st_mode | stat.S_IWUSR)
    (tmp_path / "work" / "prod_env" / "medhelm_deployments.yaml").write_text(
        "deployments:\n  mockai/mock-gpt-a: {input_per_million: 1.0, output_per_million: 2.0}\n"
        "  mockai/mock-judge: {input_per_million: 3.0, output_per_million: 4.0}\n")
    monkeypatch.chdir(tmp_path)
    ws = Workspace(tmp_path / "out", "work/prod_env")
    entries = expand_confs(["work/conf/private.conf"], max_eval_instances=10, num_train_trials=1, priority=None,
                           models_to_run=None, local_path="work/prod_env",
                           run_spec_functions=default_catalog().run_spec_functions)
    est = estimate_runs(ws, entries)
    rows = {(r.run_name.split(":")[0] + ":" + r.run_name.split("model=")[1].split(",")[0], r.kind): r
            for r in est.rows}
    shc = rows[("shc_ptbm_med:mockai_mock-gpt-a", "model")]
    assert shc.calls == 10 and shc.reused == 0 and shc.prompt_tokens > 0
    assert shc.output_tokens == 10 * entries[0][1]["adapter_spec"]["max_tokens"]
    assert shc.usd == pytest.approx((shc.prompt_tokens * 1.0 + shc.output_tokens * 2.0) / 1e6)
    jury = rows[("mental_health:mockai_mock-gpt-a", "judge")]
    assert jury.deployment == "mockai/mock-judge" and jury.calls == 10 and jury.output_tokens == 10 * 4096
    assert rows[("mental_health:mockai_mock-gpt-b", "model")].usd is None  # mock-gpt-b has no price
    assert est.unpriced == {"mockai/mock-gpt-b"}
    text = format_estimate(est, budget=0.01)
    assert "No price for: mockai/mock-gpt-b" in text and "--budget" in text
    assert not (tmp_path / "out" / "medhelm.duckdb").exists()  # nothing written, nothing sent


def test_a_store_writes_each_price_once_until_it_changes(tmp_path):
    """Every engine batch hands its prices in use; only those its store has not written yet (or
    that changed since) are written, and a new store object (a new invocation) writes them all."""
    from types import SimpleNamespace as P

    from medhelm_core.costs import prices_recorded, prices_to_record
    from medhelm_core.store import Store

    store = Store(tmp_path / "medhelm.duckdb")
    prices = {"a/x": P(priced=True, input_per_million=1.0, output_per_million=2.0),
              "b/y": P(priced=True, input_per_million=3.0, output_per_million=4.0),
              "c/free": P(priced=False, input_per_million=None, output_per_million=None)}
    assert set(prices_to_record(store, prices)) == {"a/x", "b/y"}
    prices_recorded(store, prices_to_record(store, prices))
    assert prices_to_record(store, prices) == {}
    changed = {**prices, "b/y": P(priced=True, input_per_million=3.0, output_per_million=5.0)}
    assert set(prices_to_record(store, changed)) == {"b/y"}
    assert set(prices_to_record(Store(tmp_path / "medhelm.duckdb"), prices)) == {"a/x", "b/y"}
