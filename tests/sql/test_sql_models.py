"""The SQL models' layers and sibling YAML docs: every model is documented column by column, the
documented columns are the table's, and the YAML unit tests (given rows -> expected rows) hold."""
import duckdb
import pytest

from medhelm_core.resources import ddl
from medhelm_core.summarize.sql_models import (SQL_LAYERS, data_test_sql, load_model_docs, run_sql_models,
                                               run_unit_test, sql_model_files)

DOCS = load_model_docs()


def _inputs(conn: duckdb.DuckDBPyConnection) -> None:
    """The models' input tables, empty, with their real DDL."""
    for name in ("summarize_inputs", "summarize_schema", "model_metadata"):
        conn.execute(ddl(name))


def _every_table(conn: duckdb.DuckDBPyConnection) -> None:
    """The inputs and every model's table, empty and with their real types (a unit test's given rows
    go into them)."""
    _inputs(conn)
    run_sql_models(conn)


def test_models_live_in_their_layers():
    files = sql_model_files()
    assert {p.parent.name for p in files.values()} == set(SQL_LAYERS)
    assert len(files) == 32
    assert DOCS["model_summary"].layer == "analytics"
    assert DOCS["target_runs"].layer == "staging" and DOCS["table_cells"].layer == "marts"


def test_every_model_documents_exactly_its_columns():
    conn = duckdb.connect()
    _inputs(conn)
    built = run_sql_models(conn)
    assert set(built) == set(DOCS)
    for name, doc in DOCS.items():
        assert doc.description, f"{name}.yml has no description"
        actual = [r[0] for r in conn.execute("SELECT column_name FROM information_schema.columns WHERE table_name = ? "
                                             "ORDER BY ordinal_position", [name]).fetchall()]
        assert [c.name for c in doc.columns] == actual, name
        assert all(c.description for c in doc.columns), name


CASES = [(name, case) for name, doc in DOCS.items() for case in doc.unit_tests]


@pytest.mark.parametrize("name,case", CASES, ids=[f"{n}: {c['name']}" for n, c in CASES])
def test_unit_tests_of_the_models(name, case):
    sql = sql_model_files()[name].read_text()
    expect, got = run_unit_test(sql, case, _every_table)
    assert got == expect


def test_unit_tests_exist():
    assert CASES, "no SQL unit tests found"


def test_data_tests_count_the_offending_rows():
    conn = duckdb.connect()
    conn.execute("CREATE TABLE t AS SELECT * FROM (VALUES (1, 'a'), (1, NULL), (2, 'b')) v(k, x)")
    assert conn.execute(data_test_sql("t", "x", "not_null")).fetchone()[0] == 1
    assert conn.execute(data_test_sql("t", "k", "unique")).fetchone()[0] == 1
    assert conn.execute(data_test_sql("t", "x", "unique")).fetchone()[0] == 0
    checked = [(n, c.name, t) for n, d in DOCS.items() for c in d.columns for t in c.tests]
    assert ("target_runs", "run_id", "unique") in checked and len(checked) > 100


def test_a_unit_test_naming_a_column_or_table_that_does_not_exist_is_an_error():
    sql = sql_model_files()["cost_report"].read_text()
    with pytest.raises(ValueError, match="run_stats has no column 'sums'"):
        run_unit_test(sql, {"name": "typo", "given": {"run_stats": [{"sums": 1.0}]}}, _every_table)
    with pytest.raises(ValueError, match="no table 'run_statz'"):
        run_unit_test(sql, {"name": "typo", "given": {"run_statz": [{"sum": 1.0}]}}, _every_table)
