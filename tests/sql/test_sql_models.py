"""The SQL models' layers and sibling YAML docs: every model is documented column by column, the
documented columns are the table's, each model's `-- depends_on:` header names exactly the tables its
SQL reads, the YAML unit tests (given rows -> expected rows) hold, and the data tests (not_null,
unique, accepted_values, relationships) can fail."""
import textwrap

import duckdb
import pytest
import yaml

from medhelm_core.resources import SQL_DIR
from medhelm_core.summarize.sql_models import (SQL_LAYERS, ColumnDoc, DataTest, ModelDoc, create_input_tables,
                                               data_test_sql, dependency_problems, input_tables, load_model_doc,
                                               load_model_docs, load_sql_models, model_problems, parse_sql_model,
                                               run_data_tests, run_sql_models, run_unit_test, sql_model_files,
                                               sql_reads, topological_order)

DOCS = load_model_docs()


def _inputs(conn: duckdb.DuckDBPyConnection) -> None:
    """The models' input tables, empty, with their real DDL."""
    create_input_tables(conn)


def _every_table(conn: duckdb.DuckDBPyConnection) -> None:
    """The inputs and every model's table, empty and with their real types (a unit test's given rows
    go into them)."""
    _inputs(conn)
    run_sql_models(conn)


def test_models_live_in_their_layers():
    files = sql_model_files()
    assert {p.parent.name for p in files.values()} == set(SQL_LAYERS)
    # every .sql file is a model of a layer or a sql/ddl/ file: none sits where the runner does not look
    every_sql = sorted(SQL_DIR.rglob("*.sql"))
    assert {p.parent.relative_to(SQL_DIR).as_posix() for p in every_sql} <= set(SQL_LAYERS) | {"ddl"}
    assert sorted(files.values()) == sorted(p for p in every_sql if p.parent.name != "ddl")
    assert set(DOCS) == set(files) and all(p.with_suffix(".yml").exists() for p in files.values())
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


def test_every_model_has_a_unit_test():
    assert sorted(name for name, doc in DOCS.items() if not doc.unit_tests) == []


def test_a_unit_test_with_wrong_expectations_fails():
    name, case = CASES[0]
    wrong = dict(case, expect=[{k: ("not " + repr(v)) for k, v in row.items()} for row in case["expect"]])
    expect, got = run_unit_test(sql_model_files()[name].read_text(), wrong, _every_table)
    assert got != expect


def test_model_yaml_has_no_anchors_or_aliases():
    """A YAML anchor (`&id001`) shared by aliases (`*id001`) makes one edit change several lists."""
    for path in sorted(SQL_DIR.glob("*/*.yml")):
        events = list(yaml.parse(path.read_text(encoding="utf-8")))
        assert not [e for e in events if isinstance(e, yaml.AliasEvent) or getattr(e, "anchor", None)], path


# --------------------------------------------------------------------------- dependencies

def test_every_model_declares_exactly_the_tables_it_reads():
    assert model_problems() == []
    models = load_sql_models()
    for name, path in sql_model_files().items():
        assert path.read_text().lstrip().startswith("-- depends_on:"), path
        assert sorted(models[name][0]) == sql_reads(models[name][1]), name
    order = {n: i for i, n in enumerate(topological_order(models))}
    assert all(order[d] < order[n] for n, (deps, _) in models.items() for d in deps if d in models)


def test_sql_reads_takes_tables_from_the_parser():
    sql = textwrap.dedent("""\
        -- a comment naming FROM fake_table
        CREATE OR REPLACE TABLE m AS
        WITH runs AS (SELECT * FROM runs),              -- a CTE named like an input still reads it
             picked AS (SELECT suite FROM run_stats WHERE name = 'FROM not_a_table')
        SELECT * FROM picked p
        JOIN LATERAL (SELECT 1 FROM target_runs t WHERE t.suite = p.suite) x ON true
        WHERE EXISTS (SELECT 1 FROM model_metadata) AND p.suite IN (SELECT suite FROM leaderboard.table_cells)
          AND p.suite NOT IN (SELECT suite FROM runs)
        """)
    assert sql_reads(sql) == ["leaderboard.table_cells", "model_metadata", "run_stats", "runs", "target_runs"]
    assert sql_reads("CREATE OR REPLACE TABLE m AS SELECT * FROM read_json('x.json'), range(3)") == []


def _write_model(root, layer, name, sql, yml="description: x\n"):
    (root / layer).mkdir(parents=True, exist_ok=True)
    (root / layer / f"{name}.sql").write_text(textwrap.dedent(sql))
    (root / layer / f"{name}.yml").write_text(yml)


def test_a_model_reading_an_undeclared_table_is_reported(tmp_path):
    _write_model(tmp_path, "staging", "good", """\
        -- depends_on: runs
        CREATE OR REPLACE TABLE good AS SELECT suite FROM runs;
        """)
    assert model_problems(tmp_path) == []
    _write_model(tmp_path, "marts", "broken", """\
        -- depends_on: good, summarize_target
        CREATE OR REPLACE TABLE broken AS
        SELECT g.suite FROM good g JOIN run_stats s USING (suite)
        WHERE g.suite IN (SELECT suite FROM not_an_input);
        """)
    problems = model_problems(tmp_path)
    assert problems == ["broken reads not_an_input, which its -- depends_on: header does not name",
                        "broken reads run_stats, which its -- depends_on: header does not name",
                        "broken's -- depends_on: header names summarize_target, which its SQL does not read"]
    # the runner, the Dagster assets and everything else that loads the models refuse it
    with pytest.raises(ValueError, match="broken reads run_stats, which its -- depends_on: header does not name"):
        load_sql_models(tmp_path)
    with pytest.raises(ValueError, match="header names summarize_target"):
        parse_sql_model(tmp_path / "marts" / "broken.sql")


def test_unknown_tables_cycles_and_code_before_the_model_are_reported(tmp_path):
    _write_model(tmp_path, "staging", "a", "-- depends_on: b\nCREATE OR REPLACE TABLE a AS SELECT * FROM b;\n")
    _write_model(tmp_path, "staging", "b", "-- depends_on: a\nCREATE OR REPLACE TABLE b AS SELECT * FROM a;\n")
    _write_model(tmp_path, "marts", "c", "-- depends_on: nowhere\nCREATE OR REPLACE TABLE c AS SELECT * FROM nowhere;\n")
    _write_model(tmp_path, "marts", "d", "-- depends_on: runs\nSET threads = 1;\nCREATE OR REPLACE TABLE d AS SELECT * FROM runs;\n")
    problems = model_problems(tmp_path)
    assert "c reads nowhere, which is neither a SQL model nor an input table (sql/ddl/)" in problems
    assert "dependency cycle: a -> b -> a" in problems
    assert any(p.startswith("d: ") and "only comments may come before CREATE OR REPLACE TABLE d AS" in p
               for p in problems)
    assert dependency_problems("x", ["runs"], "CREATE OR REPLACE TABLE x AS SELECT * FROM runs") == []
    assert {"runs", "run_stats", "summarize_target", "schema_run_groups", "model_metadata"} <= input_tables()


# --------------------------------------------------------------------------- data tests

def test_column_tests_are_known_and_well_formed(tmp_path):
    yml = tmp_path / "m.yml"
    cases = {
        "[not_nul]": "unknown tests \\['not_nul'\\]",
        "[accepted_values]": "accepted_values takes values, got none",
        "[{accepted_values: {values: []}}]": "non-empty list of values",
        "[{relationships: {to: t}}]": "relationships takes field, to, got to",
        "[{relationships: {to: t, field: c, extra: 1}}]": "relationships takes field, to, got extra, field, to",
        "[{unique: {column: x}}]": "unique takes no arguments",
        "[{a: 1, b: 2}]": "a test is a name or a mapping",
    }
    for tests, message in cases.items():
        yml.write_text(f"description: x\ncolumns:\n- {{name: c, tests: {tests}}}\n")
        with pytest.raises(ValueError, match=message):
            load_model_doc(tmp_path / "m.sql")
    yml.write_text("description: x\ncolumns:\n- name: c\n  tests:\n  - not_null\n"
                   "  - accepted_values: {values: [a, 1, true]}\n  - relationships: {to: t, field: k}\n")
    tests = load_model_doc(tmp_path / "m.sql").columns[0].tests
    assert tests == ["not_null", "accepted_values", "relationships"]
    assert [t.args for t in tests] == [{}, {"values": ["a", 1, True]}, {"to": "t", "field": "k"}]


def test_relationships_point_to_a_direct_dependency_that_has_the_column():
    conn = duckdb.connect()
    _every_table(conn)
    models = load_sql_models()
    checked = 0
    for name, doc in DOCS.items():
        for col in doc.columns:
            for test in col.tests:
                if test == "relationships":
                    to, field = test.args["to"], test.args["field"]
                    assert to in models[name][0], f"{name}.{col.name}: {to} is not in its -- depends_on:"
                    assert conn.execute("SELECT count(*) FROM information_schema.columns WHERE table_name = ? "
                                        "AND column_name = ?", [to, field]).fetchone()[0] == 1, (name, to, field)
                    checked += 1
    kinds = {str(t) for d in DOCS.values() for c in d.columns for t in c.tests}
    assert kinds == {"not_null", "unique", "accepted_values", "relationships"} and checked > 20


def test_data_tests_count_the_offending_rows():
    conn = duckdb.connect()
    conn.execute("CREATE TABLE t AS SELECT * FROM (VALUES (1, 'a'), (1, NULL), (2, 'b'), (3, 'it''s')) v(k, x)")
    conn.execute("CREATE TABLE parent AS SELECT * FROM (VALUES (1), (2)) v(id)")
    assert conn.execute(data_test_sql("t", "x", "not_null")).fetchone()[0] == 1
    assert conn.execute(data_test_sql("t", "k", "unique")).fetchone()[0] == 1
    assert conn.execute(data_test_sql("t", "x", "unique")).fetchone()[0] == 0
    accepted = DataTest("accepted_values", {"values": ["a", "it's"]})
    assert conn.execute(data_test_sql("t", "x", accepted)).fetchone()[0] == 1          # 'b'; NULL passes
    assert conn.execute(data_test_sql("t", "k", DataTest("accepted_values", {"values": [1, 2, 3]}))).fetchone()[0] == 0
    related = DataTest("relationships", {"to": "parent", "field": "id"})
    assert conn.execute(data_test_sql("t", "k", related)).fetchone()[0] == 1           # k = 3 has no parent
    conn.execute("INSERT INTO parent VALUES (3)")
    assert conn.execute(data_test_sql("t", "k", related)).fetchone()[0] == 0
    with pytest.raises(ValueError, match="arguments are missing"):
        data_test_sql("t", "k", "relationships")
    checked = [(n, c.name, t) for n, d in DOCS.items() for c in d.columns for t in c.tests]
    assert ("target_runs", "run_id", "unique") in checked and len(checked) > 100


def test_a_unit_test_naming_a_column_or_table_that_does_not_exist_is_an_error():
    sql = sql_model_files()["cost_report"].read_text()
    with pytest.raises(ValueError, match="run_stats has no column 'sums'"):
        run_unit_test(sql, {"name": "typo", "given": {"run_stats": [{"sums": 1.0}]}}, _every_table)
    with pytest.raises(ValueError, match="no table 'run_statz'"):
        run_unit_test(sql, {"name": "typo", "given": {"run_statz": [{"sum": 1.0}]}}, _every_table)


def test_the_data_test_runner_reports_each_kind_of_failure():
    conn = duckdb.connect()
    conn.execute("CREATE TABLE parent AS SELECT * FROM (VALUES (1, 'x'), (2, 'y')) v(id, status)")
    conn.execute("CREATE TABLE child AS SELECT * FROM (VALUES (1, 'x'), (1, NULL), (5, 'z')) v(k, status)")
    docs = {"child": ModelDoc("child", "marts", columns=[
        ColumnDoc("k", tests=[DataTest("not_null"), DataTest("unique"),
                              DataTest("relationships", {"to": "parent", "field": "id"})]),
        ColumnDoc("status", tests=[DataTest("not_null"), DataTest("accepted_values", {"values": ["x", "y"]})]),
        ColumnDoc("gone", tests=[DataTest("not_null")]),
        ColumnDoc("status", tests=[DataTest("relationships", {"to": "nowhere", "field": "id"})])])}
    assert run_data_tests(conn, docs) == {
        ("child", "k", "unique"): 1,
        ("child", "k", "relationships(parent.id)"): 1,
        ("child", "status", "not_null"): 1,
        ("child", "status", "accepted_values(x, y)"): 1,
        ("child", "gone", "not_null"): -1,
        ("child", "status", "relationships(nowhere.id)"): -1,
    }
    conn.execute("DELETE FROM child WHERE k = 5 OR status IS NULL")
    assert run_data_tests(conn, {"child": ModelDoc("child", "marts", columns=docs["child"].columns[:2])}) == {}
