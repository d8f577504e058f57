"""The tables on a DuckLake (`--storage ducklake:…`): every process on every machine attaches the same
catalog (PostgreSQL) and Parquet folder, and the store behaves as the DuckDB file does.

* Writers take turns, as with the file's lock, but across machines: a write holds a PostgreSQL
  advisory lock on the catalog's database (`WriterLock`) from before its transaction starts until
  after it commits. A DuckLake has no unique keys and refuses, at COMMIT, a transaction that deletes
  from a table another one changed meanwhile; taking turns makes the store's keyed writes
  (`store.insert_new`, `store.upsert`) exact and no commit conflict. A kill -9
  ends the holder's PostgreSQL session, which frees the lock at once.
* Reads never wait: each sees the lake's newest committed snapshot, so a run's layer (replaced in
  one transaction) is never seen half-written.
* Model calls run in parallel in every process; only the commits (tens of milliseconds, answers in
  batches) take turns. The request claims are a table in the catalog's PostgreSQL
  (`claims.PostgresClaims`), so claiming takes no turn.
* The answer journal (answers received, not yet committed) is a local folder beside the output path,
  `medhelm.ducklake.journal`: a process that dies loses nothing a later process on that machine
  replays; a claim it left is taken over by any machine once its heartbeat is older than the lease.
  Every store of one lake on a machine links its journal in a folder of that machine
  (`journals_on_this_host`), so a process taking over a dead owner's claims there folds in what
  that owner journaled even when it wrote under another output path (on this host a dead owner is
  seen at once, before its own output path is run again).
"""
from __future__ import annotations

import hashlib
import os
import re
import tempfile
import threading
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

import duckdb

from medhelm_core import journal
from medhelm_core.claims import PostgresClaims
from medhelm_core.errors import MedhelmError
from medhelm_core.pg_session import PgSession
from medhelm_core.resources import ddl
from medhelm_core.slots import PostgresSlots
from medhelm_core.storage import LAKE, Storage, ducklake_ddl, open_ducklake
from medhelm_core.store import DDL_FILES, Store, in_transaction, replay_answers

# The advisory lock's key: one per catalog database (a database holds one DuckLake).
_WRITER_KEY = int.from_bytes(hashlib.sha256(b"medhelm-build writer").digest()[:8], "big", signed=True)


def open_store(storage: Storage, scratch_dir: str | Path):
    """The store a storage setting names: a `Store` on a DuckDB file, or this process's `LakeStore`
    of a DuckLake; `scratch_dir` (the output path) holds local files (staging, the answer journal)."""
    if storage.kind != "ducklake":
        return Store(storage.path)
    key = (storage.catalog_dsn, storage.data_path, str(Path(scratch_dir).absolute()))
    with _STORES_LOCK:
        if key not in _STORES:
            _STORES[key] = LakeStore(storage, scratch_dir)
        return _STORES[key]


_STORES: dict[tuple, "LakeStore"] = {}
_STORES_LOCK = threading.Lock()


def catalog_session(storage: Storage):
    """A psycopg2 connection (autocommit) to the catalog's PostgreSQL, for its advisory locks."""
    try:
        import psycopg2
    except ImportError:
        raise MedhelmError("ducklake: storage needs the [ducklake] extra (psycopg2, for the writers' turn): "
                           "pip install \"medhelm-build[ducklake]\"") from None
    # Keepalives: a machine that vanishes loses its locks within a minute, as a dead process at once.
    # A server that does not answer fails in 10 s, not the system's TCP timeout.
    params = {"keepalives": 1, "keepalives_idle": 15, "keepalives_interval": 5, "keepalives_count": 6,
              "connect_timeout": 10, **(storage.catalog or {})}
    try:
        pg = psycopg2.connect(password=storage.password, **params)
    except psycopg2.Error as e:
        raise MedhelmError(f"{storage}: cannot reach the catalog: {str(e).strip().splitlines()[0]}") from None
    pg.autocommit = True
    return pg


class WriterLock:
    """The lake's write turn: a thread lock in this process, and PostgreSQL's session-level advisory
    lock `_WRITER_KEY` across processes, held by this process's own catalog session (re-entrant:
    nested writes of one thread take it once). Waits at most `timeout_s`."""

    def __init__(self, storage: Storage, timeout_s: float):
        self.storage = storage
        self.timeout_s = timeout_s
        self.tlock = threading.RLock()
        self.depth = 0
        self._session = PgSession(lambda: catalog_session(storage), "the DuckLake's write turn",
                                  on_open=f"SET lock_timeout = '{int(timeout_s * 1000)}ms'")

    def __enter__(self) -> "WriterLock":
        self.tlock.acquire()
        if self.depth == 0:
            try:
                self._take()
            except BaseException:
                self.tlock.release()
                raise
        self.depth += 1
        return self

    def _take(self) -> None:
        waited = (f"{self.storage}: another writer held the DuckLake for {self.timeout_s:.0f} s "
                  f"(a process stuck inside a commit?)")
        try:
            self._session.execute("SELECT pg_advisory_lock(%s)", [_WRITER_KEY], lock_timeout=waited)
        except MedhelmError as e:
            if str(e) == waited:
                raise
            # the session had ended since the last turn (a server restart, an idle timeout): it
            # held nothing then, so a new one asks again, once
            self._session.execute("SELECT pg_advisory_lock(%s)", [_WRITER_KEY], lock_timeout=waited)

    def __exit__(self, *exc) -> None:
        self.depth -= 1
        try:
            if self.depth == 0:
                try:
                    self._session.execute("SELECT pg_advisory_unlock(%s)", [_WRITER_KEY])
                except MedhelmError:   # the session is gone, and its lock with it
                    pass
        finally:
            self.tlock.release()

    def close(self) -> None:
        with self.tlock:
            self._session.close()


_FORGET_S = 7 * 24 * 3600   # a link this old whose output path is missing is unlinked


def journals_on_this_host(storage: Storage) -> Path:
    """The folder of this machine where each store of this lake links its answer journal (this
    user's own: made private, and not trusted unless it is this user's and no one else can write it,
    since what its links point to is replayed into the lake)."""
    lake = hashlib.sha256(f"{storage.catalog_dsn}\n{storage.data_path}".encode()).hexdigest()[:16]
    return Path(tempfile.gettempdir()) / f"medhelm-lake-journals-{os.getuid()}" / lake


def _private(folder: Path) -> bool:
    """Whether `folder` and its parent belong to this user and no one else may write in them."""
    try:
        return all((st := p.lstat()).st_uid == os.getuid() and not st.st_mode & 0o022 and not p.is_symlink()
                   for p in (folder.parent, folder))
    except OSError:
        return False


class LakeStore(Store):
    """`Store` on a DuckLake: one attached DuckDB connection per process (a cursor per use), writes
    in `WriterLock` turns. `path` names the local answer journal (`<output>/medhelm.ducklake.journal`)."""

    def __init__(self, storage: Storage, scratch_dir: str | Path, lock_timeout_s: float = 600.0):
        super().__init__(Path(scratch_dir) / "medhelm.ducklake", lock_timeout_s)
        self.storage = storage
        self._scratch = Path(scratch_dir)
        self._lock = threading.RLock()
        self._conn: duckdb.DuckDBPyConnection | None = None
        self._idle = threading.local()   # each thread's idle cursor
        self.writer = WriterLock(storage, lock_timeout_s)
        self._slots = PostgresSlots(lambda: catalog_session(storage))
        self._claims = PostgresClaims(self, lambda: catalog_session(storage))
        self._link_journal()

    @property
    def where(self) -> str:
        return str(self.storage)

    @property
    def scratch_dir(self) -> Path:
        return self._scratch

    @property
    def slots(self) -> PostgresSlots:
        """The deployments' request slots, shared by every process on any machine (`slots`)."""
        return self._slots

    @property
    def claims(self) -> PostgresClaims:
        """Who is asking which request, for every process on any machine (`claims`)."""
        return self._claims

    def _link_journal(self) -> None:
        """Link this output path's journal where the other stores of this lake on this host look."""
        here = str(self.path.absolute())
        link = journals_on_this_host(self.storage) / hashlib.sha256(here.encode()).hexdigest()[:16]
        try:
            link.parent.parent.mkdir(mode=0o700, exist_ok=True)
            link.parent.mkdir(mode=0o700, exist_ok=True)
            if _private(link.parent) and not link.is_symlink():
                os.symlink(here, link)
        except FileExistsError:
            pass   # (linked by another process meanwhile)
        except OSError:
            pass   # no shared temporary folder: this output path's journal is still replayed here

    def _journal_paths(self) -> list[Path]:
        """This output path's journal first, then those of the other stores of this lake on this host."""
        paths = [self.path.absolute()]
        folder = journals_on_this_host(self.storage)
        try:
            links = sorted(folder.iterdir()) if _private(folder) else []
        except OSError:
            links = []
        for link in links:
            try:
                target = Path(os.readlink(link))
                if not target.parent.exists():
                    # an output path deleted long ago is forgotten (a new one may not exist yet)
                    if time.time() - link.lstat().st_mtime > _FORGET_S:
                        link.unlink()
                    continue
            except OSError:
                continue
            if target not in paths and journal.journal_dir(target).is_dir():
                paths.append(target)
        return paths

    def replay(self, conn: duckdb.DuckDBPyConnection, dead=None) -> list[Path]:
        """The orphan answers (of the owners `dead` accepts, or of every ended engine) of every journal
        of this lake on this host, in the caller's transaction; returns the segments to remove once it
        committed. A segment two processes replay at once is stored once: their writes take turns."""
        done: list[Path] = []
        for path in self._journal_paths():
            done += replay_answers(conn, path, dead=dead)
        return done

    def _recover_answers(self, conn: duckdb.DuckDBPyConnection) -> None:
        """Replay this machine's journals of ended engines, then drop the claims of dead owners:
        in that order, so whoever claims those keys next finds their answers."""
        dead = self._claims.dead_owners()   # first: one that dies meanwhile keeps its claims (taken over later)
        with in_transaction(conn):
            done = self.replay(conn)
        self._claims.drop(dead)
        journal.remove(done)

    def exists(self) -> bool:
        """Whether the lake holds the store's tables (a writer created them)."""
        with self._cursor() as cur:
            return bool(cur.execute("SELECT count(*) FROM duckdb_tables() WHERE database_name = ? "
                                    "AND table_name = 'run_entries'", [LAKE]).fetchall()[0][0])

    def _connection(self) -> duckdb.DuckDBPyConnection:
        with self._lock:
            if self._conn is None:
                with self.writer:   # the first attach creates the catalog's tables: one process at a time
                    self._conn = open_ducklake(self.storage)
            return self._conn

    @contextmanager
    def _cursor(self) -> Iterator[duckdb.DuckDBPyConnection]:
        """A cursor with the lake in use: this thread's idle one when it has one (a `USE` costs a
        millisecond on a lake), else a new one; a block that failed leaves its cursor closed."""
        idle = getattr(self._idle, "cursor", None)
        self._idle.cursor = None
        cursor = idle
        if cursor is None:
            cursor = self._connection().cursor()
            cursor.execute(f"USE {LAKE}")
        try:
            yield cursor
        except BaseException:
            cursor.close()
            raise
        if getattr(self._idle, "cursor", None) is None:
            self._idle.cursor = cursor
        else:
            cursor.close()

    @contextmanager
    def connect(self, read_only: bool = False) -> Iterator[duckdb.DuckDBPyConnection]:
        """Reads never wait. A writing block takes the write turn at its first statement that is not a
        plain read (a BEGIN included), so its transaction starts after every earlier writer committed,
        and keeps it to the end of the block."""
        if not self._initialised and not read_only:
            with self.writer, self._cursor() as cursor:
                if not self._initialised:
                    with in_transaction(cursor):   # every table, or none
                        for name in DDL_FILES:
                            cursor.execute(ducklake_ddl(ddl(name)))
                    self._initialised = True
                    self._recover_answers(cursor)
        with self._cursor() as cursor:
            if read_only:
                yield cursor
                return
            turn = _TurnTaking(cursor, self.writer)
            try:
                yield turn
            finally:
                turn.release()

    @contextmanager
    def held(self) -> Iterator[None]:
        yield   # the attached connection stays open for the process anyway

    def close(self) -> None:
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None
        self.writer.close()
        self._slots.close()
        self._claims.close()


# A statement that starts so, and names none of the writing verbs, only reads (or sets a session option).
_READS = re.compile(r"^\s*\(*\s*(SELECT|WITH|FROM|SHOW|DESCRIBE|SUMMARIZE|EXPLAIN|VALUES|TABLE|PRAGMA|SET|RESET|USE)\b",
                    re.IGNORECASE)
_WRITES = re.compile(r"\b(INSERT|UPDATE|DELETE|CREATE|DROP|ALTER|MERGE|COPY|CALL|CHECKPOINT|ATTACH|DETACH)\b", re.IGNORECASE)


def only_reads(sql: str) -> bool:
    return bool(_READS.match(sql)) and not _WRITES.search(sql)


class _TurnTaking:
    """A cursor that takes the lake's write turn before its first statement that may write, and holds
    it until `release` (the end of the `connect` block); everything else is the cursor's."""

    on_ducklake = True   # what `storage.on_ducklake` would ask the lake

    def __init__(self, cursor: duckdb.DuckDBPyConnection, writer: WriterLock):
        self._cursor, self._writer, self._holding = cursor, writer, False

    def _before(self, sql: str) -> None:
        if not self._holding and not only_reads(sql):
            self._writer.__enter__()
            self._holding = True

    def execute(self, sql: str, *args, **kwargs):
        self._before(sql)
        return self._cursor.execute(sql, *args, **kwargs)

    def executemany(self, sql: str, *args, **kwargs):
        self._before(sql)
        return self._cursor.executemany(sql, *args, **kwargs)

    def sql(self, sql: str, *args, **kwargs):
        self._before(sql)
        return self._cursor.sql(sql, *args, **kwargs)

    def __getattr__(self, name: str):
        return getattr(self._cursor, name)

    def release(self) -> None:
        if self._holding:
            self._holding = False
            self._writer.__exit__(None, None, None)
