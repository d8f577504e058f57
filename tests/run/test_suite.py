"""The runs of one invocation execute at once (`run.suite.run_suite`), on the synthetic HELM 0.5.16
inputs: 6 runs, 3 on each model deployment, 2 with a jury sharing one judge deployment. Every
request goes through a recording wrapper of the real client (real HTTP to the mock server)."""
import threading
import time
from pathlib import Path

import pytest

from medhelm_core.costs import Budget
from medhelm_core.engine import RunControls
from medhelm_core.helm_files import run_dir
from medhelm_core.run import datasets, entries, suite
from medhelm_core.run.workspace import Workspace
from medhelm_core.selections import RunSelection
from tests.mock_server import MockServer
from tests.oracle import SYNTHETIC
from tests.parity import assert_runs_equal_gold, lay_out_inputs

LIMIT = 2
SETTINGS = f"""deployments:
  "mockai/*": {{max_concurrency: {LIMIT}, input_per_million: 1.0, output_per_million: 2.0}}
"""


class Recorder:
    """Wraps a deployment's client: when each attempt started and ended, and the peak in flight."""

    def __init__(self, inner, name: str, log: list, lock: threading.Lock, flights: dict):
        self.inner, self.name, self.log, self.lock, self.flights = inner, name, log, lock, flights

    def attempt(self, request: dict):
        with self.lock:
            now = self.flights.setdefault(self.name, [0, 0])
            now[0] += 1
            now[1] = max(now[1], now[0])
        start = time.monotonic()
        try:
            return self.inner.attempt(request)
        finally:
            with self.lock:
                self.flights[self.name][0] -= 1
                self.log.append((self.name, start, time.monotonic(), request.get("prompt") or str(request)))


@pytest.fixture(scope="module")
def server():
    s = MockServer("--latency-ms", "30")
    yield s
    s.close()


def _workspace(root: Path, server: MockServer, budget: float | None = None, suites=("oracle-private",)):
    env = lay_out_inputs(SYNTHETIC / "inputs", root, server.base_url) / "prod_env"
    (env / "credentials.conf").write_text('mockaiApiKey: "sk-mock-not-a-secret"\n')
    (env / "medhelm_deployments.yaml").write_text(SETTINGS)
    ws = Workspace(root / "out", env, num_threads=8,
                   controls=RunControls(budget=Budget(budget) if budget is not None else None))
    selection = RunSelection(conf_paths=[str(root / "work" / "conf" / "private.conf")], suite="oracle-private",
                             max_eval_instances=50)
    with_entries = entries.expand_selection(ws, selection)
    runs = [r for name in suites for r in entries.register_runs(ws, name, with_entries)]
    for keys in entries.scenario_partitions(with_entries, ws.catalog).values():
        for key in keys:
            datasets.build_dataset(ws, key)
    log, lock, flights = [], threading.Lock(), {}
    for name in ("mockai/mock-gpt-a", "mockai/mock-gpt-b", "mockai/mock-judge"):
        ws._clients[name] = Recorder(ws.client(name), name, log, lock, flights)
    return ws, runs, log, flights


def test_runs_overlap_share_each_deployments_limit_and_give_helms_results(tmp_path, server, monkeypatch):
    monkeypatch.chdir(tmp_path)  # the conf's data paths are relative to the work folder's parent
    ws, runs, log, flights = _workspace(tmp_path, server)
    outcomes = list(suite.run_suite(ws, runs))
    assert [o.error for o in outcomes] == [None] * 6 and {o.run for o in outcomes} == set(runs)

    # Every deployment was kept at its limit, never above it, by the runs together.
    assert {name: peak for name, (_, peak) in flights.items()} == {
        "mockai/mock-gpt-a": LIMIT, "mockai/mock-gpt-b": LIMIT, "mockai/mock-judge": LIMIT}
    # The runs overlapped: both models were answering at once, and judges started while model calls
    # were still being made (the jury is pipelined per instance, not after the suite or the run).
    spans = {}
    for name, start, end, _ in log:
        lo, hi = spans.get(name, (start, end))
        spans[name] = (min(lo, start), max(hi, end))
    a, b, judge = spans["mockai/mock-gpt-a"], spans["mockai/mock-gpt-b"], spans["mockai/mock-judge"]
    assert max(a[0], b[0]) < min(a[1], b[1])
    assert judge[0] < max(a[1], b[1]) - 0.5
    # Each request was asked once, and the numbers and files are HELM's, whatever the order.
    assert len({(name, p) for name, *_, p in log}) == len(log)
    assert assert_runs_equal_gold(tmp_path / "out", "oracle-private", "oracle-private") == 300
    cost = sum(o.cost_usd for o in outcomes)
    assert suite.summary_line(outcomes) == f"6 runs: 0 reused, {len(log)} new calls, ${cost:,.2f}"

    # Nothing new: every run is reused from its fingerprint, without a call or a rewrite.
    before = {p: p.stat().st_mtime_ns for p in (tmp_path / "out" / "runs").rglob("*.json")}
    log.clear()
    again = list(suite.run_suite(ws, runs))
    assert all(o.reused for o in again) and log == []
    assert suite.summary_line(again) == "6 runs: 6 reused, 0 new calls, $0.00"
    assert {p: p.stat().st_mtime_ns for p in (tmp_path / "out" / "runs").rglob("*.json")} == before

    # A run whose files are gone is redone, from the stored answers; the others stay reused.
    victim = runs[0]
    (run_dir(tmp_path / "out", victim.suite, victim.run_name) / "stats.json").unlink()
    third = {o.run: o for o in suite.run_suite(ws, runs)}
    assert [r for r, o in third.items() if not o.reused] == [victim]
    assert third[victim].new_calls == 0 and log == []
    assert assert_runs_equal_gold(tmp_path / "out", "oracle-private", "oracle-private") == 300


def test_budget_stops_the_concurrent_runs_and_a_rerun_resumes(tmp_path, server, monkeypatch):
    monkeypatch.chdir(tmp_path)
    ws, runs, log, _ = _workspace(tmp_path, server, budget=0.002)
    outcomes = list(suite.run_suite(ws, runs))
    stopped = [o for o in outcomes if not o.ok]
    assert stopped and ws.controls.budget.spent <= 0.002 + 1e-12
    paid = len(log)
    assert paid == ws.controls.budget.paid_calls > 0

    # Resume with no budget: nothing paid is asked again, and the result is HELM's.
    ws.controls = RunControls()
    log.clear()
    assert all(o.ok for o in suite.run_suite(ws, runs))
    assert len({(name, p) for name, *_, p in log}) == len(log)
    assert assert_runs_equal_gold(tmp_path / "out", "oracle-private", "oracle-private") == 300
    with ws.store.connect() as conn:
        total = conn.execute("SELECT count(*) FROM completions").fetchone()[0]
    assert total == paid + len(log)


def test_runs_asking_the_same_requests_at_once_ask_each_once(tmp_path, server, monkeypatch):
    """Two suites of the same entries run together: their runs claim the same requests. Each is
    asked once, and neither run waits forever on the other's claims (each commits what it holds
    before waiting on another claimant)."""
    monkeypatch.chdir(tmp_path)
    ws, runs, log, _ = _workspace(tmp_path, server, suites=("first", "second"))
    outcomes = list(suite.run_suite(ws, runs))
    assert len(outcomes) == 12 and all(o.ok for o in outcomes)
    assert len({(name, p) for name, *_, p in log}) == len(log)
    assert sum(o.new_calls for o in outcomes) == len(log)
    for name in ("first", "second"):
        assert assert_runs_equal_gold(tmp_path / "out", name, "oracle-private") == 300


def test_schedule_puts_the_judges_work_first_and_takes_deployments_in_turn():
    """Runs with a jury first (each deployment's before its runs without), then the judges' own
    models' runs, interleaved by deployment; the other runs after. With two judges j1, j2."""
    R = suite.RunRef
    facts = {
        R("s", "a-jury-1"): ("a", ("j1", "j2")), R("s", "a-jury-2"): ("a", ("j1", "j2")),
        R("s", "a-plain-1"): ("a", ()), R("s", "a-plain-2"): ("a", ()),
        R("s", "b-jury"): ("b", ("j1",)), R("s", "b-plain"): ("b", ()),
        R("s", "j1-plain-1"): ("j1", ()), R("s", "j1-plain-2"): ("j1", ()), R("s", "j1-jury"): ("j1", ("j2",)),
        R("s", "c-plain"): ("c", ()),
    }
    runs = list(facts)
    order = [r.run_name for r in suite.schedule(runs, facts)]
    assert order == ["a-jury-1", "b-jury", "j1-jury",         # first group: a, b, j1 in turn, juries first
                     "a-jury-2", "j1-plain-1",
                     "j1-plain-2",
                     "a-plain-1", "b-plain", "c-plain",        # then the rest, in turn
                     "a-plain-2"]
    assert sorted(order) == sorted(r.run_name for r in runs)
