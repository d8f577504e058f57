"""The Dagster instance the command lines launch their jobs on: DAGSTER_HOME when set, else a home
under the output path, created once whatever the number of commands started at the same time."""
from __future__ import annotations

import os
from pathlib import Path

# Dagster's console logger says nothing on the command's stderr (its stack traces stay in the
# instance's event log, which the UI shows): the command reports each failure in one line itself.
QUIET = {"loggers": {"console": {"config": {"log_level": "CRITICAL"}}}}


def dagster_instance(output_path: str):
    """DAGSTER_HOME when set (so `dagster dev` shows these runs), else `<output-path>/.dagster_home`."""
    import dagster as dg

    home = Path(os.environ.get("DAGSTER_HOME") or Path(output_path) / ".dagster_home").absolute()
    home.mkdir(parents=True, exist_ok=True)
    os.environ["DAGSTER_HOME"] = str(home)
    cfg, ready = home / "dagster.yaml", home / ".medhelm_storage_ready"
    if ready.exists() and cfg.exists():
        return _reusing_connections(dg.DagsterInstance.get())
    # The first commands on a new home create its dagster.yaml and Dagster's SQLite storage (the
    # runs, schedules and event-log index databases, with their migrations): two at once race
    # ("table ... already exists"), so the first ones take turns until the storage is there.
    import filelock

    with filelock.FileLock(str(home / ".medhelm_storage.lock")):
        if not cfg.exists():
            # As deploy/local/dagster.yaml: later `dg launch` runs on this home print INFO, not DEBUG.
            cfg.write_text("python_logs:\n  python_log_level: INFO\ntelemetry:\n  enabled: false\n")
        instance = dg.DagsterInstance.get()
        if not ready.exists():
            instance.event_log_storage.get_asset_keys()  # the event log's index database
            ready.touch()
    return _reusing_connections(instance)


def _reusing_connections(instance):
    """The instance, its SQLite event log keeping one connection per database file in this process.
    Dagster's opens a new engine and connection for each event it stores (about 8 ms of CPU each);
    a suite's run stores thousands (its planned cells, then each cell's materializations and checks),
    all on the thread that also collects the runs' outcomes. Same rows, same locks (the storage's
    own, around each use), about a third of the CPU; its schema questions are answered from memory
    once answered yes. Other storages (PostgreSQL) are left as they are."""
    import contextlib
    import types

    from dagster._core.storage.event_log.sqlite import sqlite_event_log as sqlite_log
    from sqlalchemy import create_engine
    from sqlalchemy.pool import StaticPool

    storage = instance.event_log_storage
    if type(storage) is not sqlite_log.SqliteEventLogStorage or getattr(storage, "_medhelm_engines", None) is not None:
        return instance
    if not all(hasattr(storage, a) for a in ("_connect", "_db_lock", "_initialized_dbs", "_initdb",
                                              "conn_string_for_shard", "has_table",
                                              "_has_asset_key_col_on_connection")):
        return instance  # another Dagster than the pinned one: its own connections, as they are
    engines: dict = {}

    @contextlib.contextmanager
    def connect(self, shard: str):
        with self._db_lock:  # one user of a shard's connection at a time, as Dagster's own
            engine = engines.get(shard)
            if engine is None:
                engine = engines[shard] = create_engine(
                    self.conn_string_for_shard(shard), poolclass=StaticPool,
                    connect_args={"timeout": sqlite_log.SQLITE_BUSY_TIMEOUT_SECONDS, "check_same_thread": False})
            if shard not in self._initialized_dbs:
                self._initdb(engine)
                self._initialized_dbs.add(shard)
            with engine.connect() as conn, conn.begin():
                yield conn

    # Dagster also asks the index database's schema on every event it stores: whether a table is
    # there (a new engine and connection each time) and the asset_keys columns. A table or column
    # that is there stays there (migrations only add), so a yes is remembered; a no is asked again.
    tables: set = set()
    columns: set = set()
    has_table, has_column = storage.has_table, storage._has_asset_key_col_on_connection

    def remembered_has_table(self, table_name: str) -> bool:
        if table_name not in tables and has_table(table_name):
            tables.add(table_name)
        return table_name in tables

    def remembered_has_column(self, conn, column_name: str) -> bool:
        if column_name not in columns and has_column(conn, column_name):
            columns.add(column_name)
        return column_name in columns

    storage._medhelm_engines = engines
    storage._connect = types.MethodType(connect, storage)
    storage.has_table = types.MethodType(remembered_has_table, storage)
    storage._has_asset_key_col_on_connection = types.MethodType(remembered_has_column, storage)
    return instance
