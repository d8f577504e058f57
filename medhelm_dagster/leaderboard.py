"""The leaderboard layer: the summarize target (suite or release + schema), one asset per SQL model
(`sql/{staging,intermediate,marts}/<name>.sql`: dependencies from its `-- depends_on:` header, SQL hash
as code version, description, columns and data-test asset checks from its sibling `<name>.yml`),
and HELM's files."""
import hashlib
from pathlib import Path

import dagster as dg

from medhelm_dagster.errors import user_errors

from medhelm_dagster.resources import MedhelmResource
from medhelm_core.run.scores import stored_run_outputs, write_files as write_run_files
from medhelm_core.run.workspace import RunRef
from medhelm_core.selections import SummarizeSelection
from medhelm_core.server.data import current_snapshot
from medhelm_core.summarize.files import runs_with_requests, write_run_display_files
from medhelm_core.summarize.pipeline import keep, prepare, resolve_schema, run_models, write_files
from medhelm_core.summarize.report import leaderboard_metadata
from medhelm_core.summarize.sql_models import (SQL_DIR, ModelDoc, data_test_sql, load_model_docs, load_sql_models,
                                               sql_model_files)
from medhelm_core.summarize.tables import SummarizeTarget

DATA_TESTS = "data_tests"  # each SQL model's check: its YAML's column tests
RUN_LEVEL_INPUTS = {"runs", "run_stats"}  # written per run by the scores step
ALL_RUNS = dg.AllPartitionMapping()


class SummarizeConfig(dg.Config, SummarizeSelection):
    """helm-summarize's selection: `--suite S`, or `--release R --suites S1 S2 …` (`SummarizeSelection`)."""


@dg.asset(group_name="leaderboard", kinds={"duckdb"},
          deps=[dg.AssetDep("run_stats", partition_mapping=ALL_RUNS)],
          description="What to summarize (summarize_target) and the schema and model tables the SQL reads.")
@user_errors
def summarize_target(config: SummarizeConfig, medhelm: MedhelmResource) -> dg.MaterializeResult:
    ws = medhelm.workspace()
    selected = SummarizeTarget.select(suite=config.suite, release=config.release, suites=config.suites)
    with ws.store.transaction() as conn:
        schema, registry = resolve_schema(conn, selected, schema_path=config.schema_path,
                                          auto_generate=config.auto_generate_schema, edition=config.edition,
                                          model_metadata_paths=ws.model_metadata_paths())
        target = prepare(conn, selected, schema, registry)
        runs = conn.execute("SELECT count(*) FROM runs r JOIN summarize_target t USING (suite)").fetchone()[0]
    return dg.MaterializeResult(metadata={"target": target, "runs": runs})


def _sql_asset(path: Path, deps: list[str], sql: str, doc: ModelDoc, model_names: set[str]) -> dg.AssetsDefinition:
    name = path.stem
    asset_deps = []
    for d in deps:
        if d in model_names:
            asset_deps.append(dg.AssetDep(d))
        elif d in RUN_LEVEL_INPUTS:
            asset_deps.append(dg.AssetDep("run_stats", partition_mapping=ALL_RUNS))
        else:
            asset_deps.append(dg.AssetDep("summarize_target"))
    unique = {dep.asset_key: dep for dep in asset_deps}

    layer = path.parent.name
    columns = dg.TableSchema(columns=[dg.TableColumn(c.name, description=c.description or None) for c in doc.columns])
    # The model's column data tests (`not_null`, `unique` in its YAML) are one check of this asset,
    # evaluated in the asset's own step on the connection that just built the table, each test's
    # failing rows in its metadata: a check per test, or a step per check, cost Dagster's event-log
    # writes ~170 times over (most of `group:leaderboard`'s time).
    tests = {f"{c.name}_{t}": (c.name, t) for c in doc.columns for t in c.tests}
    check_specs = [dg.AssetCheckSpec(DATA_TESTS, asset=name, blocking=False,
                                     description="; ".join(f"{column}: {test.replace('_', ' ')}"
                                                           for column, test in tests.values())
                                     + f" ({doc.layer}/{doc.name}.yml)")] if tests else []

    @dg.asset(name=name, deps=list(unique.values()), group_name="leaderboard", kinds={"sql", "duckdb"},
              code_version=hashlib.sha256(sql.encode()).hexdigest()[:12], tags={"layer": layer},
              description=(doc.description + "\n\n" if doc.description else "") + f"`sql/{layer}/{path.name}`",
              metadata={"sql_file": dg.MetadataValue.path(str(path)), "dagster/column_schema": columns},
              check_specs=check_specs)
    @user_errors
    def _asset(context: dg.AssetExecutionContext, medhelm: MedhelmResource) -> dg.MaterializeResult:
        checked = bool(tests) and DATA_TESTS in {key.name for key in context.selected_asset_check_keys}
        with medhelm.workspace().store.transaction() as conn:
            run_models(conn, only=[name], models=_MODELS)
            n = conn.execute(f'SELECT count(*) FROM "{name}"').fetchone()[0]
            cols = conn.execute("SELECT column_name, data_type FROM information_schema.columns "
                                "WHERE table_name = ? ORDER BY ordinal_position", [name]).fetchall()
            preview = conn.execute(f'SELECT * FROM "{name}" LIMIT 10').df()
            have = {c for c, _ in cols}  # a column the YAML names but the table lacks fails its test
            failing = {check: conn.execute(data_test_sql(name, column, test)).fetchone()[0] if column in have else -1
                       for check, (column, test) in tests.items()} if checked else {}
        checks = [dg.AssetCheckResult(check_name=DATA_TESTS, passed=not any(failing.values()), metadata={
            "failing_rows": sum(bad for bad in failing.values() if bad > 0),
            "failed": ", ".join(check + ("" if bad > 0 else " (no such column)")
                                for check, bad in failing.items() if bad) or "none",
            **{f"{check}.failing_rows": bad for check, bad in failing.items()}})] if checked else []
        return dg.MaterializeResult(metadata={
            "dagster/row_count": n,
            "dagster/column_schema": dg.TableSchema(columns=[dg.TableColumn(c, t) for c, t in cols]),
            "preview": dg.MetadataValue.md(preview.to_markdown(index=False)),
        }, check_results=checks)

    return _asset


_FILES = sql_model_files(SQL_DIR)
_MODELS = load_sql_models(SQL_DIR)
_DOCS = load_model_docs(SQL_DIR)
SQL_ASSETS = [_sql_asset(path, *_MODELS[name], _DOCS[name], set(_MODELS)) for name, path in _FILES.items()]
_SINKS = [n for n in _MODELS if not any(n in deps for deps, _ in _MODELS.values())]


@dg.asset(group_name="leaderboard", kinds={"duckdb"}, deps=[a.key for a in SQL_ASSETS],
          description="Every target's leaderboard tables side by side: schema `leaderboard`, one table per SQL "
                      "model, keyed by `target` (suite or release).")
@user_errors
def leaderboards_by_target(medhelm: MedhelmResource) -> dg.MaterializeResult:
    with medhelm.workspace().store.transaction() as conn:
        target, rows = keep(conn)
        targets = [r[0] for r in conn.execute("SELECT DISTINCT target FROM leaderboard.table_cells ORDER BY 1")
                   .fetchall()]
    return dg.MaterializeResult(metadata={"target": target, "rows_kept": rows, "targets": ", ".join(targets)})


@dg.asset(group_name="leaderboard", kinds={"json"}, deps=_SINKS,
          description="HELM's summarize files (groups/*.json, schema.json, runs.json, …) and each run's display "
                      "files, written from DuckDB.")
@user_errors
def leaderboard_files(medhelm: MedhelmResource) -> dg.MaterializeResult:
    ws = medhelm.workspace()
    with ws.store.connect() as conn:
        base = write_files(conn, ws.output_path)
        runs = runs_with_requests(conn)
    info = write_run_display_files(ws.output_path, base, runs, _RunOutputs(ws))
    tables = info.pop("top_table_markdown", "")
    metadata = {**info, "leaderboard": dg.MetadataValue.md(tables)}
    metadata.update(_page_metadata(ws))
    return dg.MaterializeResult(metadata=metadata)


class _RunOutputs:
    """The run layer's outputs of a run (`medhelm_core.summarize.files.RunOutputs`), for its display files."""

    def __init__(self, ws) -> None:
        self.ws = ws

    def outputs(self, suite: str, run_name: str) -> dict:
        return stored_run_outputs(self.ws, RunRef(suite, run_name))

    def write_run_files(self, suite: str, run_name: str, outputs: dict) -> None:
        write_run_files(self.ws, RunRef(suite, run_name), outputs)


def _page_metadata(ws) -> dict:
    """The leaderboard as medhelm-server shows it (HELM's number format, models as columns), row counts,
    costs, judge statuses and the published comparison; a preview must never fail the asset."""
    try:
        with ws.store.connect() as conn:
            md = leaderboard_metadata(conn, current_snapshot(conn), output_path=ws.output_path)
    except Exception as e:  # noqa: BLE001
        return {"preview_error": str(e)}
    out: dict = {}
    for k, v in md.items():
        if k == "leaderboard_md":
            out["leaderboard"] = dg.MetadataValue.md(v)
        elif k.endswith("_md"):
            out[k[:-3]] = dg.MetadataValue.md(v)
        else:
            out[k] = v
    return out


SUMMARY_ASSETS = [summarize_target, *SQL_ASSETS, leaderboards_by_target, leaderboard_files]
