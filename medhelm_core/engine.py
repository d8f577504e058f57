"""The completion engine: runs model and judge requests that were never paid for, and only those.

Requests are content-addressed (`store.request_key`); whatever the `completions` table already
holds is reused as is. New answers are committed in small batches as they arrive, so a crash or
a kill at any moment loses at most the requests in flight, and a rerun asks only for the rest.
"""
from __future__ import annotations

import json
import threading
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from typing import Any, Callable, Protocol

from medhelm_core.clients import RequestFailed
from medhelm_core.store import Store, insert_rows


class Client(Protocol):
    def complete(self, request: dict, on_retry: Callable[[str], None] | None = None) -> dict: ...


@dataclass(frozen=True)
class Job:
    key: str
    deployment: str
    request: dict


@dataclass
class EngineReport:
    reused: int = 0
    new: int = 0
    failed: int = 0
    retries: int = 0
    errors: dict[str, str] = field(default_factory=dict)  # request_key -> error
    seconds: float = 0.0


class CompletionEngine:
    def __init__(self, store: Store, client_for: Callable[[str], Client], num_threads: int = 8,
                 flush_every: int = 16, flush_seconds: float = 1.0,
                 progress: Callable[[int, int], None] | None = None):
        self.store = store
        self.client_for = client_for
        self.num_threads = max(1, num_threads)
        self.flush_every = flush_every
        self.flush_seconds = flush_seconds
        self.progress = progress

    def existing(self, keys: list[str]) -> dict[str, dict]:
        if not keys:
            return {}
        with self.store.connect() as conn:
            rows = conn.execute(
                "SELECT request_key, result FROM completions WHERE request_key IN (SELECT unnest(?::VARCHAR[]))",
                [keys]).fetchall()
        return {k: json.loads(r) for k, r in rows}

    def run(self, jobs: list[Job]) -> tuple[dict[str, dict], EngineReport]:
        start = time.time()
        unique: dict[str, Job] = {}
        for job in jobs:
            unique.setdefault(job.key, job)
        results = self.existing(list(unique))
        report = EngineReport(reused=len(results))
        todo = [j for k, j in unique.items() if k not in results]
        if not todo:
            report.seconds = time.time() - start
            return results, report

        # Fail fast on configuration problems (unknown deployment, missing key) before any call.
        clients = {d: self.client_for(d) for d in sorted({j.deployment for j in todo})}
        pending: list[tuple] = []
        failures: list[tuple] = []
        lock = threading.Lock()
        last_flush = [time.time()]
        done = [0]

        def flush(force: bool = False) -> None:
            with lock:
                if not pending and not failures:
                    return
                if not force and len(pending) < self.flush_every and time.time() - last_flush[0] < self.flush_seconds:
                    return
                rows, errs = list(pending), list(failures)
                pending.clear()
                failures.clear()
                last_flush[0] = time.time()
            with self.store.connect() as conn:
                conn.execute("BEGIN TRANSACTION")
                insert_rows(conn, "completions", ["request_key", "model_deployment", "model", "request", "result",
                                                  "success", "attempts"], rows, or_ignore=True)
                insert_rows(conn, "completion_errors", ["request_key", "model_deployment", "error", "attempts"], errs)
                conn.execute("COMMIT")

        def on_retry(_: str) -> None:
            with lock:
                report.retries += 1

        def work(job: Job) -> tuple[Job, dict | None, str | None, int]:
            try:
                result = clients[job.deployment].complete(job.request, on_retry=on_retry)
            except RequestFailed as e:
                return job, None, str(e), e.attempts
            attempts = result.pop("_attempts", 1)
            return job, result, None, attempts

        with ThreadPoolExecutor(max_workers=self.num_threads) as pool:
            futures = [pool.submit(work, j) for j in todo]
            try:
                for fut in as_completed(futures):
                    job, result, error, attempts = fut.result()
                    with lock:
                        if result is not None:
                            results[job.key] = result
                            report.new += 1
                            pending.append((job.key, job.deployment, job.request["model"],
                                            json.dumps(job.request, ensure_ascii=False),
                                            json.dumps(result, ensure_ascii=False), result["success"], attempts))
                        else:
                            report.failed += 1
                            report.errors[job.key] = error or "failed"
                            failures.append((job.key, job.deployment, error, attempts))
                        done[0] += 1
                    if self.progress:
                        self.progress(done[0], len(todo))
                    flush()
            finally:
                for fut in futures:
                    fut.cancel()
                flush(force=True)
        report.seconds = time.time() - start
        return results, report
