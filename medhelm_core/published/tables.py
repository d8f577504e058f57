"""DuckDB tables of the published-results import (all in `<output-path>/medhelm.duckdb`).

A *target* is what was imported: a release (`releases/<R>/`, summarized from several suites) or
a suite summarized on its own (`runs/<S>/`).  Published suites keep their names in the
`published_*` tables; in the summarize input tables (`runs`, `run_stats`) they appear under
`published_suites.local_suite` (= the published name unless `--suite-prefix` was given).
"""
from __future__ import annotations

import os
from contextlib import contextmanager
from typing import Iterator

import duckdb

from medhelm_core.resources import ddl
from medhelm_core.storage import run_ddl
from medhelm_core.store import store_memory_limit

# The type of one stat in per_instance_stats.json as read_json sees it (also in sql/ddl/published.sql).
STAT_STRUCT = ("STRUCT(name STRUCT(name VARCHAR, split VARCHAR, sub_split VARCHAR, perturbation JSON), "
               "count BIGINT, sum DOUBLE, sum_squared DOUBLE, min DOUBLE, max DOUBLE, mean DOUBLE, "
               "variance DOUBLE, stddev DOUBLE)")


TABLE_DOCS = {
    "published_objects": "import manifest: source, key, kind, version, size, status (ok/corrupt), error",
    "published_targets": "imported releases/suites: target, mode, source, suites, local_suites, date",
    "published_suites": "published suite → local_suite (its name in runs/run_stats)",
    "published_documents": "release-level JSON files as published",
    "published_runs": "one row per published run directory (run_spec.json)",
    "published_run_stats": "stats.json rows (columns as run_stats)",
    "published_instance_entries": "per_instance_stats.json entries (stats as a list)",
    "published_instance_stats": "view: one row per per-instance stat",
    "published_request_states": "scenario_state.json request states as published (--with-completions)",
    "published_completions": "view: one row per request state with prompt and completion",
    "published_annotations": "view: one row per request state and annotator",
    "published_leaderboard_cells": "every cell of groups/<group>.json as published",
    "published_problems": "corrupt or missing objects of the last import of a target",
    "leaderboard_comparison": "published vs rebuilt cell by cell",
    "published_rebuilds": "each target's last rebuild: the fingerprint of its inputs and its comparison summary",
    "rescore_comparison": "published per-instance/run stats vs our metrics on the published completions",
}


# DuckDB's memory while importing and rebuilding (it would otherwise keep up to 80% of RAM of parsed
# JSON and written blocks, and the analytics of a full-size rebuild took it to twice this)
IMPORT_MEMORY_LIMIT = os.environ.get("MEDHELM_IMPORT_MEMORY_LIMIT", "512MB")


def bound_memory(conn: duckdb.DuckDBPyConnection) -> None:
    """Hold DuckDB to IMPORT_MEMORY_LIMIT (a setting of the whole database: `unbound_memory` after)."""
    conn.execute(f"SET memory_limit = '{IMPORT_MEMORY_LIMIT}'")


def unbound_memory(conn: duckdb.DuckDBPyConnection) -> None:
    """The store's memory limit again, for whatever else uses a database kept open."""
    conn.execute(f"SET memory_limit = '{store_memory_limit()}'")


@contextmanager
def memory_bound(conn: duckdb.DuckDBPyConnection) -> Iterator[duckdb.DuckDBPyConnection]:
    bound_memory(conn)
    try:
        yield conn
    except BaseException:
        try:
            unbound_memory(conn)
        except Exception:   # (the failure that got here is the one to report)
            pass
        raise
    unbound_memory(conn)


def ensure_published_tables(conn: duckdb.DuckDBPyConnection) -> None:
    """Create the tables and views above (sql/ddl/published.sql) if they do not exist."""
    run_ddl(conn, ddl("published"))
