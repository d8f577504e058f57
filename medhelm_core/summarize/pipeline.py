"""helm-summarize as one pipeline over a DuckDB connection, in four steps:

    schema, registry = resolve_schema(conn, target, ...)   which presentation schema and model list
    prepare(conn, target, schema, registry)                summarize_target, schema_* and model_* tables
    run_models(conn, only=None)                            the SQL models (sql/<layer>/<name>.sql)
    keep(conn)                                             leaderboard.<table>, keyed by target
    write_files(conn, output_path)                         HELM's files of the target

Every way to summarize goes through these steps: `summarize` below (`python -m medhelm_core.summarize`),
the Dagster assets (`summarize_target`, one asset per SQL model, `leaderboards_by_target`,
`leaderboard_files`), an imported release's rebuild (`medhelm_core.published.leaderboard`, in a scratch
database) and the page (`medhelm_core.server.data`, in memory, nothing kept or written).
"""
from __future__ import annotations

from pathlib import Path
from typing import Iterable, Optional, Sequence

import duckdb

from medhelm_core.editions import edition_of_suites
from medhelm_core.model_metadata import (DEFAULT_MODEL_METADATA_PATHS, ModelRegistry, load_model_registry,
                                         model_metadata_to_tables)
from medhelm_core.store import in_transaction

from .kept import keep_current_target, keep_target_tables
from .refusals import write_refusal_patterns
from .schema import empty_schema, fix_up_schema, load_schema, normalize_schema, schema_to_tables
from .sql_models import SQL_DIR, load_sql_models, run_sql_models
from .tables import SummarizeTarget, ensure_input_tables, suite_editions, write_summarize_target
from .write import write_summarize_outputs


def registry_from_schema(schema_json: dict) -> ModelRegistry:
    """The model registry a release was summarized with, as far as its schema.json tells: the
    `models` list (registry order, used models only)."""
    reg = ModelRegistry()
    for m in schema_json.get("models") or []:
        reg.models[m["name"]] = {
            "name": m["name"], "display_name": m.get("display_name"), "description": m.get("description"),
            "creator_organization_name": m.get("creator_organization"), "access": m.get("access"),
            "release_date": m.get("release_date"), "num_parameters": m.get("num_parameters"),
        }
    return reg


def resolve_schema(conn: duckdb.DuckDBPyConnection, target: SummarizeTarget, *,
                   schema_path: Optional[str | Path] = None, auto_generate: bool = False,
                   imported_schema: Optional[dict] = None, edition: Optional[str] = None,
                   model_metadata_paths: Iterable[str | Path] = DEFAULT_MODEL_METADATA_PATHS,
                   ) -> tuple[dict, ModelRegistry]:
    """The presentation schema (not yet fixed up) and the model registry to summarize `target` with:

    1. `schema_path` (--schema-path), with the model metadata files;
    2. `auto_generate` (--auto-generate-schema): HELM's empty schema, which `prepare` fills from the
       runs' metadata, with the model metadata files;
    3. `imported_schema`: an imported release's own schema.json, and the model list inside it;
    4. else the packaged schema of the edition the target's suites were run under (`edition`, if
       given, must be that one; schema_medhelm.yaml for helm-0.5.16), with the model metadata files.
    """
    if auto_generate and schema_path:
        raise ValueError("--schema-path must be unset if --auto-generate-schema is set")
    if imported_schema is not None and not schema_path and not auto_generate:
        return normalize_schema(imported_schema), registry_from_schema(imported_schema)
    if auto_generate:
        schema = empty_schema()
    else:
        if not schema_path:
            schema_path = edition_of_suites(suite_editions(conn, target.suites), edition).schema_path
        schema = load_schema(schema_path)
    return schema, load_model_registry(model_metadata_paths)


def prepare(conn: duckdb.DuckDBPyConnection, target: SummarizeTarget, schema: Optional[dict],
            registry: Optional[ModelRegistry], *, analytics: bool = True) -> str:
    """Everything the SQL models read besides `runs`/`run_stats`: `summarize_target`, the schema
    fixed up as HELM's Summarizer does (schema_* tables, keyed by the target) and the model tables;
    return the target's name. `schema` and `registry` None: the schema_* and model_* tables of the
    target are already there (the page, which copies those a summarize left). `analytics`: also the
    analytics models' own inputs from files (refusal patterns; the clinicians' ratings are the store's
    `human_ratings`, which `medhelm-import --human-ratings` loads)."""
    ensure_input_tables(conn)
    if analytics:
        write_refusal_patterns(conn)
    write_summarize_target(conn, target)
    if schema is not None:
        schema_to_tables(conn, fix_up_schema(schema, conn), target.name)
    if registry is not None:
        model_metadata_to_tables(conn, registry)
    return target.name


def run_models(conn: duckdb.DuckDBPyConnection, only: Optional[Iterable[str]] = None,
               models: Optional[dict[str, tuple[list[str], str]]] = None) -> list[str]:
    """Build the SQL models (`only` these, else all) in dependency order on `conn`; `models` the
    parsed models when the caller holds them (`load_sql_models`). Returns the tables built."""
    return run_sql_models(conn, SQL_DIR, only=only, models=models)


def keep(conn: duckdb.DuckDBPyConnection, *, as_target: Optional[str] = None,
         into: Optional[str] = None) -> tuple[str, int]:
    """Keep the tables the SQL models just built as `leaderboard.<table>`, the target's rows replaced
    (`medhelm_core.summarize.kept`); return (target, rows kept). By default under summarize_target's
    name in this database (the editions views follow); a scratch build keeps them `as_target` `into`
    the database it was attached to, all of the target's tables or none."""
    if into is None and as_target is None:
        return keep_current_target(conn)
    target = as_target or conn.execute("SELECT DISTINCT target FROM summarize_target").fetchone()[0]
    source = conn.execute("SELECT current_database()").fetchone()[0]
    with in_transaction(conn):
        kept = keep_target_tables(conn, target, list(load_sql_models()), source_db=source, dest_db=into or source)
    return target, kept


def write_files(conn: duckdb.DuckDBPyConnection, output_path: str | Path, *, date: Optional[str] = None,
                latex: bool = True) -> str:
    """HELM's summarize files of the target under `<output_path>/runs/<suite>` or
    `<output_path>/releases/<release>` (names as the target's edition writes them); return that directory.
    The runs' own display files are `medhelm_core.summarize.files`'."""
    return write_summarize_outputs(conn, str(output_path), date=date, latex=latex)


def summarize(
    conn: duckdb.DuckDBPyConnection,
    output_path: str,
    schema_path: Optional[str | Path] = None,
    suite: Optional[str] = None,
    suites: Optional[Sequence[str]] = None,
    release: Optional[str] = None,
    auto_generate_schema: bool = False,
    model_metadata_paths: Iterable[str | Path] = DEFAULT_MODEL_METADATA_PATHS,
    date: Optional[str] = None,
    latex: bool = True,
    edition: Optional[str] = None,
) -> str:
    """helm-summarize over the runs already in `runs`/`run_stats`: the four steps in one go.

    Mirrors HELM's argument handling: --suite S, or --release R with --suites; neither means suite
    'default'. Without --auto-generate-schema and without a schema path the schema is the edition's
    (schema_medhelm.yaml for helm-0.5.16; HELM would default to schema_classic.yaml). Writes HELM's
    files under `<output_path>/runs/<suite>` or `<output_path>/releases/<release>` and returns that
    directory (HELM's run display files, instances.json etc., are not written).
    """
    ensure_input_tables(conn)
    target = SummarizeTarget.select(suite=suite, release=release, suites=suites)
    schema, registry = resolve_schema(conn, target, schema_path=schema_path, auto_generate=auto_generate_schema,
                                      edition=edition, model_metadata_paths=model_metadata_paths)
    prepare(conn, target, schema, registry)
    run_models(conn)
    keep(conn)
    return write_files(conn, output_path, date=date, latex=latex)
