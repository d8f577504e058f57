"""SQL models: one `CREATE OR REPLACE TABLE <file stem> AS ...` per file in sql/.

Each file starts with `-- depends_on: a, b` comment lines naming the tables it reads.  Tables
that no file produces are inputs (runs, run_stats, summarize_target, schema_*, model_*), which
must exist before the models run.  `parse_sql_model` is shared with the Dagster asset factory.
"""
from __future__ import annotations

import re
from pathlib import Path
from typing import Iterable

import duckdb

from ..resources import SQL_DIR

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


def load_sql_models(sql_dir: str | Path = SQL_DIR) -> dict[str, tuple[list[str], str]]:
    models = {}
    for p in sorted(Path(sql_dir).glob("*.sql")):
        name, deps, sql = parse_sql_model(p)
        models[name] = (deps, sql)
    return models


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
