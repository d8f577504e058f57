"""Whether an imported target's leaderboard must be rebuilt: the fingerprint of everything its
rebuild reads (`leaderboard.rebuild_and_compare`), kept beside the comparison it gave.

A re-import that fetched nothing used to rebuild the whole leaderboard and its analytics again (10 s
for a full-size suite, for the same numbers). The fingerprint hashes, broadly on purpose:

* the target's import: its `published_targets` row (suites, the objects' data version), the
  manifest of every object taken from its source (version, size, status), and the summarize input
  rows of its local suites (`runs`, `run_stats`);
* the store's settings and data the analytics read (`analytics_settings`, `deployment_prices`, the
  clinicians' ratings in `human_ratings`);
* the code and its files: every file of the installed `medhelm_core` package (the SQL models, the
  schema, the settings and model metadata, the Python that runs them) and DuckDB's version;
* the user's file named by the environment (`$MEDHELM_REFUSAL_PATTERNS`) and every `MEDHELM_*`
  variable.

A rebuild runs whenever any of these differs (or files are to be written)."""
from __future__ import annotations

import hashlib
import os
from pathlib import Path

import duckdb

from medhelm_core.code_digest import code_digest

ENV_FILES = ("MEDHELM_REFUSAL_PATTERNS",)


def code_fingerprint() -> str:
    """The package's code digest (`medhelm_core.code_digest`) and DuckDB's version."""
    return hashlib.sha256(f"duckdb {duckdb.__version__}\n{code_digest()}".encode()).hexdigest()


def _environment() -> bytes:
    out = [f"{k}={v}" for k, v in sorted(os.environ.items()) if k.startswith("MEDHELM_")]
    for name in ENV_FILES:
        path = os.environ.get(name)
        if path and Path(path).is_file():
            out.append(f"{name}: {hashlib.sha256(Path(path).read_bytes()).hexdigest()}")
    return "\n".join(out).encode()


def _rows(conn: duckdb.DuckDBPyConnection, sql: str, params: list) -> bytes:
    """The query's rows as text in a fixed order, hashed."""
    got = conn.execute(f"SELECT count(*), md5(coalesce(string_agg(CAST(t AS VARCHAR), chr(10) "
                       f"ORDER BY CAST(t AS VARCHAR)), '')) FROM ({sql}) t", params).fetchone()
    return f"{got[0]} {got[1]}\n".encode()


def rebuild_fingerprint(conn: duckdb.DuckDBPyConnection, target: str) -> str:
    """The fingerprint of the target's rebuild inputs (see the module's doc); the store's tables
    are read through `conn`."""
    h = hashlib.sha256(code_fingerprint().encode())
    h.update(_environment())
    # (not when they were imported or fetched)
    h.update(_rows(conn, "SELECT target, mode, source, suites, local_suites, date, data_version"
                         " FROM published_targets WHERE target = ?", [target]))
    h.update(_rows(conn, "SELECT o.source, o.key, o.kind, o.version, o.size, o.status, o.error FROM published_objects o"
                         " JOIN published_targets t USING (source) WHERE t.target = ?", [target]))
    for table in ("runs", "run_stats"):
        h.update(_rows(conn, f"SELECT x.* FROM {table} x JOIN published_targets t"
                             f" ON list_contains(t.local_suites, x.suite) WHERE t.target = ?", [target]))
    for table in ("analytics_settings", "deployment_prices"):
        h.update(_rows(conn, f"SELECT * FROM {table}", []))
    # (what judge_agreement reads of them: not the question and answer texts)
    h.update(_rows(conn, "SELECT file_row, dataset_name, model_key, instance_id, accuracy, completeness, clarity "
                         "FROM human_ratings", []))
    return h.hexdigest()
