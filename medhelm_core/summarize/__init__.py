"""helm-summarize (HELM 0.5.16) re-implemented as SQL models over DuckDB plus HELM's JSON writers.

Public API:
    ensure_input_tables(conn)                         runs / run_stats / summarize_target DDL
    load_benchmark_output_runs(conn, output_path, suite, scenario_metadata=None)
    load_schema(path) -> dict                         HELM schema YAML / schema.json
    fix_up_schema(schema, conn) -> dict               HELM's (auto-)generation of missing parts
    schema_to_tables(conn, schema, release_or_suite)  schema_* tables
    parse_sql_model(path) -> (name, deps, sql); run_sql_models(conn, sql_dir)
    summarize(conn, output_path, schema_path=None, suite=None, suites=None, release=None,
              auto_generate_schema=False, model_metadata_paths=[...]) -> output directory
"""
from .schema import fix_up_schema, load_schema, schema_document, schema_to_tables
from .sql_models import SQL_DIR, parse_sql_model, run_sql_models, topological_order
from .summarize import prepare_summarize, summarize
from .tables import ensure_input_tables, load_benchmark_output_runs, set_summarize_target
from .write import write_summarize_outputs

__all__ = [
    "SQL_DIR", "ensure_input_tables", "fix_up_schema", "load_benchmark_output_runs", "load_schema",
    "parse_sql_model", "prepare_summarize", "run_sql_models", "schema_document", "schema_to_tables",
    "set_summarize_target", "summarize", "topological_order", "write_summarize_outputs",
]
