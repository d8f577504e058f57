"""SQL models: one `CREATE OR REPLACE TABLE <file stem> AS ...` per file, in dbt's layers.

    sql/staging/       the target's runs, their groups, visibility, model resolution
    sql/intermediate/  column sets, table rows, matcher stats, win-rate columns
    sql/marts/         the leaderboard tables, index rows, costs
    sql/ddl/           not models: the tables the pipeline creates (medhelm_core.store)

Each file starts with `-- depends_on: a, b` comment lines naming the tables it reads, and the
header must say exactly what the SQL reads: `sql_reads` takes the tables from DuckDB's own parser
(`json_serialize_sql`, CTE names left out), and `parse_sql_model` refuses a model whose header names
a table it does not read or misses one it does (dbt derives the same edges from `ref()`). Tables that
no file produces are inputs (`INPUT_DDL`: runs, run_stats, summarize_target, schema_*, model_*, ...),
which must exist before the models run. Beside each `<name>.sql`, `<name>.yml` documents the model
(dbt's `models:` entry, one model a file; plain YAML, no anchors or aliases):

    description: what one row is
    columns:
      - name: target
        description: ...
        tests:                      # data tests (one Dagster asset check per model; `data_test_sql`)
          - not_null
          - unique
          - accepted_values: {values: [suite, release]}     # NULLs pass, as in dbt
          - relationships: {to: target_runs, field: run_id} # every non-NULL value is in to.field
    unit_tests:                     # given input rows -> expected output rows (run by the tests)
      - name: ...
        given: {input_table: [{col: value, ...}, ...]}
        expect: [{col: value, ...}]  # only the columns named are compared; as a set of rows unless
                                     # `ordered: true`

`parse_sql_model` and `load_model_docs` are shared with the Dagster asset factory.
"""
from __future__ import annotations

import functools
import json
import os
import re
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable

import duckdb
from medhelm_core.yamlio import safe_load

from ..resources import SQL_DIR, ddl

SQL_LAYERS = ("staging", "intermediate", "marts", "analytics")
DATA_TESTS = ("not_null", "unique", "accepted_values", "relationships")
INPUT_DDL = ("summarize_inputs", "summarize_schema", "model_metadata")  # sql/ddl/ files of the models' inputs

_DEPENDS = re.compile(r"^--\s*depends_on:\s*(.*)$", re.M)
_CREATE = re.compile(r"CREATE\s+OR\s+REPLACE\s+TABLE\s+\"?([A-Za-z_][A-Za-z0-9_]*)\"?\s+AS\b", re.I)


_PARSER_LOCK = threading.Lock()
_PARSER: dict[int, duckdb.DuckDBPyConnection] = {}  # pid -> a scratch connection (one costs ~50 ms)


@functools.lru_cache(maxsize=None)
def _parse_query(query: str) -> dict:
    with _PARSER_LOCK:
        conn = _PARSER.get(os.getpid())
        if conn is None:  # none yet in this process (one inherited through fork() is left alone)
            conn = _PARSER[os.getpid()] = duckdb.connect()
        tree = json.loads(conn.execute("SELECT json_serialize_sql(?)", [query]).fetchone()[0])
    if tree.get("error"):
        raise ValueError(tree.get("error_message") or "DuckDB could not parse the query")
    return tree


def sql_reads(sql: str) -> list[str]:
    """The tables a model's SQL reads (sorted), from DuckDB's parser: every base table referenced
    after its `CREATE OR REPLACE TABLE <name> AS`, in FROM, JOIN, subqueries and CTE bodies, less the
    CTEs in scope where it is referenced (as DuckDB binds them: a CTE sees the ones before it in its
    WITH, and itself only when recursive). A schema-qualified name reads `schema.name`."""
    m = _CREATE.search(sql)
    if m is None:
        raise ValueError("no CREATE OR REPLACE TABLE <name> AS")
    reads: set[str] = set()

    def walk(node: Any, ctes: frozenset[str]) -> None:
        if isinstance(node, list):
            for value in node:
                walk(value, ctes)
            return
        if not isinstance(node, dict):
            return
        if node.get("type") == "RECURSIVE_CTE_NODE" and node.get("cte_name"):
            ctes = ctes | {node["cte_name"]}
        if node.get("type") == "BASE_TABLE" and "table_name" in node:
            table, schema = node["table_name"], node.get("schema_name") or ""
            if schema or table not in ctes:
                reads.add(f"{schema}.{table}" if schema else table)
        entries = (node.get("cte_map") or {}).get("map") or []
        for i, entry in enumerate(entries):  # each CTE body sees the CTEs before it
            walk(entry["value"], ctes | {e["key"] for e in entries[:i]})
        ctes = ctes | {e["key"] for e in entries}
        for key, value in node.items():
            if key != "cte_map":
                walk(value, ctes)

    walk(_parse_query(sql[m.end():]), frozenset())
    return sorted(reads)


def dependency_problems(name: str, declared: Iterable[str], sql: str) -> list[str]:
    """How a model's `-- depends_on:` header differs from the tables its SQL reads (empty: none)."""
    declared, read = set(declared), set(sql_reads(sql))
    return ([f"{name} reads {t}, which its -- depends_on: header does not name" for t in sorted(read - declared)]
            + [f"{name}'s -- depends_on: header names {t}, which its SQL does not read"
               for t in sorted(declared - read)])


def create_input_tables(conn: duckdb.DuckDBPyConnection) -> None:
    """The models' input tables (`INPUT_DDL`), created empty if absent."""
    for name in INPUT_DDL:
        conn.execute(ddl(name))


@functools.lru_cache(maxsize=1)
def input_tables() -> frozenset[str]:
    """Names of the models' input tables, as `INPUT_DDL` creates them."""
    conn = duckdb.connect()
    try:
        create_input_tables(conn)
        return frozenset(r[0] for r in conn.execute("SELECT table_name FROM information_schema.tables").fetchall())
    finally:
        conn.close()


def model_problems(sql_dir: str | Path = SQL_DIR) -> list[str]:
    """Every model's dependency problems: header vs. SQL (`dependency_problems`), tables read that
    are neither a model nor an input (`input_tables`), and cycles. Empty when the models are sound."""
    problems: list[str] = []
    models: dict[str, tuple[list[str], str]] = {}
    for name, path in sql_model_files(sql_dir).items():
        try:
            _, deps, sql = _read_sql_model(path)
            problems += dependency_problems(name, deps, sql)
        except ValueError as e:
            problems.append(f"{name}: {e}")
            continue
        models[name] = (deps, sql)
    known = set(models) | input_tables()
    for name, (deps, _) in models.items():
        problems += [f"{name} reads {d}, which is neither a SQL model nor an input table (sql/ddl/)"
                     for d in deps if d not in known]
    try:
        topological_order(models)
    except ValueError as e:
        problems.append(str(e))
    return problems


def parse_sql_model(path: str | Path) -> tuple[str, list[str], str]:
    """Return (table name = file stem, dependencies from the header, SQL text); a ValueError when the
    header does not name exactly the tables the SQL reads (`dependency_problems`)."""
    name, deps, sql = _read_sql_model(path)
    problems = dependency_problems(name, deps, sql)
    if problems:
        raise ValueError(f"{path}: " + "; ".join(problems))
    return name, deps, sql


def _read_sql_model(path: str | Path) -> tuple[str, list[str], str]:
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
    before = sql[:_CREATE.search(sql).start()]
    if any(line.strip() and not line.lstrip().startswith("--") for line in before.splitlines()):
        raise ValueError(f"{path}: only comments may come before CREATE OR REPLACE TABLE {name} AS")
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


class DataTest(str):
    """A column's data test: the string is its kind (`DATA_TESTS`), `args` its arguments, as the
    YAML gives them: `- not_null`, `- accepted_values: {values: [a, b]}`,
    `- relationships: {to: model, field: column}`. (A string, so that code that names a check by
    its kind, as the Dagster asset factory does, needs nothing more.)"""

    args: dict[str, Any]

    def __new__(cls, kind: str, args: dict[str, Any] | None = None) -> "DataTest":
        test = super().__new__(cls, kind)
        test.args = dict(args or {})
        return test

    @classmethod
    def parse(cls, raw: Any, where: str) -> "DataTest":
        if isinstance(raw, str):
            kind, args = raw, {}
        elif isinstance(raw, dict) and len(raw) == 1:
            (kind, args), = raw.items()
            args = args if args is not None else {}
        else:
            raise ValueError(f"{where}: a test is a name or a mapping {{name: {{arguments}}}}, not {raw!r}")
        if kind not in DATA_TESTS:
            raise ValueError(f"{where}: unknown tests [{kind!r}] (known: {', '.join(DATA_TESTS)})")
        if not isinstance(args, dict):
            raise ValueError(f"{where}: {kind}'s arguments must be a mapping, not {args!r}")
        wanted = {"not_null": set(), "unique": set(), "accepted_values": {"values"},
                  "relationships": {"to", "field"}}[kind]
        if set(args) != wanted:
            raise ValueError(f"{where}: {kind} takes {', '.join(sorted(wanted)) or 'no arguments'}, "
                             f"got {', '.join(sorted(args)) or 'none'}")
        if kind == "accepted_values" and not (isinstance(args["values"], list) and args["values"]):
            raise ValueError(f"{where}: accepted_values needs a non-empty list of values")
        if kind == "relationships" and not all(isinstance(args[k], str) and args[k] for k in ("to", "field")):
            raise ValueError(f"{where}: relationships needs a table name `to` and a column name `field`")
        return cls(kind, args)


@dataclass
class ColumnDoc:
    name: str
    description: str = ""
    tests: list[DataTest] = field(default_factory=list)


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
        tests = [DataTest.parse(t, f"{yml}: column {col['name']}") for t in col.get("tests") or []]
        doc.columns.append(ColumnDoc(col["name"], str(col.get("description") or "").strip(), tests))
    doc.unit_tests = list(raw.get("unit_tests") or [])
    return doc


def load_model_docs(sql_dir: str | Path = SQL_DIR) -> dict[str, ModelDoc]:
    return {name: load_model_doc(path) for name, path in sql_model_files(sql_dir).items()}


def data_test_sql(table: str, column: str, test: str) -> str:
    """A query returning the offending rows' count for a column's data test (0 = pass). `test` is a
    `DataTest` (a plain string for the tests without arguments). As in dbt, NULLs pass
    accepted_values and relationships (not_null is the test for them)."""
    t, c = _quoted(table), _quoted(column)
    if test == "not_null":
        return f"SELECT count(*) FROM {t} WHERE {c} IS NULL"
    if test == "unique":
        return f"SELECT count(*) FROM (SELECT {c} FROM {t} GROUP BY 1 HAVING count(*) > 1)"
    args = getattr(test, "args", None)
    if test == "accepted_values" and args:
        return (f"SELECT count(*) FROM {t} WHERE {c} IS NOT NULL AND {c} NOT IN "
                f"({', '.join(map(_literal, args['values']))})")
    if test == "relationships" and args:
        return (f"SELECT count(*) FROM {t} AS child WHERE child.{c} IS NOT NULL AND NOT EXISTS "
                f"(SELECT 1 FROM {_quoted(args['to'])} AS parent WHERE parent.{_quoted(args['field'])} = child.{c})")
    raise ValueError(f"unknown data test {test!r}" + (" (or its arguments are missing)" if test in DATA_TESTS else ""))


def _literal(value: Any) -> str:
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, str):
        return "'" + value.replace("'", "''") + "'"
    raise ValueError(f"accepted_values: {value!r} is not a string, number or boolean")


def run_data_tests(conn: duckdb.DuckDBPyConnection, docs: dict[str, ModelDoc] | None = None
                   ) -> dict[tuple[str, str, str], int]:
    """Run every documented column's data tests on the models' tables in `conn`; return the failing
    ones, (model, column, test) -> offending rows (-1: the table has no such column, or the table a
    relationship points to has no such column)."""
    failing: dict[tuple[str, str, str], int] = {}
    columns: dict[str, set[str]] = {}
    for table, column in conn.execute("SELECT table_name, column_name FROM information_schema.columns "
                                      "WHERE table_schema = current_schema() "
                                      "AND table_catalog = current_database()").fetchall():
        columns.setdefault(table, set()).add(column)
    for name, doc in (load_model_docs() if docs is None else docs).items():
        have = columns.get(name, set())
        for col in doc.columns:
            for test in col.tests:
                args = getattr(test, "args", {})
                runnable = col.name in have and (test != "relationships" or args["field"] in columns.get(args["to"], ()))
                bad = conn.execute(data_test_sql(name, col.name, test)).fetchone()[0] if runnable else -1
                if bad:
                    failing[(name, col.name, data_test_label(test))] = bad
    return failing


def data_test_label(test: str) -> str:
    """A data test as a check names it: `unique`, `relationships(to.field)`, `accepted_values(a, b)`."""
    args = getattr(test, "args", None)
    if test == "relationships" and args:
        return f"relationships({args['to']}.{args['field']})"
    if test == "accepted_values" and args:
        return f"accepted_values({', '.join(map(str, args['values']))})"
    return str(test)


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
                   only: Iterable[str] | None = None,
                   models: dict[str, tuple[list[str], str]] | None = None) -> list[str]:
    """Execute the SQL models (those of `sql_dir`, or `models` as `load_sql_models` gives them) in
    dependency order; return the table names built."""
    models = models if models is not None else load_sql_models(sql_dir)
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
