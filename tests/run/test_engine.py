"""The completion engine pays for each request once: reuse, crash-resume, failures recorded."""
import json
import threading

import pytest

from medhelm_core.clients.base import RequestFailed
from medhelm_core.engine import CompletionEngine, Job
from medhelm_core.store import Store, request_key


class CountingClient:
    def __init__(self, fail_on=(), crash_after=None):
        self.calls = []
        self.fail_on = set(fail_on)
        self.crash_after = crash_after
        self.lock = threading.Lock()

    def complete(self, request, on_retry=None):
        with self.lock:
            self.calls.append(request["prompt"])
            n = len(self.calls)
        if self.crash_after is not None and n > self.crash_after:
            raise KeyboardInterrupt("simulated crash")
        if request["prompt"] in self.fail_on:
            raise RequestFailed("server error (HTTP 500) (after 6 attempts)", attempts=6)
        return {"success": True, "embedding": [], "completions": [{"text": request["prompt"].upper()}],
                "cached": False, "request_time": 0.01, "_attempts": 1}


def _jobs(n):
    out = []
    for i in range(n):
        req = {"model": "m/x", "prompt": f"p{i}"}
        out.append(Job(request_key("d/x", req), "d/x", req))
    return out


def test_second_run_reuses_everything(tmp_path):
    store = Store(tmp_path / "t.duckdb")
    client = CountingClient()
    engine = CompletionEngine(store, lambda d: client, num_threads=4)
    results, report = engine.run(_jobs(20) + _jobs(5))  # duplicates are asked once
    assert (report.new, report.reused, len(client.calls)) == (20, 0, 20)
    results2, report2 = engine.run(_jobs(20))
    assert (report2.new, report2.reused, len(client.calls)) == (0, 20, 20)
    assert results2 == results


def test_crash_midway_then_resume_requests_only_the_rest(tmp_path):
    store = Store(tmp_path / "t.duckdb")
    crashing = CountingClient(crash_after=7)
    engine = CompletionEngine(store, lambda d: crashing, num_threads=1, flush_every=1)
    with pytest.raises(KeyboardInterrupt):
        engine.run(_jobs(20))
    with store.connect() as conn:
        saved = conn.execute("SELECT count(*) FROM completions").fetchone()[0]
    assert saved == 7
    fresh = CountingClient()
    _, report = CompletionEngine(store, lambda d: fresh).run(_jobs(20))
    assert (report.reused, report.new, len(fresh.calls)) == (7, 13, 13)
    with store.connect() as conn:
        assert conn.execute("SELECT count(*), count(DISTINCT request_key) FROM completions").fetchone() == (20, 20)


def test_failures_are_recorded_not_stored_as_completions(tmp_path):
    store = Store(tmp_path / "t.duckdb")
    client = CountingClient(fail_on={"p3"})
    results, report = CompletionEngine(store, lambda d: client).run(_jobs(5))
    assert report.failed == 1 and len(results) == 4
    with store.connect() as conn:
        assert conn.execute("SELECT count(*) FROM completion_errors").fetchone()[0] == 1
        stored = [json.loads(r[0]) for r in conn.execute("SELECT result FROM completions").fetchall()]
    assert all("_attempts" not in r for r in stored)


# -- against the shared mock server (real HTTP on loopback) ----------------------------------------
from medhelm_core.clients.openai_compatible import OpenAICompatibleClient  # noqa: E402
from medhelm_core.ratelimit import RATE_LIMITED, SERVER_ERROR, DeploymentSettings  # noqa: E402
from tests.mock_server import MockServer  # noqa: E402


def _mock_jobs(n, tag="engine"):
    out = []
    for i in range(n):
        req = {"model": "mockai/mock-gpt-a", "model_deployment": "mockai/mock-gpt-a",
               "prompt": f"{tag} {i}: Answer with A, B or C.\nA. yes\nB. no\nC. maybe\nAnswer:",
               "temperature": 0.0, "top_p": 1, "num_completions": 1, "stop_sequences": ["\n"], "max_tokens": 5,
               "presence_penalty": 0, "frequency_penalty": 0, "top_k_per_token": 1, "echo_prompt": False,
               "embedding": False}
        out.append(Job(request_key("mockai/mock-gpt-a", req), "mockai/mock-gpt-a", req))
    return out


def test_flaky_endpoint_gives_results_identical_to_a_steady_one(tmp_path):
    """--fail-rate 0.3 --fail-codes 429,500 --retry-after-ms 20: same answers, nothing failed,
    only answers stored (429/5xx never become completions)."""
    flaky = MockServer("--fail-rate", "0.3", "--fail-codes", "429,500", "--retry-after-ms", "20")
    steady = MockServer()
    settings = DeploymentSettings(max_concurrency=8, max_attempts=8, cooldown_s=0.2)
    try:
        runs = {}
        for name, server in (("flaky", flaky), ("steady", steady)):
            client = OpenAICompatibleClient(server.base_url, "sk-test", openai_model_name="mock-gpt-a")
            store = Store(tmp_path / f"{name}.duckdb")
            engine = CompletionEngine(store, lambda d, c=client: c, settings_for=lambda d: settings)
            runs[name] = engine.run(_mock_jobs(60)) + (store, server.stats())
    finally:
        flaky.close()
        steady.close()
    (flaky_results, flaky_report, flaky_store, flaky_stats) = runs["flaky"]
    (steady_results, steady_report, _, steady_stats) = runs["steady"]
    assert {k: r["completions"] for k, r in flaky_results.items()} == \
        {k: r["completions"] for k, r in steady_results.items()}
    assert len(flaky_results) == 60 and flaky_report.failed == 0 and flaky_report.new == 60
    assert flaky_stats["injected_failures"] > 0 and flaky_report.retries == flaky_stats["injected_failures"]
    assert flaky_report.attempts_by_kind[RATE_LIMITED] > 0 and flaky_report.attempts_by_kind[SERVER_ERROR] > 0
    assert flaky_stats["distinct_requests"] == steady_stats["distinct_requests"] == 60
    with flaky_store.connect() as conn:
        assert conn.execute("SELECT count(*), count(DISTINCT request_key), bool_and(success),"
                            " bool_and(outcome = 'ok') FROM completions").fetchone() == (60, 60, True, True)
        assert conn.execute("SELECT count(*) FROM completion_errors").fetchone()[0] == 0
        assert conn.execute("SELECT sum(attempts) FROM completions").fetchone()[0] == 60 + flaky_report.retries


_TWIN = r"""
import json, sys
sys.path.insert(0, {root!r})
from medhelm_core.clients.openai_compatible import OpenAICompatibleClient
from medhelm_core.engine import CompletionEngine
from medhelm_core.ratelimit import DeploymentSettings
from medhelm_core.store import Store
from tests.run.test_engine import _mock_jobs
client = OpenAICompatibleClient({url!r}, "sk-test", openai_model_name="mock-gpt-a")
engine = CompletionEngine(Store({db!r}), lambda d: client, settings_for=lambda d: DeploymentSettings(max_concurrency=4),
                          poll_s=0.05)
results, report = engine.run(_mock_jobs(40, "twin"))
print(json.dumps({{"n": len(results), "new": report.new, "waited": report.waited,
                  "texts": sorted(r["completions"][0]["text"] for r in results.values())}}))
"""


def test_two_processes_at_once_never_ask_the_same_request(tmp_path):
    """Two materializations of the same requests at the same time (two processes, one DuckDB file):
    each request is sent once, both get every answer, no duplicate rows."""
    import subprocess
    import sys
    from pathlib import Path

    server = MockServer("--latency-ms", "200")
    root = str(Path(__file__).resolve().parents[2])
    code = _TWIN.format(root=root, url=server.base_url, db=str(tmp_path / "shared.duckdb"))
    try:
        procs = [subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                  text=True, cwd=root) for _ in range(2)]
        outs = []
        for p in procs:
            out, err = p.communicate(timeout=120)
            assert p.returncode == 0, err[-2000:]
            outs.append(json.loads(out.strip().splitlines()[-1]))
        stats = server.stats()
    finally:
        server.close()
    assert [o["n"] for o in outs] == [40, 40] and outs[0]["texts"] == outs[1]["texts"]
    assert sum(o["new"] for o in outs) == 40  # one asked (what it claimed), never both
    assert max(o["waited"] for o in outs) > 0  # they did overlap: one waited for the other's answers
    assert stats["total_requests"] == stats["distinct_requests"] == 40
    store = Store(tmp_path / "shared.duckdb")
    with store.connect() as conn:
        assert conn.execute("SELECT count(*), count(DISTINCT request_key) FROM completions").fetchone() == (40, 40)
        assert conn.execute("SELECT count(*) FROM completion_claims").fetchone()[0] == 0


def test_claims_of_a_dead_process_are_taken_over(tmp_path):
    store = Store(tmp_path / "t.duckdb")
    jobs = _jobs(5)
    with store.transaction() as conn:  # a process that died holding claims (pid 2**22 + 7 does not exist)
        conn.executemany("INSERT INTO completion_claims VALUES (?, ?, ?)",
                         [(j.key, "deadhost|4194311|-|abc", 0.0) for j in jobs[:3]])
        conn.executemany("INSERT INTO completion_claims VALUES (?, ?, ?)",
                         [(jobs[3].key, f"{__import__('socket').gethostname()}|4194311|-|abc", 1e18)])
    client = CountingClient()
    results, report = CompletionEngine(store, lambda d: client).run(jobs)
    assert len(results) == 5 and report.new == 5 and len(client.calls) == 5
