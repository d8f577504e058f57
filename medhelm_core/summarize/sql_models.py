"""SQL models: one `CREATE OR REPLACE TABLE <file stem> AS ...` per file, in dbt's layers.

    sql/staging/       the target's runs, their groups, visibility, model resolution
    sql/intermediate/  column sets, table rows, matcher stats, win-rate columns
    sql/marts/         the leaderboard tables, index rows, costs
    sql/ddl/           not models: the tables the pipeline creates (medhelm_core.store)

Each file starts with `-- depends_on: a, b` comment lines naming the tables it reads. Tables that no
file produces are inputs (runs, run_stats, summarize_target, schema_*, model_*), which must exist
before the models run. Beside each `<name>.sql`, `<name>.yml` documents the model (dbt's
`models:` entry, one model a file):

    description: what one row is
    columns:
      - name: target
        description: ...
        tests: [not_null]           # data tests: not_null, unique (become Dagster asset checks)
    unit_tests:                     # given input rows -> expected output rows (run by the tests)
      - name: ...
        given: {input_table: [{col: value, ...}, ...]}
        expect: [{col: value, ...}]  # only the columns named are compared; as a set of rows unless
                                     # `ordered: true`

`parse_sql_model` and `load_model_docs` are shared with the Dagster asset factory.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable

import duckdb
from medhelm_core.yamlio import safe_load

from ..resources import SQL_DIR

SQL_LAYERS = ("staging", "intermediate", "marts", "analytics")
DATA_TESTS = ("not_null", "unique")

_DEPENDS = re.compile(r"^--\s*depends_on:\s*(.*)$", re.M)
_CREATE = re.compile(r"CREATE\s+OR\s+REPLACE\s+TABLE\s+\"?([A-Za-z_][A-Za-z0-9_]*)\"?\s+AS\b", re.I)


def parse_sql_model(path: str | Path) -> tuple[str, list[str], str]:
    """Return (table name = file stem, dependencies from the header, SQL text)."""
    path = Path(path)
    sql = path.read_text()
    deps: list[str] = []
    for line in sql.splitlines():
        if not line.strip():
            continue
        if not line.lstrip().startswith("--"):
            break
        m = _DEPENDS.match(line.strip())
        if m:
            deps.extend(d.strip() for d in m.group(1).split(",") if d.strip())
    name = path.stem
    created = _CREATE.findall(sql)
    if created != [name]:
        raise ValueError(f"{path}: must create exactly one table named {name!r}, found {created}")
    return name, list(dict.fromkeys(deps)), sql


def sql_model_files(sql_dir: str | Path = SQL_DIR) -> dict[str, Path]:
    """Model name -> its .sql file, layer by layer (staging, intermediate, marts)."""
    out: dict[str, Path] = {}
    for layer in SQL_LAYERS:
        for p in sorted((Path(sql_dir) / layer).glob("*.sql")):
            if p.stem in out:
                raise ValueError(f"{p}: SQL model {p.stem!r} is also defined in {out[p.stem]}")
            out[p.stem] = p
    return out


def load_sql_models(sql_dir: str | Path = SQL_DIR) -> dict[str, tuple[list[str], str]]:
    models = {}
    for path in sql_model_files(sql_dir).values():
        name, deps, sql = parse_sql_model(path)
        models[name] = (deps, sql)
    return models


@dataclass
class ColumnDoc:
    name: str
    description: str = ""
    tests: list[str] = field(default_factory=list)


@dataclass
class ModelDoc:
    """A model's sibling YAML: description, columns (with data tests) and unit tests."""

    name: str
    layer: str
    description: str = ""
    columns: list[ColumnDoc] = field(default_factory=list)
    unit_tests: list[dict[str, Any]] = field(default_factory=list)


def load_model_doc(sql_path: str | Path) -> ModelDoc:
    sql_path = Path(sql_path)
    yml = sql_path.with_suffix(".yml")
    doc = ModelDoc(sql_path.stem, sql_path.parent.name)
    if not yml.exists():
        return doc
    raw = safe_load(yml.read_text(encoding="utf-8")) or {}
    if not isinstance(raw, dict):
        raise ValueError(f"{yml}: must hold a mapping (description, columns, unit_tests)")
    doc.description = str(raw.get("description") or "").strip()
    for i, col in enumerate(raw.get("columns") or []):
        if not isinstance(col, dict) or "name" not in col:
            raise ValueError(f"{yml}: columns[{i}] needs a name")
        unknown = [t for t in col.get("tests") or [] if t not in DATA_TESTS]
        if unknown:
            raise ValueError(f"{yml}: column {col['name']}: unknown tests {unknown} (known: {', '.join(DATA_TESTS)})")
        doc.columns.append(ColumnDoc(col["name"], str(col.get("description") or "").strip(), list(col.get("tests") or [])))
    doc.unit_tests = list(raw.get("unit_tests") or [])
    return doc


def load_model_docs(sql_dir: str | Path = SQL_DIR) -> dict[str, ModelDoc]:
    return {name: load_model_doc(path) for name, path in sql_model_files(sql_dir).items()}


def data_test_sql(table: str, column: str, test: str) -> str:
    """A query returning the offending rows' count for a column's data test (0 = pass)."""
    if test == "not_null":
        return f'SELECT count(*) FROM "{table}" WHERE "{column}" IS NULL'
    if test == "unique":
        return f'SELECT count(*) FROM (SELECT "{column}" FROM "{table}" GROUP BY 1 HAVING count(*) > 1)'
    raise ValueError(f"unknown data test {test!r}")


def _quoted(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def run_unit_test(sql: str, case: dict[str, Any], prepare: Callable[[duckdb.DuckDBPyConnection], None]
                  ) -> tuple[list[dict], list[dict]]:
    """Run one model's SQL on a unit test's `given` rows in a scratch database; return (expected, got).

    `prepare(conn)` creates, empty and with their real types, every table a test may give rows for
    (the inputs from sql/ddl/ and the models' tables). A given row needs only the columns the test
    cares about; the others are NULL."""
    conn = duckdb.connect()
    try:
        prepare(conn)
        for table, rows in (case.get("given") or {}).items():
            types = dict(conn.execute("SELECT column_name, data_type FROM information_schema.columns "
                                      "WHERE table_name = ?", [table]).fetchall())
            if not types:
                raise ValueError(f"unit test {case.get('name')!r}: no table {table!r} to give rows for")
            for row in rows or []:
                unknown = [c for c in row if c not in types]
                if unknown:
                    raise ValueError(f"unit test {case.get('name')!r}: {table} has no column {unknown[0]!r}")
                cols = list(row)
                conn.execute(f"INSERT INTO {_quoted(table)} ({', '.join(map(_quoted, cols))}) "
                             f"VALUES ({', '.join('?' for _ in cols)})",
                             [json.dumps(row[c]) if types[c] == "JSON" else row[c] for c in cols])
        conn.execute(sql)
        expect = list(case.get("expect") or [])
        wanted = list(dict.fromkeys(c for row in expect for c in row))
        name = _CREATE.findall(sql)[0]
        got_rows = conn.execute(f"SELECT {', '.join(map(_quoted, wanted)) or '*'} FROM {_quoted(name)}").fetchall()
        got = [dict(zip(wanted, r)) for r in got_rows]
        if not case.get("ordered"):  # a model's table has no row order unless the test says so
            expect, got = sorted(expect, key=_row_key), sorted(got, key=_row_key)
        return expect, got
    finally:
        conn.close()


def _row_key(row: dict) -> list:
    return [repr(v) for v in row.values()]


def topological_order(models: dict[str, tuple[list[str], str]]) -> list[str]:
    """Dependency order (ties broken by name); dependencies outside `models` are inputs."""
    order: list[str] = []
    state: dict[str, int] = {}

    def visit(n: str, stack: tuple[str, ...]) -> None:
        if state.get(n) == 2:
            return
        if state.get(n) == 1:
            raise ValueError(f"dependency cycle: {' -> '.join(stack + (n,))}")
        state[n] = 1
        for d in sorted(models[n][0]):
            if d in models:
                visit(d, stack + (n,))
        state[n] = 2
        order.append(n)

    for n in sorted(models):
        visit(n, ())
    return order


def run_sql_models(conn: duckdb.DuckDBPyConnection, sql_dir: str | Path = SQL_DIR,
                   only: Iterable[str] | None = None) -> list[str]:
    """Execute the SQL models in dependency order; return the table names built."""
    models = load_sql_models(sql_dir)
    order = topological_order(models)
    if only is not None:
        wanted = set(only)
        order = [n for n in order if n in wanted]
    for name in order:
        try:
            conn.execute(models[name][1])
        except duckdb.Error as e:
            raise RuntimeError(f"SQL model {name} failed: {e}") from e
    return order
