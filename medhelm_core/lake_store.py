"""The tables on a DuckLake (`--storage ducklake:…`): one attached connection per process, shared by
its threads through cursors, and the store's DDL in DuckLake's form.

A DuckLake takes any number of writer processes on any machines; a transaction that conflicts with
another's commit is refused at COMMIT (DuckLake's conflicts are per table), and what it wrote is
rolled back whole. Today `medhelm-import` writes here (one importer per target at a time); the
commands whose writes rely on unique keys across processes (medhelm-run's request claims) refuse a
DuckLake until those live in PostgreSQL (medhelm_core.storage.database_file).
"""
from __future__ import annotations

import threading
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

import duckdb

from medhelm_core.resources import ddl
from medhelm_core.storage import Storage, ducklake_ddl, open_ducklake
from medhelm_core.store import DDL_FILES, Store, in_transaction


def open_store(storage: Storage, scratch_dir: str | Path):
    """The store a storage setting names: a `Store` on a DuckDB file, or a `LakeStore` (for the
    commands that write a DuckLake: medhelm-import); `scratch_dir` holds staging files."""
    if storage.kind == "ducklake":
        return LakeStore(storage, scratch_dir)
    return Store(storage.path)


class LakeStore:
    """`Store`'s interface on a DuckLake: `connect`, `transaction`, `held`; `scratch_dir` is a local
    folder for staging files (the output path)."""

    def __init__(self, storage: Storage, scratch_dir: str | Path):
        self.storage = storage
        self.scratch_dir = Path(scratch_dir)
        self._lock = threading.RLock()
        self._conn: duckdb.DuckDBPyConnection | None = None

    @property
    def where(self) -> str:
        return str(self.storage)

    def exists(self) -> bool:
        return True   # a DuckLake's catalog is created on first attach

    def _connection(self) -> duckdb.DuckDBPyConnection:
        with self._lock:
            if self._conn is None:
                conn = open_ducklake(self.storage)
                with in_transaction(conn):   # every table, or none
                    for name in DDL_FILES:
                        conn.execute(ducklake_ddl(ddl(name)))
                self._conn = conn
            return self._conn

    @contextmanager
    def connect(self, read_only: bool = False) -> Iterator[duckdb.DuckDBPyConnection]:
        cursor = self._connection().cursor()
        try:
            cursor.execute("USE medhelm")
            yield cursor
        finally:
            cursor.close()

    @contextmanager
    def transaction(self) -> Iterator[duckdb.DuckDBPyConnection]:
        with self.connect() as conn, in_transaction(conn):
            yield conn

    @contextmanager
    def held(self) -> Iterator[None]:
        yield   # the attached connection stays open for the process anyway

    def close(self) -> None:
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None
