"""The DuckDB file every layer lives in, and the write discipline around it.

DuckDB allows one read-write process at a time, so writers take a file lock and keep their
connections short. Every per-run layer is replaced inside one transaction (delete the run's
rows, insert the new ones, commit), so a failure never leaves a half-written run behind.
Completions are the exception by design: each answer is durable the moment it arrives (the
engine's answer journal, `journal.py`, folded into `completions` in batches), content-addressed by
(deployment, request), so a crash loses nothing and a rerun asks only for what is missing.
The same discipline holds on a DuckLake shared by many processes (`lake_store.LakeStore`).
"""
from __future__ import annotations

import functools
import hashlib
import json
import os
import re
import threading
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Iterator, TypeVar

import duckdb
import filelock

from medhelm_core import journal
from medhelm_core.combining import Combiner, Piece, settle_together
from medhelm_core.errors import MedhelmError, shorten
from medhelm_core.claims import TableClaims, dead_claimants, drop_claims
from medhelm_core.resources import ddl
from medhelm_core.slots import FileSlots
from medhelm_core.storage import DB_FILENAME, on_ducklake, sql_str  # noqa: F401 (sql_str: used from here)

# Created on first write, in this order (sql/ddl/): the pipeline's tables, their additive
# migrations, the summarize inputs, the edition comparison views, the cost views over all of them, then
# the local models' logprobs beside HELM's, the vendors' batches.
DDL_FILES = ("pipeline", "pipeline_migrations", "summarize_inputs", "editions", "costs", "local_models", "batches")


# The columns of a `completions` row, in the order the engine and its answer journal write them.
COMPLETION_COLUMNS = ["request_key", "model_deployment", "model", "request", "result", "success", "attempts",
                      "prompt_tokens", "completion_tokens", "usage", "cost_usd", "outcome", "untruncated",
                      "model_logprobs"]


def request_key(deployment: str, request: dict) -> str:
    payload = json.dumps({"deployment": deployment, "request": request}, sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()


def stable_hash(obj: Any) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True, ensure_ascii=False).encode("utf-8")).hexdigest()


def unreadable_database(path: Path, error: BaseException) -> MedhelmError:
    """The one line for a DuckDB file that cannot be opened: a damaged or truncated file, another
    program's file, one of a newer DuckDB."""
    first = (str(error).strip().splitlines() or [type(error).__name__])[0]
    return MedhelmError(f"{shorten(str(path))}: cannot open this DuckDB database ({shorten(first, 300)}); if it is "
                        f"damaged or truncated, move it away or give a fresh --output-path")


MEMORY_LIMIT_ENV = "MEDHELM_DUCKDB_MEMORY_LIMIT"
DEFAULT_MEMORY_LIMIT = "256MB"
MIN_MEMORY_LIMIT_BYTES = 16_000_000   # below this DuckDB cannot even open the file (it says "Out of Memory")
_SIZE = re.compile(r"(\d+(?:\.\d+)?)\s*([KMGT])(i?)B", re.IGNORECASE)   # DuckDB's units: KB..TB, KiB..TiB


def store_memory_limit() -> str:
    """The store's DuckDB memory (`$MEDHELM_DUCKDB_MEMORY_LIMIT`, default 256MB). Its blocks are on
    disk, so what goes past this is read again rather than kept: DuckDB's own default, 80% of the
    machine's memory, let a suite's process keep every block it ever wrote or read."""
    value = os.environ.get(MEMORY_LIMIT_ENV, "").strip() or DEFAULT_MEMORY_LIMIT
    size = _SIZE.fullmatch(value)
    if not size:
        raise MedhelmError(f"${MEMORY_LIMIT_ENV} must be a size such as 256MB or 2GB, got {value!r}")
    number, unit, binary = size.groups()
    if float(number) * (1024 if binary else 1000) ** ("KMGT".index(unit.upper()) + 1) < MIN_MEMORY_LIMIT_BYTES:
        raise MedhelmError(f"${MEMORY_LIMIT_ENV} must be at least 16MB, got {value!r}")
    return value


class _Database:
    """This process's use of one DuckDB file, shared by every `Store` of that path: a thread lock
    (one user at a time, as the file lock orders processes) and, while a caller `holds` it, the
    database kept open between uses. Opening and closing (a checkpoint) cost tens of milliseconds
    each on a big file, which a suite of concurrent runs would otherwise pay on every commit. A
    held database is closed after `idle_s` without use, and given up when another process asks
    for it (after at least `hold_s` of use; reopened only `pause_s` later), so another medhelm-run
    or the page still gets its turn. A process waiting for the file asks by touching `<file>.want`
    every `ask_s` while it waits; the holder looks at that file's time after each use (one stat)."""

    idle_s, hold_s, pause_s, ask_s = 0.25, 0.25, 0.1, 0.05

    def __init__(self, path: Path, lock_timeout_s: float):
        self.path = path
        self.lock_timeout_s = lock_timeout_s
        self.want = Path(str(path) + ".want")
        self.opens = 0  # how many times this process opened the file (a held one: once, unless asked for it)
        self.flock = filelock.FileLock(str(path) + ".lock", timeout=lock_timeout_s, thread_local=False)
        self.tlock = threading.RLock()
        self.conn: duckdb.DuckDBPyConnection | None = None
        self.read_only = False
        self.depth = 0
        self.holders = 0
        self.opened_at = self.last_use = self.forced_at = 0.0
        self.opened_ns = 0
        self._closer: threading.Thread | None = None
        self.holder: int | None = None   # the thread using the connection (`depth` > 0)
        self.combiner: Combiner | None = None   # `Store.combined`'s, made by the first Store that asks

    @contextmanager
    def connection(self, read_only: bool) -> Iterator[duckdb.DuckDBPyConnection]:
        with self.tlock:
            if self.conn is not None and self.read_only and not read_only:
                self._close()
            if self.conn is None:
                self._open(read_only)
            self.depth += 1
            self.holder = threading.get_ident()
            cursor = self.conn.cursor()
            try:
                yield cursor
            finally:
                cursor.close()
                self.depth -= 1
                if self.depth == 0:
                    self.holder = None
                self.last_use = time.monotonic()
                if self.depth == 0:
                    if not self.holders:
                        self._close()
                    elif self.last_use - self.opened_at > self.hold_s and self._asked_for():
                        self._close()
                        self.forced_at = self.last_use

    def _open(self, read_only: bool) -> None:
        wait = self.forced_at + self.pause_s - time.monotonic()
        if wait > 0:  # we just gave the file up after a long hold: let a waiting process take it first
            time.sleep(wait)
        config = {"memory_limit": store_memory_limit()}
        lock_was_there = Path(self.flock.lock_file).exists()
        self._acquire_turn()
        try:
            self.conn = duckdb.connect(str(self.path), read_only=read_only, config=config)
        except duckdb.Error as e:
            self.flock.release()
            if not lock_was_there:   # a file that cannot be opened: leave its folder as it was
                Path(self.flock.lock_file).unlink(missing_ok=True)
            raise unreadable_database(self.path, e) from None
        except BaseException:
            self.flock.release()
            raise
        self.read_only = read_only
        self.opened_at = time.monotonic()
        self.opened_ns = time.time_ns()
        self.opens += 1

    def _acquire_turn(self) -> None:
        """The file lock; while another process has it, ask for it (`want`) every `ask_s`."""
        deadline = time.monotonic() + self.lock_timeout_s
        timeout = 0.0
        while True:
            try:
                self.flock.acquire(timeout=timeout)
                return
            except filelock.Timeout:
                if time.monotonic() >= deadline:
                    raise
                try:
                    self.want.touch()
                except OSError:
                    pass  # a folder we cannot write: the holder gives the file up when it is done
                timeout = self.ask_s

    def _asked_for(self) -> bool:
        """Another process touched `want` since this one opened the file."""
        try:
            return self.want.stat().st_mtime_ns > self.opened_ns
        except OSError:
            return False

    def _close(self) -> None:
        if self.conn is not None:
            try:
                self.conn.close()
            finally:
                self.conn = None
                self.flock.release()

    @contextmanager
    def held(self) -> Iterator[None]:
        with self.tlock:
            self.holders += 1
            if self._closer is None:
                self._closer = threading.Thread(target=self._close_when_idle, name="medhelm-store", daemon=True)
                self._closer.start()
        try:
            yield
        finally:
            with self.tlock:
                self.holders -= 1
                if not self.holders and not self.depth:
                    self._close()

    def _close_when_idle(self) -> None:
        while True:
            time.sleep(self.idle_s / 2)
            with self.tlock:
                if not self.holders:
                    self._closer = None
                    return
                if self.conn is not None and not self.depth and time.monotonic() - self.last_use > self.idle_s:
                    self._close()


T = TypeVar("T")


@functools.lru_cache(maxsize=None)
def _file_slots(folder: Path) -> FileSlots:
    return FileSlots(folder)


_DATABASES: dict[Path, _Database] = {}
_DATABASES_LOCK = threading.Lock()


def _database(path: Path, lock_timeout_s: float) -> _Database:
    key = path.absolute()
    with _DATABASES_LOCK:
        if key not in _DATABASES:
            _DATABASES[key] = _Database(key, lock_timeout_s)
        return _DATABASES[key]


class Store:
    """Short-lived, file-locked connections to `<output_path>/medhelm.duckdb` (kept open between
    uses while `held`, see `_Database`)."""

    def __init__(self, path: str | Path, lock_timeout_s: float = 600.0):
        self.path = Path(path)
        self.lock_timeout_s = lock_timeout_s
        self._initialised = False

    @classmethod
    def in_output_path(cls, output_path: str | Path) -> "Store":
        """The store of an output folder; the folder is made only when something is first written."""
        return cls(Path(output_path) / DB_FILENAME)

    @property
    def where(self) -> str:
        """The store as messages name it."""
        return str(self.path)

    @property
    def scratch_dir(self) -> Path:
        """A local folder for staging files (beside the database file)."""
        return self.path.parent

    def exists(self) -> bool:
        """Whether anything was ever written (a reader has tables to read)."""
        return self.path.exists()

    @functools.cached_property
    def slots(self) -> FileSlots:
        """The deployments' request slots shared by the processes of this machine (`slots`); asked
        twice per request, so kept."""
        return _file_slots(Path(str(self.path.absolute()) + ".slots"))

    @contextmanager
    def connect(self, read_only: bool = False) -> Iterator[duckdb.DuckDBPyConnection]:
        if not read_only:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        with _database(self.path, self.lock_timeout_s).connection(read_only) as conn:
            if not self._initialised and not read_only:
                for name in DDL_FILES:
                    conn.execute(ddl(name))
                self._initialised = True
                self._recover_answers(conn)
            yield conn

    def held(self):
        """Keep the database open between uses for the block (a suite's many short transactions)."""
        return _database(self.path, self.lock_timeout_s).held()

    def recover_answers(self) -> None:
        """Fold in the answers that engines which have since ended journaled but never committed
        (a directory listing when there are none)."""
        if journal.orphan_segments(self.path):
            with self.connect() as conn:
                self._recover_answers(conn)

    def _recover_answers(self, conn: duckdb.DuckDBPyConnection) -> None:
        """Replay the journals of ended engines, then drop the claims they left: a dead owner's claim
        holds nothing back, and one whose answer is now stored would otherwise never be settled."""
        with in_transaction(conn):
            done = self.replay(conn)
            drop_claims(conn, dead_claimants(conn))
        journal.remove(done)

    def replay(self, conn: duckdb.DuckDBPyConnection, dead=None) -> list[Path]:
        """The journals' orphan answers (of the owners `dead` accepts, or of every ended engine) into
        `completions`, in the caller's transaction; returns the segments to remove once it committed."""
        return replay_answers(conn, self.path, dead=dead)

    @functools.cached_property
    def claims(self) -> TableClaims:
        """Who is asking which request (`claims`): the store's `completion_claims` table."""
        return TableClaims(self)

    @contextmanager
    def transaction(self) -> Iterator[duckdb.DuckDBPyConnection]:
        with self.connect() as conn, in_transaction(conn):
            yield conn

    def combined(self, fn: Callable[[duckdb.DuckDBPyConnection], T]) -> T:
        """`fn(conn)` in a store transaction that it may share with the `combined` work other threads
        of this process hand in meanwhile (flat combining: the thread that gets the turn runs every
        piece queued, in order, and commits once). A suite's engines settle their claims and answers
        in hundreds of small transactions; each costs a turn of the store's one writer, a commit, and
        the GIL waits of the thread holding the turn, which under load outweigh the statements. A
        shared transaction that fails is rolled back and each piece is run again alone, so one
        piece's error is only its own. `fn` must not keep a side effect outside the transaction
        (it may run twice) and must not wait for another thread's store work."""
        db = _database(self.path, self.lock_timeout_s)
        if db.holder == threading.get_ident():   # inside this thread's own use of the store: alone
            with self.transaction() as conn:
                return fn(conn)
        with _DATABASES_LOCK:
            if db.combiner is None:
                db.combiner = Combiner(self._run_batch)
        return db.combiner.submit(fn)

    def _run_batch(self, batch: list[Piece]) -> None:
        def run(works: list) -> list:
            with self.transaction() as conn:
                return [work(conn) for work in works]

        settle_together(batch, run)


@contextmanager
def in_transaction(conn: duckdb.DuckDBPyConnection) -> Iterator[duckdb.DuckDBPyConnection]:
    """Commit what the block wrote, or roll all of it back: nothing half-written."""
    conn.execute("BEGIN TRANSACTION")
    try:
        yield conn
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")


def insert_answers(conn: duckdb.DuckDBPyConnection, rows: list) -> None:
    """`completions` rows (COMPLETION_COLUMNS order); an answer already there is kept, and of a key
    given twice the first is stored."""
    insert_new(conn, "completions", COMPLETION_COLUMNS, [tuple(r) for r in rows], key="request_key")


def insert_new(conn: duckdb.DuckDBPyConnection, table: str, columns: list[str], rows: list[tuple], key: str) -> None:
    """Insert the rows whose `key` the table does not hold yet (the first row of a key given twice).
    A DuckDB file checks its primary key (INSERT OR IGNORE, an index lookup); a DuckLake has no
    unique keys, so the batch is anti-joined on the key column there, exact because a lake's writers
    take turns (`lake_store.WriterLock`)."""
    if not rows:
        return
    if not on_ducklake(conn):
        insert_values(conn, table, columns, rows, or_ignore=True)
        return
    at = columns.index(key)
    first: dict = {}
    for row in rows:
        first.setdefault(row[at], row)
    with _rows_as(conn, columns, list(first.values())) as (source, params):
        cols = ", ".join(f"r.{c}" for c in columns)
        conn.execute(f"INSERT INTO {table} ({', '.join(columns)}) SELECT {cols} FROM {source}"
                     f" WHERE r.{key} NOT IN (SELECT t.{key} FROM {table} t WHERE t.{key} IS NOT NULL)", params)


def upsert(conn: duckdb.DuckDBPyConnection, table: str, keys: list[str], columns: list[str], rows: list[tuple]) -> None:
    """Insert the rows, replacing the listed columns of a row whose `keys` are already there (the
    others, e.g. a scenario's content hash or a row's creation time, stay as they were). DuckDB's
    `INSERT OR REPLACE` does that through a primary key; this is the same as an UPDATE then an
    INSERT of the new keys, which a DuckLake (no unique keys) takes too. Of a key given twice the
    last row counts, as with successive INSERT OR REPLACEs."""
    if not rows:
        return
    ats = [columns.index(k) for k in keys]
    last = {tuple(row[i] for i in ats): row for row in rows}
    match = " AND ".join(f"{table}.{k} = r.{k}" for k in keys)
    with _rows_as(conn, columns, list(last.values())) as (source, params):
        changed = [c for c in columns if c not in keys]
        if changed:
            conn.execute(f"UPDATE {table} SET {', '.join(f'{c} = r.{c}' for c in changed)} FROM {source}"
                         f" WHERE {match}", params)
        conn.execute(f"INSERT INTO {table} ({', '.join(columns)}) SELECT {', '.join(f'r.{c}' for c in columns)}"
                     f" FROM {source} WHERE NOT EXISTS (SELECT 1 FROM {table} WHERE {match})", params)


@contextmanager
def _rows_as(conn: duckdb.DuckDBPyConnection, columns: list[str], rows: list[tuple]) -> Iterator[tuple[str, list]]:
    """The rows as a relation `r` to select from: a VALUES list with parameters for a few (planned in
    ~2 ms a row), a registered frame for more (~10 ms whatever the size)."""
    if len(rows) <= 4:
        one = "(" + ", ".join("?" * len(columns)) + ")"
        yield f"(VALUES {', '.join([one] * len(rows))}) AS r({', '.join(columns)})", [v for row in rows for v in row]
        return
    import pandas as pd

    conn.register("_medhelm_upsert", pd.DataFrame.from_records(rows, columns=columns))
    try:
        yield "_medhelm_upsert AS r", []
    finally:
        conn.unregister("_medhelm_upsert")


def insert_values(conn: duckdb.DuckDBPyConnection, table: str, columns: list[str], rows: list[tuple],
                  or_ignore: bool = False) -> None:
    """A few rows as one multi-row VALUES statement (DuckDB plans it in ~2 ms a row); more through
    `insert_rows` (a registered frame: ~10 ms whatever the size)."""
    if not rows:
        return
    if len(rows) > 4:
        insert_rows(conn, table, columns, rows, or_ignore=or_ignore)
        return
    one = "(" + ", ".join("?" * len(columns)) + ")"
    verb = "INSERT OR IGNORE" if or_ignore else "INSERT"
    conn.execute(f"{verb} INTO {table} ({', '.join(columns)}) VALUES {', '.join([one] * len(rows))}",
                 [v for row in rows for v in row])


def replay_answers(conn: duckdb.DuckDBPyConnection, db_path: str | Path, dead=None) -> list[Path]:
    """The journal's orphan answers into `completions` (see `journal.replay`)."""
    return journal.replay(conn, db_path, insert_answers, len(COMPLETION_COLUMNS), dead=dead)


def insert_rows(conn: duckdb.DuckDBPyConnection, table: str, columns: list[str], rows: list[tuple],
                or_ignore: bool = False) -> None:
    """Bulk insert (DuckDB's executemany runs one statement per row, far too slow for stats): the rows
    as an Arrow table that DuckDB scans in place (half the CPU of a pandas frame for the few dozen
    rows of an engine's commit); a pandas frame where Arrow cannot type a column (mixed values)."""
    if not rows:
        return
    frame = _arrow_rows(columns, rows)
    if frame is None:
        import pandas as pd

        frame = pd.DataFrame.from_records(rows, columns=columns)
    conn.register("_medhelm_rows", frame)
    try:
        cols = ", ".join(columns)
        verb = "INSERT OR IGNORE" if or_ignore else "INSERT"
        conn.execute(f"{verb} INTO {table} ({cols}) SELECT {cols} FROM _medhelm_rows")
    finally:
        conn.unregister("_medhelm_rows")


def _arrow_rows(columns: list[str], rows: list[tuple]):
    import pyarrow as pa

    # malloc's pool, not Arrow's default (mimalloc): mimalloc kept the freed buffers of every
    # insert, about 200 MB of a suite's process at 182 runs
    pool = pa.system_memory_pool()
    try:
        return pa.Table.from_arrays([pa.array([row[i] for row in rows], memory_pool=pool)
                                     for i in range(len(columns))], names=columns)
    except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError, OverflowError):
        return None
