"""One PostgreSQL session of this process on a DuckLake catalog's server, opened when first used and
opened again after a failure: what the request slots (`slots.PostgresSlots`) and the request claims
(`claims.PostgresClaims`) talk through. Statements of many threads take turns on it (each is a
millisecond). A failed statement ends the session, and with it whatever the session held (advisory
locks), and is one line naming what failed; the next statement opens a new session."""
from __future__ import annotations

import threading
from typing import Callable, Optional

from medhelm_core.errors import MedhelmError


class PgSession:
    def __init__(self, connect: Callable[[], object], what: str, on_open: Optional[str] = None):
        self._connect = connect   # () -> a psycopg2 connection in autocommit
        self.what = what          # named in errors: "request slots", "request claims"
        self.on_open = on_open    # a statement string run first on every new session
        self._lock = threading.Lock()
        self._pg = None

    def execute(self, sql: str, params: list | tuple = (), lock_timeout: Optional[str] = None) -> list[tuple]:
        """Run one statement string; its rows, if it returns any. `lock_timeout`: the error's line
        when the statement gave up waiting for a lock (PostgreSQL's lock_timeout)."""
        with self._lock:
            try:
                if self._pg is None or self._pg.closed:
                    self._pg = self._connect()
                    if self.on_open:
                        with self._pg.cursor() as cur:
                            cur.execute(self.on_open)
                with self._pg.cursor() as cur:
                    cur.execute(sql, params)
                    return cur.fetchall() if cur.description else []
            except MedhelmError:
                raise
            except Exception as e:   # noqa: BLE001 - psycopg2's errors
                self._drop()
                if lock_timeout and getattr(e, "pgcode", None) == "55P03":   # lock_not_available
                    raise MedhelmError(lock_timeout) from None
                raise MedhelmError(f"{self.what}: the catalog's PostgreSQL failed: "
                                   f"{str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__}") from None

    def _drop(self) -> None:
        pg, self._pg = self._pg, None
        if pg is not None:
            try:
                pg.close()
            except Exception:   # noqa: BLE001 - already gone
                pass

    def close(self) -> None:
        with self._lock:
            self._drop()
