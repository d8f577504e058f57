"""Bulk-insert Python rows into DuckDB without pandas: one NDJSON file read by DuckDB's JSON reader.

(Importing pandas alone costs half a second, more than a whole tables-only import; DuckDB's
`executemany` and multi-row VALUES bind parameters one by one and are slower still.)
"""
from __future__ import annotations

import json
import os
import tempfile
from typing import Any, Iterable, Optional

import duckdb

from medhelm_core.store import sql_str


def _type_of(values: Iterable[Any]) -> str:
    kind = None
    for v in values:
        if v is None:
            continue
        if isinstance(v, bool):
            t = "BOOLEAN"
        elif isinstance(v, int):
            t = "BIGINT"
        elif isinstance(v, float):
            t = "DOUBLE"
        elif isinstance(v, (list, tuple)):
            t = "VARCHAR[]"
        else:
            t = "VARCHAR"
        if kind is None:
            kind = t
        elif kind != t:
            kind = "DOUBLE" if {kind, t} == {"BIGINT", "DOUBLE"} else "VARCHAR"
    return kind or "VARCHAR"


def insert_json_rows(conn: duckdb.DuckDBPyConnection, table: str, rows: list[dict[str, Any]], temp: bool = False,
                     columns: Optional[list[str]] = None) -> None:
    """Append `rows` (dicts) to `table`; with `temp`, (re)create `table` as a temporary table whose
    column types are inferred from the values.  JSON-typed columns take Python objects, not text."""
    if not rows:
        if temp:
            raise ValueError("insert_json_rows(temp=True) needs at least one row")
        return
    cols = columns or list(rows[0].keys())
    if temp:
        types = {c: _type_of(r.get(c) for r in rows) for c in cols}
    else:
        described = {name: typ for name, typ, *_ in conn.execute(f'DESCRIBE "{table}"').fetchall()}
        types = {c: described[c] for c in cols}
    fd, path = tempfile.mkstemp(suffix=".ndjson", prefix="medhelm-rows-")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            for r in rows:
                f.write(json.dumps({c: r.get(c) for c in cols}, ensure_ascii=False))
                f.write("\n")
        spec = ", ".join(f"{sql_str(c)}: {sql_str(t)}" for c, t in types.items())
        # DuckDB sizes its read buffer by maximum_object_size: no line is longer than the file
        limit = max(16 * 1024 * 1024, os.path.getsize(path) + 1024)
        select = (f"SELECT {', '.join(_q(c) for c in cols)} FROM read_json({sql_str(path)}, "
                  f"format = 'newline_delimited', columns = {{{spec}}}, maximum_object_size = {limit})")
        if temp:
            conn.execute(f'CREATE OR REPLACE TEMP TABLE "{table}" AS {select}')
        else:
            conn.execute(f'INSERT INTO "{table}" ({", ".join(_q(c) for c in cols)}) {select}')
    finally:
        os.unlink(path)


def _q(c: str) -> str:
    return '"' + c.replace('"', '""') + '"'
