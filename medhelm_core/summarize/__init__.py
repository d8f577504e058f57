"""helm-summarize (HELM 0.5.16) re-implemented as SQL models over DuckDB plus HELM's JSON writers.

One pipeline (`pipeline.py`), whose steps every caller uses:
    resolve_schema(conn, target, schema_path=None, auto_generate=False, imported_schema=None, edition=None,
                   model_metadata_paths=[...]) -> (schema, model registry)
    prepare(conn, target, schema, registry)           summarize_target, schema_* and model_* tables
    run_models(conn, only=None)                       the SQL models, in dependency order
    keep(conn)                                        leaderboard.<table>, keyed by target
    write_files(conn, output_path)                    HELM's files; the runs' display files: files.py
    summarize(conn, output_path, schema_path=None, suite=None, suites=None, release=None,
              auto_generate_schema=False, model_metadata_paths=[...]) -> output directory  (all four)

Also:
    ensure_input_tables(conn)                         runs / run_stats / summarize_target DDL
    load_benchmark_output_runs(conn, output_path, suite, scenario_metadata=None)
    SummarizeTarget.select(suite=, release=, suites=) what to summarize
    load_schema(path) -> dict                         HELM schema YAML / schema.json
    fix_up_schema(schema, conn) -> dict               HELM's (auto-)generation of missing parts
    schema_to_tables(conn, schema, release_or_suite)  schema_* tables
    parse_sql_model(path) -> (name, deps, sql); run_sql_models(conn, sql_dir)
"""
from .pipeline import keep, prepare, resolve_schema, run_models, summarize, write_files
from .schema import fix_up_schema, load_schema, schema_document, schema_to_tables
from .sql_models import SQL_DIR, parse_sql_model, run_sql_models, topological_order
from .tables import SummarizeTarget, ensure_input_tables, load_benchmark_output_runs
from .write import write_summarize_outputs

__all__ = [
    "SQL_DIR", "SummarizeTarget", "ensure_input_tables", "fix_up_schema", "keep", "load_benchmark_output_runs",
    "load_schema", "parse_sql_model", "prepare", "resolve_schema", "run_models", "run_sql_models",
    "schema_document", "schema_to_tables", "summarize", "topological_order", "write_files",
    "write_summarize_outputs",
]
