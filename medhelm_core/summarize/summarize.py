"""helm-summarize as SQL models over DuckDB: the entry point."""
from __future__ import annotations

import logging
from pathlib import Path
from typing import Iterable, Optional, Sequence

import duckdb

from ..model_metadata import DEFAULT_MODEL_METADATA_PATHS, load_model_registry, model_metadata_to_tables
from .schema import DEFAULT_SCHEMA_PATH, empty_schema, fix_up_schema, load_schema, schema_to_tables
from .human_ratings import write_human_ratings
from .refusals import write_refusal_patterns
from .sql_models import SQL_DIR, run_sql_models
from .kept import keep_current_target
from .tables import ensure_input_tables, set_summarize_target
from .write import write_summarize_outputs

log = logging.getLogger(__name__)


def prepare_summarize(
    conn: duckdb.DuckDBPyConnection,
    schema_path: Optional[str | Path] = None,
    suite: Optional[str] = None,
    suites: Optional[Sequence[str]] = None,
    release: Optional[str] = None,
    auto_generate_schema: bool = False,
    model_metadata_paths: Iterable[str | Path] = DEFAULT_MODEL_METADATA_PATHS,
) -> str:
    """Fill summarize_target, the schema_* tables and the model tables; return the target name.

    Mirrors HELM's argument handling: --suite S, or --release R with --suites; neither means
    suite 'default'.  Without --auto-generate-schema and without a schema path we use
    schema/schema_medhelm.yaml (HELM would default to schema_classic.yaml).
    """
    ensure_input_tables(conn)
    write_refusal_patterns(conn)
    write_human_ratings(conn)
    if not suite and not release and not suites:
        suite = "default"
    target = set_summarize_target(conn, suite=suite, release=release, suites=suites)
    if auto_generate_schema:
        if schema_path:
            raise ValueError("--schema-path must be unset if --auto-generate-schema is set")
        schema = empty_schema()
    else:
        schema = load_schema(schema_path or DEFAULT_SCHEMA_PATH)
    schema = fix_up_schema(schema, conn)
    schema_to_tables(conn, schema, target)
    model_metadata_to_tables(conn, load_model_registry(model_metadata_paths))
    return target


def summarize(
    conn: duckdb.DuckDBPyConnection,
    output_path: str,
    schema_path: Optional[str | Path] = None,
    suite: Optional[str] = None,
    suites: Optional[Sequence[str]] = None,
    release: Optional[str] = None,
    auto_generate_schema: bool = False,
    model_metadata_paths: Iterable[str | Path] = DEFAULT_MODEL_METADATA_PATHS,
    sql_dir: str | Path = SQL_DIR,
    date: Optional[str] = None,
    latex: bool = True,
) -> str:
    """helm-summarize over the runs already in `runs`/`run_stats`.

    Builds the SQL models for the target and writes HELM's files under
    `<output_path>/runs/<suite>` (suite mode) or `<output_path>/releases/<release>`.
    Returns that directory.  (HELM's run display files, instances.json etc., are not written.)
    """
    prepare_summarize(conn, schema_path=schema_path, suite=suite, suites=suites, release=release,
                      auto_generate_schema=auto_generate_schema, model_metadata_paths=model_metadata_paths)
    run_sql_models(conn, sql_dir)
    keep_current_target(conn)
    return write_summarize_outputs(conn, output_path, date=date, latex=latex)
