"""The completion engine: runs model and judge requests that were never paid for, and only those.

* Content-addressed: requests are keyed by `store.request_key` (sha256 of deployment + request);
  whatever `completions` holds is reused as is, and duplicates within a batch are asked once.
* Crash-safe: the worker that receives an answer writes it to the answer journal (`journal.py`)
  before anything else, so it survives a kill -9 from that instant; answers are then committed to
  DuckDB in one transaction per batch (what arrived within `commit_interval_s`, 0.5 s; at most
  `flush_every`), in the store's write turn, an answer already stored being kept. A kill
  -9 at any moment loses only the requests in flight; the next process replays the journal, asks
  only for the rest, and no row is ever duplicated.
* One asker per request across processes: before sending, a process claims its requests (`claims`:
  the store's `completion_claims`, or a table in a DuckLake's PostgreSQL). Another process running
  at the same time skips requests claimed by a live owner and waits for their answers to land in
  `completions`; claims of a dead owner (its pid is gone, or its heartbeat is older than `lease_s`)
  are taken over.
* Per-deployment lanes: each deployment gets `max_concurrency` worker threads, admitted by its
  `ratelimit.EndpointLimiter` (adaptive in-flight limit, RPM/TPM buckets, Retry-After and
  rate-limit-header pauses); a request in flight also holds one of the deployment's
  `max_concurrency` slots shared by every process of the store (`slots`). A transient failure
  (429, 5xx, timeout, connection) is put back with a back-off (the server's Retry-After, or
  exponential with jitter) while the worker moves on to
  the next request; after `max_attempts` it is recorded in `completion_errors` (never stored as a
  completion, so the rerun asks again). Content-filter blocks are HELM's non-fatal empty completion
  and are stored with `outcome = 'content_filter'`. A 401/403/404 stops the deployment's lane: every
  request still queued for it is recorded as failed without being sent.
* Money: the usage the API reports is stored with each completion together with its cost; with a
  `costs.Budget`, a request is sent only when its worst case fits (see `costs.Budget`); requests
  not sent are reported as `skipped` and the caller raises `BudgetExhausted`.
"""
from __future__ import annotations

import contextvars
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
from medhelm_core.costs import prices_recorded, prices_to_record, record_prices
from medhelm_core.ratelimit import (CONTENT_FILTER, FATAL, FATAL_ENDPOINT, OK, TRANSIENT, DeploymentSettings,
                                    backoff_delay, limiter_for)
from medhelm_core.errors import MedhelmError
from medhelm_core.store import Store, insert_answers, insert_values


class Client(Protocol):
    def attempt(self, request: dict) -> Attempt: ...


@dataclass(frozen=True)
class Job:
    key: str
    deployment: str
    request: dict
    stage: str = "model"  # what the report counts it as: "model" or "judge"


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
    stages: dict[str, "EngineReport"] = field(default_factory=dict)  # Job.stage -> its counts

    def stage(self, name: str) -> "EngineReport":
        return self.stages.setdefault(name, EngineReport())

    def absorb(self, other: "EngineReport") -> None:
        """Add another call's counts to this report (a stage asked in two calls)."""
        for name in ("reused", "new", "failed", "skipped", "retries", "content_filtered", "waited", "seconds",
                     "cost_usd", "prompt_tokens", "completion_tokens"):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        self.errors.update(other.errors)
        for kind, n in other.attempts_by_kind.items():
            self.attempts_by_kind[kind] = self.attempts_by_kind.get(kind, 0) + n
        self.concurrency.update(other.concurrency)
        self.budget_stopped = self.budget_stopped or other.budget_stopped

    @property
    def total(self) -> int:
        return self.reused + self.new + self.failed + self.skipped

    @property
    def throughput(self) -> float:
        """New completions per second of wall time."""
        return self.new / self.seconds if self.seconds > 0 else 0.0


FollowUp = Callable[[Job, dict], list[Job]]  # (answered job, its result) -> jobs that can start now


@dataclass
class RunControls:
    """What one invocation shares across every engine it runs: its budget (spent across runs) and
    its progress display. The command line makes one and hands it to the Dagster materializations
    it launches as the `run_controls` resource; the Workspace passes it to each engine."""

    budget: Any = None  # costs.Budget
    board: Any = None  # progress.ProgressBoard: the invocation's progress display, per deployment
    parallel_runs: int | None = None  # runs at once (None: two per deployment the suite uses)
    on_outcome: Callable[[Any], None] | None = None  # told each run's outcome (run.suite.RunOutcome) as it ends
    started: Any = None  # run.suite.SuiteExecution begun before the Dagster run that records it (its step takes it)
    expanded: Any = None  # (selection config, run entries) the command expanded: its register_suite takes them


@dataclass
class _Item:
    job: Job
    attempt: int = 1
    reserved: float = 0.0
    tokens: float = 0.0


class _Lane:
    """The queue of one deployment within one engine call: fresh jobs, plus jobs waiting out a
    back-off. Its workers end when it runs dry and are started again when jobs arrive."""

    def __init__(self, name: str, limiter: ratelimit.EndpointLimiter, stop: threading.Event,
                 start_worker: Callable[["_Lane"], None]):
        self.name = name
        self.limiter = limiter  # the deployment's process-wide admission (shared with every other call)
        self.ready: deque[_Item] = deque()
        self.delayed: list[tuple[float, int, _Item]] = []
        self.unfinished = 0
        self.workers = 0
        self.max_workers = limiter.max_limit
        self.cond = threading.Condition()
        self.stop = stop
        self.dead: str | None = None  # set by a fatal_endpoint outcome
        self._seq = itertools.count()
        self._start_worker = start_worker
        self.threads: list[threading.Thread] = []

    def add(self, item: _Item) -> None:
        with self.cond:
            self.ready.append(item)
            self.unfinished += 1
            start = self.workers < min(self.unfinished, self.max_workers)
            if start:
                self.workers += 1
            self.cond.notify()
        if start:
            self._start_worker(self)

    def next(self) -> _Item | None:
        with self.cond:
            while True:
                if self.stop.is_set() or self.unfinished == 0:
                    self.workers -= 1
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
                 budget=None, board=None, priority: float = 0.0,
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
        self.board = board
        self.priority = priority  # lower first, when its requests wait for a deployment's slot
        self.lease_s = lease_s
        self.poll_s = poll_s
        self.commit_interval_s = commit_interval_s

    # -- storage --------------------------------------------------------------------------
    def existing(self, keys: list[str]) -> dict[str, dict]:
        if not keys:
            return {}
        with self.store.connect() as conn:
            rows = conn.execute(
                "SELECT request_key, result FROM completions WHERE request_key IN (SELECT unnest(?::VARCHAR[]))",
                [keys]).fetchall()
        return {k: json.loads(r) for k, r in rows}

    # -- run ------------------------------------------------------------------------------
    def run(self, jobs: list[Job], follow_up: FollowUp | None = None) -> tuple[dict[str, dict], EngineReport]:
        """Answer `jobs` (stored answers reused, the rest asked once). `follow_up(job, result)` is
        called, in this thread, with each answer as it arrives (stored ones too); the jobs it
        returns join the same call (a judge call as soon as its model answer is in). The report
        counts everything; `report.stages[stage]` counts the jobs of each `Job.stage`."""
        call = _Call(self, follow_up)
        try:
            call.add(jobs)
            call.loop()
        finally:
            call.close()
        return call.results, call.report

    def _commit_batch(self, conn, rows: list[tuple], failures: list[tuple]) -> None:
        """One batch, inside the caller's transaction: answers and failures (the store's claims
        settle theirs, `claims`)."""
        insert_answers(conn, rows)
        insert_values(conn, "completion_errors", ["request_key", "model_deployment", "error", "attempts", "kind"],
                failures)


class _Call:
    """One `CompletionEngine.run`: its jobs' lookups and claims, its lanes and workers, its journal
    and commits. Many calls run at once (one per run of a suite); each deployment's process-wide
    limiter (`ratelimit.limiter_for`) admits the workers of all of them, so a deployment's limits
    hold across the whole invocation and no call's work waits behind another call."""

    def __init__(self, engine: "CompletionEngine", follow_up: FollowUp | None):
        self.e = engine
        self.follow_up = follow_up
        self.results: dict[str, dict] = {}
        self.report = EngineReport()
        self.start = time.time()
        self.pending: dict[str, Job] = {}   # to look up, then claim
        self.waiting: dict[str, Job] = {}   # claimed by another live owner: poll for its answer
        self.known: set[str] = set()
        self.outstanding = 0                # sent to a lane, not yet collected
        self.lanes: dict[str, _Lane] = {}
        self.clients: dict[str, Any] = {}
        self.settings: dict[str, DeploymentSettings] = {}
        self.unrecorded_prices: dict[str, DeploymentSettings] = {}
        self.stop = threading.Event()
        self.out: queue.Queue = queue.Queue()
        self.stats_lock = threading.Lock()
        self.answers: journal.Journal | None = None
        self.failures: list[tuple] = []
        self.failed_keys: list[str] = []
        self.last_flush = self.last_beat = self.last_resolve = time.monotonic()
        self.flush_cost = 0.0
        # Each call is its own claimant (as two processes are), so concurrent calls never ask twice.
        self.owner = owners.new_owner_id()
        self.holding: set[str] = set()  # keys claimed and not yet committed (answer or error)
        self.registered = False
        engine.store.recover_answers()  # answers an ended engine journaled but never committed

    def add(self, jobs: list[Job]) -> None:
        for job in jobs:
            if job.key not in self.known:
                self.known.add(job.key)
                self.pending[job.key] = job

    def _counts(self, job: Job) -> tuple[EngineReport, EngineReport]:
        return self.report, self.report.stage(job.stage)

    def _answered(self, job: Job, result: dict) -> None:
        self.results[job.key] = result
        if self.follow_up is not None:
            self.add(self.follow_up(job, result))

    # -- lookups and claims -------------------------------------------------------------------
    def _configure(self, deployments: set[str]) -> None:
        """Clients and settings of deployments new to this call; fail on a missing key or price
        before anything is claimed for them."""
        new = sorted(d for d in deployments if d not in self.clients)
        for d in new:
            self.settings[d] = self.e.settings_for(d)
        if self.e.budget is not None:
            unpriced = [d for d in new if not self.settings[d].priced]
            if unpriced:
                raise MedhelmError(f"--budget needs a price for deployment {unpriced[0]!r}: set input_per_million "
                                   f"and output_per_million in the deployments settings (conf/deployments.yaml or "
                                   f"<local-path>/medhelm_deployments.yaml)")
        for d in new:
            self.clients[d] = self.e.client_for(d)
            self.unrecorded_prices[d] = self.settings[d]

    def resolve(self) -> None:
        """Reuse what is stored, claim the rest, send what this call now owns."""
        jobs, was_waiting = {**self.waiting, **self.pending}, set(self.waiting)
        self.pending, self.waiting = {}, {}
        self.last_resolve = time.monotonic()
        if self.report.budget_stopped:  # no new request once the budget stopped one
            for job in jobs.values():
                for r in self._counts(job):
                    r.skipped += 1
            return
        found = self.e.existing(list(jobs))
        for key, result in found.items():
            job = jobs.pop(key)
            for r in self._counts(job):
                r.reused += 1
                r.waited += key in was_waiting
            if self.e.board is not None and key in was_waiting:
                self.e.board.finished(job.deployment, 0.0)
            self._answered(job, result)
        if not jobs:
            return
        self._configure({j.deployment for j in jobs.values()})
        prices, self.unrecorded_prices = self.unrecorded_prices, {}
        if not self.registered:  # alive before it claims anything (other calls of this process check)
            owners.register(self.owner)
            self.registered = True
        mine = self._claim(list(jobs), prices=prices or None)
        for key, job in jobs.items():
            if key in mine:
                self._send(job)
            else:  # another live process is asking it (or just answered it): wait for its answer
                self.waiting[key] = job

    def _send(self, job: Job) -> None:
        if self.answers is None:
            self.answers = journal.Journal(self.e.store.path, self.owner)
        lane = self.lanes.get(job.deployment)
        if lane is None:
            limiter = limiter_for(job.deployment, self.settings[job.deployment], self.e.num_threads)
            lane = self.lanes[job.deployment] = _Lane(job.deployment, limiter, self.stop, self._start_worker)
            if self.e.board is not None:
                self.e.board.lane(job.deployment, limiter)
        if self.e.board is not None:
            self.e.board.sent(job.deployment)
        self.outstanding += 1
        lane.add(_Item(job))

    def _start_worker(self, lane: _Lane) -> None:
        # In a copy of the caller's context: a client may read the run it works for (DSPy's run name).
        t = threading.Thread(target=contextvars.copy_context().run, name=f"medhelm-{lane.name}-{len(lane.threads)}",
                             daemon=True, args=(self._worker, lane))
        lane.threads.append(t)
        t.start()

    def _claim(self, keys: list[str], prices: dict | None = None) -> set[str]:
        """Claim the keys nobody alive is asking (`claims`); returns those now mine. Also records
        the prices in use (`deployment_prices`)."""
        if not keys:
            return set()
        prices = prices_to_record(self.e.store, prices) if prices else None
        also = (lambda conn: record_prices(conn, prices)) if prices else None
        mine = self.e.store.claims.claim(keys, self.owner, self.e.lease_s, also=also)
        if prices:
            prices_recorded(self.e.store, prices)
        self.holding |= mine
        return mine

    def _release_claims(self) -> None:
        if not self.holding:
            return  # every claim was settled by the commits
        self.holding.clear()
        self.e.store.claims.release(self.owner)

    # -- collecting and committing -----------------------------------------------------------
    def loop(self) -> None:
        crash: BaseException | None = None
        try:
            while True:
                now = time.monotonic()
                due = now - self.last_resolve >= max(self.e.commit_interval_s, self.e.poll_s)
                if self.pending and (self.outstanding == 0 or due or len(self.pending) >= self.e.flush_every):
                    self.resolve()
                    continue
                if self.waiting and (due or self.outstanding == 0):
                    # Commit what we hold before waiting on another claimant: it may be waiting on us.
                    self._maybe_flush(now_if_any=self.outstanding == 0)
                    if self.outstanding == 0 and not due:
                        time.sleep(self.e.poll_s)
                    self.resolve()
                    continue
                if self.outstanding == 0 and not self.pending and not self.waiting:
                    break
                try:
                    msg = self.out.get(timeout=0.2)
                except queue.Empty:
                    msg = None
                    if not self._workers_alive() and self.out.empty() and not self.pending and not self.waiting:
                        break  # every worker ended and nothing is left to collect
                if msg is not None:
                    if msg[0] == "crash":
                        crash = msg[2]
                        break
                    self._handle(msg)
                self._maybe_flush()
        except BaseException as e:  # noqa: BLE001 - e.g. KeyboardInterrupt: keep what arrived, then re-raise
            crash = e
        finally:
            self.stop.set()
            if crash is not None:  # give in-flight answers a moment to land: keep what was paid for
                deadline = time.monotonic() + 2.0
                while self._workers_alive() and time.monotonic() < deadline:
                    time.sleep(0.05)
            while True:
                try:
                    msg = self.out.get_nowait()
                except queue.Empty:
                    break
                if msg[0] in ("done", "failed"):
                    self._handle(msg, follow=False)
            if self.answers is not None:
                self._flush()
        if crash is not None:
            raise crash

    def _workers_alive(self) -> bool:
        return any(t.is_alive() for lane in self.lanes.values() for t in lane.threads)

    def _handle(self, msg: tuple, follow: bool = True) -> None:
        what, job = msg[0], msg[1]
        self.outstanding -= 1
        counts = self._counts(job)
        if what == "done":
            att: Attempt = msg[2]
            for r in counts:
                r.new += 1
                r.content_filtered += att.kind == CONTENT_FILTER
                r.cost_usd += msg[4] or 0.0
                r.prompt_tokens += att.prompt_tokens or 0
                r.completion_tokens += att.completion_tokens or 0
            if follow:
                self._answered(job, att.result)
            else:
                self.results[job.key] = att.result
        elif what == "failed":
            att = msg[2]
            for r in counts:
                r.failed += 1
                r.errors[job.key] = att.message or "failed"
            self.failures.append((job.key, job.deployment, att.message, msg[3], att.kind))
            self.failed_keys.append(job.key)
        elif what == "skipped":
            for r in counts:
                r.skipped += 1
                r.budget_stopped = True
        if self.e.progress:
            self.e.progress(len(self.results) + self.report.failed + self.report.skipped, len(self.known))
        if self.e.board is not None:
            self.e.board.finished(job.deployment, msg[4] if what == "done" else 0.0, failed=what != "done")

    def _maybe_flush(self, now_if_any: bool = False) -> None:
        # Commit to DuckDB when nothing else is waiting to be collected, at most every
        # `commit_interval_s` (a commit opens the DuckDB file: 40-100 ms of CPU on a big file, so
        # answers are batched over the interval, which stretches to 8x the last commit's duration,
        # at most `flush_seconds`), and at once at `flush_every` uncommitted. The journal already
        # holds every answer, so the interval costs nothing on a crash.
        now = time.monotonic()
        waited = now - self.last_flush
        interval = min(max(self.e.commit_interval_s, 8 * self.flush_cost), self.e.flush_seconds)
        uncommitted = (self.answers.pending if self.answers else 0) + len(self.failures)
        due = now_if_any or (self.out.empty() and waited >= interval) or uncommitted >= self.e.flush_every
        if uncommitted and due:
            self._flush()
        if self.answers is not None and now - self.last_beat >= min(30.0, self.e.lease_s / 4):
            self.last_beat = now
            self.e.store.claims.heartbeat(self.owner)

    def _flush(self) -> None:
        """Commit the journal's closed segment and the failures in one transaction."""
        self.last_flush = time.monotonic()
        segment = self.answers.rotate()
        if segment is None and not self.failures:
            return
        rows = [tuple(r) for r in segment.rows] if segment else []
        settled = (segment.keys if segment else []) + self.failed_keys
        failures = self.failures
        self.e.store.claims.commit(self.owner, settled, lambda conn: self.e._commit_batch(conn, rows, failures))
        if segment:
            journal.remove([segment.path])
        self.last_beat = time.monotonic()
        self.holding.difference_update(settled)
        self.failures.clear()
        self.failed_keys.clear()
        self.flush_cost = time.monotonic() - self.last_flush

    def close(self) -> None:
        if self.answers is not None:
            self.answers.close()  # whatever a failed commit left in it is replayed by the next process
        if self.registered:
            try:
                self._release_claims()
            finally:   # a failed release leaves claims for the lease to end, never a live-looking owner
                owners.unregister(self.owner)
        self.report.concurrency = {d: limiter_for(d, self.settings[d], self.e.num_threads).current_limit
                                   for d in self.settings}
        self.report.seconds = time.time() - self.start
        for r in self.report.stages.values():
            r.seconds = self.report.seconds

    # -- one worker of a lane ----------------------------------------------------------------
    def _worker(self, lane: _Lane) -> None:
        e, out, budget, limiter = self.e, self.out, self.e.budget, lane.limiter
        client, settings = self.clients[lane.name], self.settings[lane.name]
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
                if item.attempt == 1 and (budget is not None or limiter.tpm is not None):
                    if count_tokens is None:
                        count_tokens = e.tokens_for(job.deployment)
                    req = job.request
                    out_tokens = (req.get("max_tokens") or 0) * max(1, req.get("num_completions") or 1)
                    prompt_tokens = count_tokens(req.get("prompt") or "")
                    item.tokens = float(prompt_tokens + out_tokens)
                    if budget is not None:
                        item.reserved = settings.cost(prompt_tokens, out_tokens) or 0.0
                        if not budget.reserve(item.reserved):
                            item.reserved = 0.0
                            out.put(("skipped", job))
                            lane.finish()
                            continue
                lease = limiter.acquire(item.tokens, self.stop, e.priority)
                if lease is None:
                    return  # stopping
                slot = None
                if settings.max_concurrency:   # the deployment's cap holds across processes too
                    slot = e.store.slots.acquire(job.deployment, settings.max_concurrency, self.stop)
                    if slot is None:
                        limiter.cancel(lease)
                        return  # stopping
                try:
                    att = _attempt(client, job.request)
                except BaseException:
                    limiter.release(lease, FATAL)
                    raise
                finally:
                    if slot is not None:
                        e.store.slots.release(slot)
                used = None
                if att.prompt_tokens is not None and att.completion_tokens is not None:
                    used = att.prompt_tokens + att.completion_tokens
                limiter.release(lease, att.kind, att.retry_after_s, att.headers, used)
                with self.stats_lock:
                    for r in self._counts(job):
                        r.attempts_by_kind[att.kind] = r.attempts_by_kind.get(att.kind, 0) + 1
                if att.kind in (OK, CONTENT_FILTER):
                    cost = settings.cost(att.prompt_tokens, att.completion_tokens)
                    self.answers.append(_completion_row(job, att, item.attempt, cost))  # durable from here on
                    if budget is not None:
                        budget.settle(item.reserved, cost, paid=True)
                    out.put(("done", job, att, item.attempt, cost))
                    lane.finish()
                elif att.kind in TRANSIENT and item.attempt < settings.max_attempts:
                    with self.stats_lock:
                        for r in self._counts(job):
                            r.retries += 1
                    delay = backoff_delay(settings, item.attempt, att.retry_after_s)
                    item.attempt += 1
                    lane.later(item, delay)
                else:
                    if budget is not None:
                        budget.settle(item.reserved, 0.0, paid=False)
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
            cost, att.kind, json.dumps(att.untruncated, ensure_ascii=False) if att.untruncated else None,
            json.dumps(att.model_logprobs) if att.model_logprobs is not None else None]


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
