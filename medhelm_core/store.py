"""The DuckDB file every layer lives in, and the write discipline around it.

DuckDB allows one read-write process at a time, so writers take a file lock and keep their
connections short. Every per-run layer is replaced inside one transaction (delete the run's
rows, insert the new ones, commit), so a failure never leaves a half-written run behind.
Completions are the exception by design: each answer is durable the moment it arrives (the
engine's answer journal, `journal.py`, folded into `completions` in batches), content-addressed by
(deployment, request), so a crash loses nothing and a rerun asks only for what is missing.
"""
from __future__ import annotations

import hashlib
import json
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

import duckdb
import filelock

from medhelm_core import journal

DB_FILENAME = "medhelm.duckdb"

DDL = [
    # What each suite asked for: one row per run (HELM run name = run directory name).
    """CREATE TABLE IF NOT EXISTS run_entries (
        suite VARCHAR, run_name VARCHAR, description VARCHAR, priority INTEGER, conf_path VARCHAR,
        tier VARCHAR, scenario_key VARCHAR, model VARCHAR, model_deployment VARCHAR,
        run_spec JSON, requested_at TIMESTAMP DEFAULT current_timestamp,
        PRIMARY KEY (suite, run_name))""",
    # The scenario specs the registered runs use: one dataset partition each.
    """CREATE TABLE IF NOT EXISTS scenario_specs (
        partition_key VARCHAR PRIMARY KEY, tier VARCHAR, scenario_spec JSON, scenario_key VARCHAR,
        content_hash VARCHAR, registered_at TIMESTAMP DEFAULT current_timestamp)""",
    # Datasets: the instance list of one scenario spec (class + args + data-file contents).
    """CREATE TABLE IF NOT EXISTS datasets (
        scenario_key VARCHAR PRIMARY KEY, class_name VARCHAR, args JSON, tier VARCHAR,
        content_hash VARCHAR, num_instances INTEGER, scenario JSON, scenario_metadata JSON,
        built_at TIMESTAMP DEFAULT current_timestamp)""",
    """CREATE TABLE IF NOT EXISTS instances (
        scenario_key VARCHAR, position INTEGER, instance_id VARCHAR, split VARCHAR, instance JSON,
        PRIMARY KEY (scenario_key, position))""",
    # Requests (prompts) of a run, in HELM's order; request_key addresses the completion.
    """CREATE TABLE IF NOT EXISTS requests (
        suite VARCHAR, run_name VARCHAR, position INTEGER, instance_id VARCHAR, split VARCHAR,
        train_trial_index INTEGER, request_key VARCHAR, model_deployment VARCHAR, prompt VARCHAR,
        request_state JSON, PRIMARY KEY (suite, run_name, position))""",
    # Every model or judge answer ever paid for, keyed by sha256(deployment, request).
    """CREATE TABLE IF NOT EXISTS completions (
        request_key VARCHAR PRIMARY KEY, model_deployment VARCHAR, model VARCHAR, request JSON,
        result JSON, success BOOLEAN, attempts INTEGER, completed_at TIMESTAMP DEFAULT current_timestamp)""",
    """CREATE TABLE IF NOT EXISTS completion_errors (
        request_key VARCHAR, model_deployment VARCHAR, error VARCHAR, attempts INTEGER,
        failed_at TIMESTAMP DEFAULT current_timestamp)""",
    # The jury: HELM's annotation per request state, and an explicit verdict per judge.
    """CREATE TABLE IF NOT EXISTS annotations (
        suite VARCHAR, run_name VARCHAR, position INTEGER, instance_id VARCHAR, annotator VARCHAR,
        annotation JSON, PRIMARY KEY (suite, run_name, position, annotator))""",
    """CREATE TABLE IF NOT EXISTS judge_verdicts (
        suite VARCHAR, run_name VARCHAR, position INTEGER, instance_id VARCHAR, annotator VARCHAR,
        judge VARCHAR, judge_deployment VARCHAR, status VARCHAR, request_key VARCHAR,
        raw_text VARCHAR, parsed JSON, error VARCHAR,
        PRIMARY KEY (suite, run_name, position, annotator, judge))""",
    # Per-instance stats as HELM writes per_instance_stats.json, one row per Stat.
    """CREATE TABLE IF NOT EXISTS instance_stats (
        suite VARCHAR, run_name VARCHAR, instance_id VARCHAR, train_trial_index INTEGER,
        ordinal INTEGER, name VARCHAR, split VARCHAR, sub_split VARCHAR, perturbation JSON,
        count BIGINT, sum DOUBLE, sum_squared DOUBLE, min DOUBLE, max DOUBLE, mean DOUBLE,
        variance DOUBLE, stddev DOUBLE)""",
    # The jury score with judge failures left out instead of HELM's silent default.
    """CREATE TABLE IF NOT EXISTS jury_scores (
        suite VARCHAR, run_name VARCHAR, instance_id VARCHAR, metric VARCHAR,
        helm_value DOUBLE, corrected_value DOUBLE, judges_ok INTEGER, judges_total INTEGER,
        PRIMARY KEY (suite, run_name, instance_id, metric))""",
]


# Additive changes, applied to new and old files alike (old DBs keep working; old rows get NULLs).
MIGRATIONS = [
    # Token usage the API reported, the cost at the price then in force, and what the outcome was:
    # `ok`, or `content_filter` (HELM's non-fatal empty completion, stored so it is not paid twice).
    "ALTER TABLE completions ADD COLUMN IF NOT EXISTS prompt_tokens BIGINT",
    "ALTER TABLE completions ADD COLUMN IF NOT EXISTS completion_tokens BIGINT",
    "ALTER TABLE completions ADD COLUMN IF NOT EXISTS usage JSON",
    "ALTER TABLE completions ADD COLUMN IF NOT EXISTS cost_usd DOUBLE",
    "ALTER TABLE completions ADD COLUMN IF NOT EXISTS outcome VARCHAR",
    # rate_limited / server_error / timeout / connection (retries exhausted), fatal, fatal_endpoint.
    "ALTER TABLE completion_errors ADD COLUMN IF NOT EXISTS kind VARCHAR",
    # Requests being asked right now, so that two processes never ask the same one: a claim whose
    # owner process is gone (or silent for longer than the lease) is taken over.
    """CREATE TABLE IF NOT EXISTS completion_claims (
        request_key VARCHAR PRIMARY KEY, owner VARCHAR, heartbeat DOUBLE)""",
]


# The columns of a `completions` row, in the order the engine and its answer journal write them.
COMPLETION_COLUMNS = ["request_key", "model_deployment", "model", "request", "result", "success", "attempts",
                      "prompt_tokens", "completion_tokens", "usage", "cost_usd", "outcome"]


def request_key(deployment: str, request: dict) -> str:
    payload = json.dumps({"deployment": deployment, "request": request}, sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()


def stable_hash(obj: Any) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True, ensure_ascii=False).encode("utf-8")).hexdigest()


class Store:
    """Short-lived, file-locked connections to `<output_path>/medhelm.duckdb`."""

    def __init__(self, path: str | Path, lock_timeout_s: float = 600.0):
        self.path = Path(path)
        self.lock = filelock.FileLock(str(self.path) + ".lock", timeout=lock_timeout_s)
        self._initialised = False

    @classmethod
    def in_output_path(cls, output_path: str | Path) -> "Store":
        """The store of an output folder; the folder is made only when something is first written."""
        return cls(Path(output_path) / DB_FILENAME)

    @contextmanager
    def connect(self, read_only: bool = False) -> Iterator[duckdb.DuckDBPyConnection]:
        if not read_only:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        with self.lock:
            conn = duckdb.connect(str(self.path), read_only=read_only)
            try:
                if not self._initialised and not read_only:
                    for ddl in DDL + MIGRATIONS:
                        conn.execute(ddl)
                    from medhelm_core.costs import COST_DDL

                    from medhelm_core.summarize.tables import ensure_input_tables

                    ensure_input_tables(conn)
                    for ddl in COST_DDL:
                        conn.execute(ddl)
                    self._initialised = True
                    self._recover_answers(conn)
                yield conn
            finally:
                conn.close()

    def recover_answers(self) -> None:
        """Fold in the answers that engines which have since ended journaled but never committed
        (a directory listing when there are none)."""
        if journal.orphan_segments(self.path):
            with self.connect() as conn:
                self._recover_answers(conn)

    def _recover_answers(self, conn: duckdb.DuckDBPyConnection) -> None:
        with in_transaction(conn):
            done = replay_answers(conn, self.path)
        journal.remove(done)

    @contextmanager
    def transaction(self) -> Iterator[duckdb.DuckDBPyConnection]:
        with self.connect() as conn, in_transaction(conn):
            yield conn


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
    """`completions` rows (COMPLETION_COLUMNS order); an answer already there is kept."""
    insert_values(conn, "completions", COMPLETION_COLUMNS, [tuple(r) for r in rows], or_ignore=True)


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
    """Bulk insert (DuckDB's executemany runs one statement per row, far too slow for stats)."""
    if not rows:
        return
    import pandas as pd

    frame = pd.DataFrame.from_records(rows, columns=columns)
    conn.register("_medhelm_rows", frame)
    try:
        cols = ", ".join(columns)
        verb = "INSERT OR IGNORE" if or_ignore else "INSERT"
        conn.execute(f"{verb} INTO {table} ({cols}) SELECT {cols} FROM _medhelm_rows")
    finally:
        conn.unregister("_medhelm_rows")
