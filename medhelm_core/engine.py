"""The completion engine: runs model and judge requests that were never paid for, and only those.

* Content-addressed: requests are keyed by `store.request_key` (sha256 of deployment + request);
  whatever `completions` holds is reused as is, and duplicates within a batch are asked once.
* Crash-safe: the worker that receives an answer writes it to the answer journal (`journal.py`)
  before anything else, so it survives a kill -9 from that instant; answers are then committed to
  DuckDB in one transaction per batch (what arrived within `commit_interval_s`, 0.5 s; at most
  `flush_every`), under the store's file lock, with `INSERT OR IGNORE` on the primary key. A kill
  -9 at any moment loses only the requests in flight; the next process replays the journal, asks
  only for the rest, and no row is ever duplicated.
* One asker per request across processes: before sending, a process claims its requests in
  `completion_claims` (same transaction discipline). Another process running at the same time
  skips requests claimed by a live owner and waits for their answers to land in `completions`;
  claims of a dead owner (its pid is gone, or its heartbeat is older than `lease_s`) are taken over.
* Per-deployment lanes: each deployment gets `max_concurrency` worker threads, admitted by its
  `ratelimit.EndpointLimiter` (adaptive in-flight limit, RPM/TPM buckets, Retry-After and
  rate-limit-header pauses). A transient failure (429, 5xx, timeout, connection) is put back with
  a back-off (the server's Retry-After, or exponential with jitter) while the worker moves on to
  the next request; after `max_attempts` it is recorded in `completion_errors` (never stored as a
  completion, so the rerun asks again). Content-filter blocks are HELM's non-fatal empty completion
  and are stored with `outcome = 'content_filter'`. A 401/403/404 stops the deployment's lane: every
  request still queued for it is recorded as failed without being sent.
* Money: the usage the API reports is stored with each completion together with its cost; with a
  `costs.Budget`, a request is sent only when its worst case fits (see `costs.Budget`); requests
  not sent are reported as `skipped` and the caller raises `BudgetExhausted`.
"""
from __future__ import annotations

import heapq
import itertools
import json
import queue
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Callable, Protocol

from medhelm_core import journal, owners, ratelimit
from medhelm_core.clients.base import Attempt, RequestFailed
from medhelm_core.costs import record_prices
from medhelm_core.ratelimit import (CONTENT_FILTER, FATAL, FATAL_ENDPOINT, OK, TRANSIENT, DeploymentSettings,
                                    backoff_delay, limiter_for)
from medhelm_core.errors import MedhelmError
from medhelm_core.store import Store, insert_answers, insert_values, replay_answers


class Client(Protocol):
    def attempt(self, request: dict) -> Attempt: ...


@dataclass(frozen=True)
class Job:
    key: str
    deployment: str
    request: dict


@dataclass
class EngineReport:
    reused: int = 0          # already in `completions` (including ones another process just paid for)
    new: int = 0             # paid now
    failed: int = 0          # retries exhausted or fatal: in `completion_errors`
    skipped: int = 0         # not sent: the budget would have been exceeded
    retries: int = 0
    content_filtered: int = 0
    waited: int = 0          # answered by another process that had claimed them
    errors: dict[str, str] = field(default_factory=dict)  # request_key -> error
    seconds: float = 0.0
    cost_usd: float = 0.0    # of the new completions (priced deployments)
    prompt_tokens: int = 0
    completion_tokens: int = 0
    attempts_by_kind: dict[str, int] = field(default_factory=dict)
    concurrency: dict[str, int] = field(default_factory=dict)  # deployment -> in-flight limit at the end
    budget_stopped: bool = False

    @property
    def total(self) -> int:
        return self.reused + self.new + self.failed + self.skipped

    @property
    def throughput(self) -> float:
        """New completions per second of wall time."""
        return self.new / self.seconds if self.seconds > 0 else 0.0


@dataclass
class ProgressHandle:
    """What the engine tells a progress display; `update` is called from the engine's thread."""

    update: Callable[[int, dict], None]  # (completed since last call, postfix fields)
    close: Callable[[], None] = lambda: None


ProgressFactory = Callable[[str, int, int], ProgressHandle]  # (label, to do, reused) -> handle


@dataclass
class RunControls:
    """What one invocation shares across every engine it runs: its budget (spent across runs) and
    its progress display. The command line makes one and hands it to the Dagster materializations
    it launches as the `run_controls` resource; the Workspace passes it to each engine."""

    budget: Any = None  # costs.Budget
    progress_factory: ProgressFactory | None = None


@dataclass
class _Item:
    job: Job
    attempt: int = 1
    reserved: float = 0.0
    tokens: float = 0.0


class _Lane:
    """The queue of one deployment: fresh jobs, plus jobs waiting out a back-off."""

    def __init__(self, name: str, jobs: list[Job], stop: threading.Event):
        self.name = name
        self.ready: deque[_Item] = deque(_Item(j) for j in jobs)
        self.delayed: list[tuple[float, int, _Item]] = []
        self.unfinished = len(jobs)
        self.cond = threading.Condition()
        self.stop = stop
        self.dead: str | None = None  # set by a fatal_endpoint outcome
        self._seq = itertools.count()

    def next(self) -> _Item | None:
        with self.cond:
            while True:
                if self.stop.is_set() or self.unfinished == 0:
                    return None
                now = time.monotonic()
                if self.delayed and self.delayed[0][0] <= now:
                    return heapq.heappop(self.delayed)[2]
                if self.ready:
                    return self.ready.popleft()
                wait = self.delayed[0][0] - now if self.delayed else 0.5
                self.cond.wait(min(wait, 0.5))

    def later(self, item: _Item, delay: float) -> None:
        with self.cond:
            heapq.heappush(self.delayed, (time.monotonic() + delay, next(self._seq), item))
            self.cond.notify()

    def finish(self) -> None:
        with self.cond:
            self.unfinished -= 1
            self.cond.notify_all()


class CompletionEngine:
    def __init__(self, store: Store, client_for: Callable[[str], Any], num_threads: int = 8,
                 flush_every: int = 256, flush_seconds: float = 2.0,
                 progress: Callable[[int, int], None] | None = None,
                 settings_for: Callable[[str], DeploymentSettings] | None = None,
                 tokens_for: Callable[[str], Callable[[str], int]] | None = None,
                 budget=None, progress_factory: ProgressFactory | None = None, label: str = "",
                 lease_s: float = 120.0, poll_s: float = 0.25, commit_interval_s: float = 0.5):
        self.store = store
        self.client_for = client_for
        self.num_threads = max(1, num_threads)
        self.flush_every = max(1, flush_every)
        self.flush_seconds = flush_seconds
        self.progress = progress
        self.settings_for = settings_for or (lambda name: DeploymentSettings())
        self.tokens_for = tokens_for or (lambda name: (lambda text: max(1, len(text) // 4)))
        self.budget = budget
        self.progress_factory = progress_factory
        self.label = label
        self.lease_s = lease_s
        self.poll_s = poll_s
        self.commit_interval_s = commit_interval_s
        self.owner = owners.new_owner_id()
        self._holding: set[str] = set()  # keys claimed and not yet committed (answer or error)

    # -- storage --------------------------------------------------------------------------
    def existing(self, keys: list[str]) -> dict[str, dict]:
        if not keys:
            return {}
        with self.store.connect() as conn:
            rows = conn.execute(
                "SELECT request_key, result FROM completions WHERE request_key IN (SELECT unnest(?::VARCHAR[]))",
                [keys]).fetchall()
        return {k: json.loads(r) for k, r in rows}

    def _claim(self, keys: list[str], prices: dict | None = None) -> tuple[set[str], set[str]]:
        """Claim the keys nobody alive is asking; returns (mine, claimed by others). Also records
        the prices in use (`deployment_prices`), in the same transaction."""
        if not keys:
            return set(), set()
        recovered: list = []
        with self.store.transaction() as conn:
            if prices:
                record_prices(conn, prices)
            held = conn.execute(
                "SELECT DISTINCT owner, max(heartbeat) FROM completion_claims"
                " WHERE request_key IN (SELECT unnest(?::VARCHAR[])) AND owner <> ? GROUP BY owner",
                [keys, self.owner]).fetchall()
            dead = [o for o, hb in held if not owners.owner_alive(o, hb or 0.0, self.lease_s)]
            if dead:  # take over: first fold in what they journaled, then drop their claims
                recovered = replay_answers(conn, self.store.path, dead=set(dead).__contains__)
                conn.execute("DELETE FROM completion_claims WHERE owner IN (SELECT unnest(?::VARCHAR[]))", [dead])
            conn.execute(
                "INSERT OR IGNORE INTO completion_claims (request_key, owner, heartbeat)"
                " SELECT k, ?, ? FROM (SELECT DISTINCT unnest(?::VARCHAR[]) AS k)"
                " WHERE k NOT IN (SELECT request_key FROM completions)",
                [self.owner, time.time(), keys])
            rows = conn.execute("SELECT request_key, owner FROM completion_claims"
                                " WHERE request_key IN (SELECT unnest(?::VARCHAR[]))", [keys]).fetchall()
        journal.remove(recovered)
        mine = {k for k, o in rows if o == self.owner}
        self._holding |= mine
        return mine, {k for k, o in rows if o != self.owner}

    def _release_claims(self) -> None:
        if not self._holding:
            return  # every claim was settled by the commits
        self._holding.clear()
        with self.store.transaction() as conn:
            conn.execute("DELETE FROM completion_claims WHERE owner = ?", [self.owner])

    # -- run ------------------------------------------------------------------------------
    def run(self, jobs: list[Job]) -> tuple[dict[str, dict], EngineReport]:
        start = time.time()
        unique: dict[str, Job] = {}
        for job in jobs:
            unique.setdefault(job.key, job)
        self.store.recover_answers()  # answers an ended engine journaled but never committed
        results = self.existing(list(unique))
        report = EngineReport(reused=len(results))
        todo = {k: j for k, j in unique.items() if k not in results}
        if not todo:
            report.seconds = time.time() - start
            return results, report

        # Fail fast on configuration problems (unknown deployment, missing key or price) before any call.
        names = sorted({j.deployment for j in todo.values()})
        clients = {d: self.client_for(d) for d in names}
        settings = {d: self.settings_for(d) for d in names}
        if self.budget is not None:
            unpriced = [d for d in names if not settings[d].priced]
            if unpriced:
                raise MedhelmError(f"--budget needs a price for deployment {unpriced[0]!r}: set input_per_million "
                                   f"and output_per_million in the deployments settings (conf/deployments.yaml or "
                                   f"<local-path>/medhelm_deployments.yaml)")
        bar = self.progress_factory(self.label, len(todo), report.reused) if self.progress_factory else None
        owners.register(self.owner)
        try:
            remaining = dict(todo)
            first = first_claim = True
            while remaining:
                found = {} if first else self.existing(list(remaining))
                first = False
                for k, r in found.items():
                    results[k] = r
                    report.reused += 1
                    report.waited += 1
                    remaining.pop(k)
                if found and bar:
                    bar.update(len(found), {})
                if not remaining:
                    break
                mine, _theirs = self._claim(list(remaining), prices=settings if first_claim else None)
                first_claim = False
                if not mine:
                    # Another live process is asking these (or just answered them): wait for its answers.
                    time.sleep(self.poll_s)
                    continue
                self._process([remaining.pop(k) for k in list(remaining) if k in mine], clients,
                              settings, results, report, bar)
                if report.budget_stopped:
                    report.skipped += len(remaining)
                    break
        finally:
            self._release_claims()
            owners.unregister(self.owner)
            if bar:
                bar.close()
        report.concurrency = {d: limiter_for(d, settings[d], self.num_threads).current_limit for d in names}
        report.seconds = time.time() - start
        return results, report

    def _process(self, jobs: list[Job], clients: dict, settings: dict[str, DeploymentSettings],
                 results: dict, report: EngineReport, bar: ProgressHandle | None) -> None:
        stop = threading.Event()
        out: queue.Queue = queue.Queue()
        stats_lock = threading.Lock()
        by_dep: dict[str, list[Job]] = {}
        for job in jobs:
            by_dep.setdefault(job.deployment, []).append(job)
        answers = journal.Journal(self.store.path, self.owner)
        threads = []
        for dep, dep_jobs in by_dep.items():
            lane = _Lane(dep, dep_jobs, stop)
            limiter = limiter_for(dep, settings[dep], self.num_threads)
            for i in range(min(len(dep_jobs), limiter.max_limit)):
                t = threading.Thread(target=self._worker, name=f"medhelm-{dep}-{i}", daemon=True,
                                     args=(lane, clients[dep], settings[dep], limiter, out, stop, report, stats_lock,
                                           answers))
                t.start()
                threads.append(t)

        failures: list[tuple] = []
        failed_keys: list[str] = []
        last_flush = last_beat = time.monotonic()
        flush_cost = 0.0
        outstanding = len(jobs)
        crash: BaseException | None = None

        def handle(msg: tuple) -> None:
            nonlocal outstanding
            what, job = msg[0], msg[1]
            outstanding -= 1
            if what == "done":
                att: Attempt = msg[2]
                results[job.key] = att.result
                report.new += 1
                report.content_filtered += att.kind == CONTENT_FILTER
                report.cost_usd += msg[4] or 0.0
                report.prompt_tokens += att.prompt_tokens or 0
                report.completion_tokens += att.completion_tokens or 0
            elif what == "failed":
                att = msg[2]
                report.failed += 1
                report.errors[job.key] = att.message or "failed"
                failures.append((job.key, job.deployment, att.message, msg[3], att.kind))
                failed_keys.append(job.key)
            elif what == "skipped":
                report.skipped += 1
                report.budget_stopped = True
            if self.progress:
                self.progress(len(jobs) - outstanding, len(jobs))
            if bar:
                bar.update(1, {"usd": f"{report.cost_usd:.4f}", "failed": report.failed, "retries": report.retries})

        def flush() -> None:
            """Commit the journal's closed segment and the failures in one transaction."""
            nonlocal last_flush, flush_cost, last_beat
            last_flush = time.monotonic()
            segment = answers.rotate()
            if segment is None and not failures:
                return
            rows = [tuple(r) for r in segment.rows] if segment else []
            settled = (segment.keys if segment else []) + failed_keys
            with self.store.transaction() as conn:
                self._commit_batch(conn, rows, failures, settled)
            if segment:
                journal.remove([segment.path])
            last_beat = time.monotonic()
            self._holding.difference_update(settled)
            failures.clear()
            failed_keys.clear()
            flush_cost = time.monotonic() - last_flush

        try:
            try:
                while outstanding > 0:
                    try:
                        msg = out.get(timeout=0.2)
                    except queue.Empty:
                        msg = None
                        if not any(t.is_alive() for t in threads) and out.empty():
                            break  # every worker ended and nothing is left to collect
                    if msg is not None:
                        if msg[0] == "crash":
                            crash = msg[2]
                            break
                        handle(msg)
                    now = time.monotonic()
                    # Commit to DuckDB when nothing else is waiting to be collected, at most every
                    # `commit_interval_s` (a commit opens the DuckDB file: 40-100 ms of CPU on a big file,
                    # so answers are batched over the interval, which stretches to 8x the last commit's
                    # duration, at most `flush_seconds`), and at once at `flush_every` uncommitted. The
                    # journal already holds every answer, so the interval costs nothing on a crash.
                    waited = now - last_flush
                    interval = min(max(self.commit_interval_s, 8 * flush_cost), self.flush_seconds)
                    uncommitted = answers.pending + len(failures)
                    if uncommitted and ((out.empty() and waited >= interval) or uncommitted >= self.flush_every):
                        flush()
                    if now - last_beat >= min(30.0, self.lease_s / 4):
                        last_beat = now
                        with self.store.transaction() as conn:
                            conn.execute("UPDATE completion_claims SET heartbeat = ? WHERE owner = ?",
                                         [time.time(), self.owner])
            except BaseException as e:  # noqa: BLE001 - e.g. KeyboardInterrupt: keep what arrived, then re-raise
                crash = e
            finally:
                stop.set()
                if crash is not None:  # give in-flight answers a moment to land: keep what was paid for
                    deadline = time.monotonic() + 2.0
                    while any(t.is_alive() for t in threads) and time.monotonic() < deadline:
                        time.sleep(0.05)
                while True:
                    try:
                        msg = out.get_nowait()
                    except queue.Empty:
                        break
                    if msg[0] in ("done", "failed"):
                        handle(msg)
                flush()
        finally:
            answers.close()  # whatever a failed commit left in it is replayed by the next process
        if crash is not None:
            raise crash

    def _commit_batch(self, conn, rows: list[tuple], failures: list[tuple], settled: list[str]) -> None:
        """One batch, inside the caller's transaction: answers, failures, and the claims they settle."""
        insert_answers(conn, rows)
        insert_values(conn, "completion_errors", ["request_key", "model_deployment", "error", "attempts", "kind"],
                failures)
        conn.execute("DELETE FROM completion_claims WHERE owner = ? AND request_key IN"
                     " (SELECT unnest(?::VARCHAR[]))", [self.owner, settled])
        conn.execute("UPDATE completion_claims SET heartbeat = ? WHERE owner = ?", [time.time(), self.owner])

    def _worker(self, lane: _Lane, client, settings: DeploymentSettings, limiter: ratelimit.EndpointLimiter,
                out: queue.Queue, stop: threading.Event, report: EngineReport, stats_lock: threading.Lock,
                answers: journal.Journal) -> None:
        count_tokens = None
        try:
            while True:
                item = lane.next()
                if item is None:
                    return
                job = item.job
                if lane.dead is not None:
                    out.put(("failed", job, Attempt(FATAL_ENDPOINT, message=lane.dead), 0))
                    lane.finish()
                    continue
                if item.attempt == 1 and (self.budget is not None or limiter.tpm is not None):
                    if count_tokens is None:
                        count_tokens = self.tokens_for(job.deployment)
                    req = job.request
                    out_tokens = (req.get("max_tokens") or 0) * max(1, req.get("num_completions") or 1)
                    prompt_tokens = count_tokens(req.get("prompt") or "")
                    item.tokens = float(prompt_tokens + out_tokens)
                    if self.budget is not None:
                        item.reserved = settings.cost(prompt_tokens, out_tokens) or 0.0
                        if not self.budget.reserve(item.reserved):
                            item.reserved = 0.0
                            out.put(("skipped", job))
                            lane.finish()
                            continue
                lease = limiter.acquire(item.tokens, stop)
                if lease is None:
                    return  # stopping
                try:
                    att = _attempt(client, job.request)
                except BaseException:
                    limiter.release(lease, FATAL)
                    raise
                used = None
                if att.prompt_tokens is not None and att.completion_tokens is not None:
                    used = att.prompt_tokens + att.completion_tokens
                limiter.release(lease, att.kind, att.retry_after_s, att.headers, used)
                with stats_lock:
                    report.attempts_by_kind[att.kind] = report.attempts_by_kind.get(att.kind, 0) + 1
                if att.kind in (OK, CONTENT_FILTER):
                    cost = settings.cost(att.prompt_tokens, att.completion_tokens)
                    answers.append(_completion_row(job, att, item.attempt, cost))  # durable from here on
                    if self.budget is not None:
                        self.budget.settle(item.reserved, cost, paid=True)
                    out.put(("done", job, att, item.attempt, cost))
                    lane.finish()
                elif att.kind in TRANSIENT and item.attempt < settings.max_attempts:
                    with stats_lock:
                        report.retries += 1
                    delay = backoff_delay(settings, item.attempt, att.retry_after_s)
                    item.attempt += 1
                    lane.later(item, delay)
                else:
                    if self.budget is not None:
                        self.budget.settle(item.reserved, 0.0, paid=False)
                    if att.kind in TRANSIENT:
                        att.message = f"{att.message} (after {item.attempt} attempts)"
                    if att.kind == FATAL_ENDPOINT:
                        lane.dead = f"{att.message} (not sent: an earlier request to {job.deployment} got this)"
                    out.put(("failed", job, att, item.attempt))
                    lane.finish()
        except BaseException as e:  # noqa: BLE001 - hand it to the engine's thread
            out.put(("crash", None, e))


def _completion_row(job: Job, att: Attempt, attempts: int, cost: float | None) -> list:
    """The `completions` row of an answer, in `COMPLETION_COLUMNS` order."""
    return [job.key, job.deployment, job.request["model"], json.dumps(job.request, ensure_ascii=False),
            json.dumps(att.result, ensure_ascii=False), bool(att.result["success"]), attempts,
            att.prompt_tokens, att.completion_tokens, json.dumps(att.usage) if att.usage is not None else None,
            cost, att.kind]


def _attempt(client, request: dict) -> Attempt:
    """One attempt through `client.attempt`, or through a plain `complete()` (no engine-side retries)."""
    if hasattr(client, "attempt"):
        return client.attempt(request)
    try:
        result = dict(client.complete(request))
    except RequestFailed as e:
        return Attempt(FATAL, message=str(e))
    result.pop("_attempts", None)
    return Attempt(OK if result.get("success", True) else CONTENT_FILTER, result=result)
