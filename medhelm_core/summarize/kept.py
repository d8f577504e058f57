"""Every target's leaderboard, kept side by side: schema `leaderboard`, one table per SQL model,
with a leading `target` column (the suite, or the release, that was summarized).

The SQL models build one target at a time (`CREATE OR REPLACE TABLE` in the working schema, which
the page and HELM's files read). After each build its rows replace that target's rows here, so the
main job's release, the example suite and an imported published release can be queried together:

    SELECT target, count(*) FROM leaderboard.table_cells GROUP BY target;
"""
from __future__ import annotations

import logging

import duckdb

from medhelm_core.resources import ddl
from medhelm_core.summarize.sql_models import load_sql_models

log = logging.getLogger(__name__)

KEPT_SCHEMA = "leaderboard"


def _columns(conn: duckdb.DuckDBPyConnection, database: str, schema: str, table: str) -> list[tuple[str, str]]:
    return conn.execute("SELECT column_name, data_type FROM information_schema.columns WHERE table_catalog = ?"
                        " AND table_schema = ? AND table_name = ? ORDER BY ordinal_position",
                        [database, schema, table]).fetchall()


def keep_target_tables(conn: duckdb.DuckDBPyConnection, target: str, tables: list[str],
                       source_db: str | None = None, dest_db: str | None = None) -> int:
    """Replace `target`'s rows in `leaderboard.<table>` with the working tables' rows (inside the
    caller's transaction, if any); returns the rows kept. A table whose columns changed (new SQL)
    gains the new columns; one whose column types changed is rebuilt from this target alone."""
    current = conn.execute("SELECT current_database()").fetchone()[0]
    src_db, dst_db = source_db or current, dest_db or current
    conn.execute(f'CREATE SCHEMA IF NOT EXISTS "{dst_db}".{KEPT_SCHEMA}')
    kept = 0
    for name in tables:
        src = f'"{src_db}".main."{name}"'
        dst = f'"{dst_db}".{KEPT_SCHEMA}."{name}"'
        have = dict(_columns(conn, dst_db, KEPT_SCHEMA, name))
        want = _columns(conn, src_db, "main", name)
        if have and any(c in have and have[c] != t for c, t in want):
            log.info("leaderboard.%s: column types changed; kept rows of other targets dropped", name)
            conn.execute(f"DROP TABLE {dst}")
            have = {}
        rest = "* EXCLUDE (target)" if any(c == "target" for c, _ in want) else "*"  # ours comes first
        if not have:
            conn.execute(f"CREATE TABLE {dst} AS SELECT CAST(NULL AS VARCHAR) AS target, {rest} FROM {src} LIMIT 0")
        else:
            for column, dtype in want:
                if column not in have and column != "target":
                    conn.execute(f'ALTER TABLE {dst} ADD COLUMN "{column}" {dtype}')
        conn.execute(f"DELETE FROM {dst} WHERE target = ?", [target])
        conn.execute(f"INSERT INTO {dst} BY NAME SELECT ? AS target, {rest} FROM {src}", [target])
        kept += conn.execute(f"SELECT count(*) FROM {dst} WHERE target = ?", [target]).fetchone()[0]
    return kept


def keep_current_target(conn: duckdb.DuckDBPyConnection) -> tuple[str, int]:
    """Keep the tables of the target the SQL models were just built for (`summarize_target`)."""
    target = conn.execute("SELECT DISTINCT target FROM summarize_target").fetchone()[0]
    kept = keep_target_tables(conn, target, list(load_sql_models()))
    for views in ("editions", "edition_cells"):  # over runs/run_stats and the kept tables, which exist from now on
        conn.execute(ddl(views))
    return target, kept
