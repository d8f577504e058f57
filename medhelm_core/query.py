"""SQL on a medhelm DuckDB file, read-only, with the DuckDB the project runs on.

    .venv/bin/python -m medhelm_core.query benchmark_output/medhelm.duckdb "SELECT * FROM run_costs"
    .venv/bin/python -m medhelm_core.query benchmark_output/medhelm.duckdb < query.sql
    .venv/bin/python -m medhelm_core.query benchmark_output/medhelm.duckdb        # type statements, end with ;
    .venv-ducklake/bin/python -m medhelm_core.query "ducklake:postgresql://…?data_path=DIR" "SELECT …"

The first argument is a DuckDB file, or a storage URL (medhelm_core.storage: duckdb:PATH, or a
shared DuckLake, attached read-only).

PyPI's DuckDB command line (`duckdb-cli`) lags the Python package by a storage version (1.5.x
cannot open a file written by DuckDB 2.0), so this is the way to the file that always matches;
results print as DuckDB's own box tables. Read-only: it never blocks a running pipeline's writes
for longer than a query, and never changes the file.
"""
from __future__ import annotations

import sys
from pathlib import Path

import duckdb

from medhelm_core.errors import MedhelmError
from medhelm_core.storage import open_ducklake, parse_storage


def _statements(text: str) -> list[str]:
    return [s.strip() for s in text.split(";") if s.strip()]


def run(conn: duckdb.DuckDBPyConnection, sql: str, out=sys.stdout) -> None:
    for statement in _statements(sql):
        rel = conn.sql(statement)
        if rel is not None:  # a query (DuckDB elides the middle rows of a long result)
            print(rel, file=out)


def _connect(target: str) -> duckdb.DuckDBPyConnection:
    """A read-only connection to a DuckDB file, or to the store a storage URL names."""
    if target.startswith(("duckdb:", "ducklake:")):
        storage = parse_storage(target, "the store")
        if storage.kind == "ducklake":
            return open_ducklake(storage, read_only=True)
        target = str(storage.path)
    db = Path(target)
    if not db.is_file():
        raise MedhelmError(f"{db} does not exist")
    try:
        return duckdb.connect(str(db), read_only=True)
    except duckdb.Error as e:
        raise MedhelmError(f"{db}: {str(e).splitlines()[0]}") from None


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if not args or args[0] in ("-h", "--help"):
        print(__doc__.strip().splitlines()[0] + "\nusage: python -m medhelm_core.query DB_FILE|STORAGE_URL [SQL]", file=sys.stderr)
        return 0 if args else 2
    try:
        conn = _connect(args[0])
    except (MedhelmError, duckdb.Error) as e:
        print(f"medhelm-query: error: {str(e).splitlines()[0]}", file=sys.stderr)
        return 2
    try:
        if len(args) > 1:
            run(conn, " ".join(args[1:]))
        elif not sys.stdin.isatty():
            run(conn, sys.stdin.read())
        else:
            buffer = ""
            while True:
                try:
                    line = input("D " if not buffer else "· ")
                except EOFError:
                    print()
                    return 0
                buffer += line + "\n"
                if buffer.rstrip().endswith(";"):
                    try:
                        run(conn, buffer)
                    except duckdb.Error as e:
                        print(f"Error: {e}")
                    buffer = ""
    except duckdb.Error as e:
        print(f"medhelm-query: error: {str(e).splitlines()[0]}", file=sys.stderr)
        return 1
    finally:
        conn.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
