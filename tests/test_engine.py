"""The completion engine pays for each request once: reuse, crash-resume, failures recorded."""
import json
import threading

import pytest

from medhelm_core.clients import RequestFailed
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
