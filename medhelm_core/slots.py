"""A deployment's `max_concurrency` across processes: request slots shared by every process that
writes one store.

Each process has its own adaptive limiter (`ratelimit.EndpointLimiter`); several processes calling
one deployment (two medhelm-run, Dagster's multiprocess executor, machines sharing a DuckLake) would
otherwise have up to `max_concurrency` requests in flight each. So a request also holds one of the
deployment's `max_concurrency` slots while it is sent:

* `FileSlots` (a DuckDB file: the processes of one machine): slot i of a deployment is an exclusive
  `flock` on `<db>.slots/<deployment hash>.<i>`;
* `PostgresSlots` (a DuckLake: any machine): slot i is the session-level advisory lock
  (deployment hash, i) on the catalog's PostgreSQL, taken through one connection per process.

Either way a process that dies frees its slots at once (the kernel closes its files, PostgreSQL ends
its session). A request waits for a free slot by polling (5 ms, doubling to 100 ms).
"""
from __future__ import annotations

import fcntl
import hashlib
import os
import threading
from pathlib import Path
from typing import Optional

from medhelm_core.errors import MedhelmError
from medhelm_core.pg_session import PgSession


def _key32(deployment: str) -> int:
    return int.from_bytes(hashlib.sha256(deployment.encode("utf-8")).digest()[:4], "big", signed=True)


class _Slots:
    """The waiting and this process's bookkeeping; `_try(deployment, i)` and `_free` are the medium's."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._held: set[tuple[str, int]] = set()   # taken by this process (a medium lets its owner re-take)

    def acquire(self, deployment: str, limit: int, stop: threading.Event) -> Optional[tuple[str, int]]:
        """A free slot of the deployment's `limit`, or None once `stop` is set."""
        wait = 0.005
        while not stop.is_set():
            with self._lock:
                self._retake_lost()
                for i in range(limit):
                    if (deployment, i) not in self._held and self._try(deployment, i):
                        self._held.add((deployment, i))
                        return deployment, i
            stop.wait(wait)
            wait = min(0.1, wait * 2)
        return None

    def release(self, slot: tuple[str, int]) -> None:
        with self._lock:
            self._free(*slot)
            self._held.discard(slot)

    def _retake_lost(self) -> None:
        """Take again the slots of requests in flight that the medium lost (none lose them but PostgreSQL's)."""

    def _try(self, deployment: str, i: int) -> bool:
        raise NotImplementedError

    def _free(self, deployment: str, i: int) -> None:
        raise NotImplementedError


class FileSlots(_Slots):
    """Slots as flocks on files in `folder` (one machine)."""

    def __init__(self, folder: str | Path):
        super().__init__()
        self.folder = Path(folder)
        self._fds: dict[tuple[str, int], int] = {}

    def _try(self, deployment: str, i: int) -> bool:
        fd = self._fds.get((deployment, i))
        if fd is None:
            self.folder.mkdir(parents=True, exist_ok=True)
            fd = self._fds[(deployment, i)] = os.open(self.folder / f"{_key32(deployment) & 0xffffffff:08x}.{i}",
                                                      os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return True
        except BlockingIOError:
            return False

    def _free(self, deployment: str, i: int) -> None:
        fcntl.flock(self._fds[(deployment, i)], fcntl.LOCK_UN)


class PostgresSlots(_Slots):
    """Slots as advisory locks on the DuckLake catalog's PostgreSQL (any machine), taken through one
    session of this process (`connect`: () -> a psycopg2 connection in autocommit).

    A session that ends takes the locks of the requests still in flight with it. Those requests
    keep their slots in this process (none is granted twice here), and the next session takes
    their locks again before it grants a new one, so other processes see them held once more."""

    def __init__(self, connect):
        super().__init__()
        self._session = PgSession(connect, "request slots")
        self._lost = False   # the session that held our locks ended: take the in-flight ones again

    def _retake_lost(self) -> None:
        if self._lost:
            try:
                for d, j in sorted(self._held):
                    # (taken meanwhile by another process: both send until ours is released)
                    self._session.execute("SELECT pg_try_advisory_lock(%s, %s)", [_key32(d), j])
            except MedhelmError:
                return   # still unreachable: tried again at the next acquire
            self._lost = False

    def _try(self, deployment: str, i: int) -> bool:
        try:
            return bool(self._session.execute("SELECT pg_try_advisory_lock(%s, %s)", [_key32(deployment), i])[0][0])
        except MedhelmError:   # the session ended, and every lock it held with it
            self._lost = True
            raise

    def _free(self, deployment: str, i: int) -> None:
        try:
            self._session.execute("SELECT pg_advisory_unlock(%s, %s)", [_key32(deployment), i])
        except MedhelmError:   # the session ended, and its locks with it
            self._lost = True

    def close(self) -> None:
        with self._lock:
            self._session.close()
            self._held.clear()
            self._lost = False
