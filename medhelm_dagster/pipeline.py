"""Per-run layers as partitioned assets: datasets → requests → completions → annotations →
instance_stats / run_stats → HELM run files. One step materializes the selected layers for every
selected run partition at once (`medhelm_core.run.suite`), so a backfill keeps every endpoint busy."""

import dataclasses
from typing import Optional

import dagster as dg

from medhelm_dagster.backfills import BACKFILL_TAG, backfill_partitions, claimed
from medhelm_dagster.errors import user_errors

from medhelm_dagster.partitions import benchmark_partitions, grid_partitions, model_partitions, scenario_partitions
from medhelm_dagster.resources import MedhelmResource, RunControlsParam
from medhelm_core.costs import Budget
from medhelm_core.engine import RunControls
from medhelm_core.run import checks as run_checks
from medhelm_core.run import datasets as dataset_layer
from medhelm_core.run import entries as entry_layer
from medhelm_core.run import grid as grid_layer
from medhelm_core.run import suite as suite_layer
from medhelm_core.run.workspace import RunRef, Workspace
from medhelm_core.selections import RunSelection
from pydantic import Field


# The tag a materialization's data version travels in (what MaterializeResult(data_version=...) writes).
DATA_VERSION_TAG = "dagster/data_version"


class RunEntriesConfig(dg.Config, RunSelection):
    """helm-run's selection: which confs, which suite, how many instances (`RunSelection`)."""


@dg.asset(group_name="conf", kinds={"duckdb"},
          description="The run entries a suite asks for (HELM .conf files expanded into run specs).")
@user_errors
def run_entries(context: dg.AssetExecutionContext, config: RunEntriesConfig,
                medhelm: MedhelmResource, run_controls: RunControlsParam) -> dg.MaterializeResult:
    ws = medhelm.workspace().for_edition(config.edition)
    # medhelm-run expanded (and registered) this very selection already, else the confs are expanded here.
    entries, registered = entry_layer.take_expanded(run_controls, config) or (
        entry_layer.expand_selection(ws, config), False)
    runs = ([RunRef(config.suite, spec["name"]) for _, spec in entries] if registered
            else entry_layer.register_runs(ws, config.suite, entries))
    cells = entry_layer.cells_of(config.suite, entries)
    add_grid_keys(context.instance, cells)
    datasets_by_tier = entry_layer.scenario_partitions(entries, ws.catalog)
    for tier, scenario_keys in datasets_by_tier.items():
        if scenario_keys:
            context.instance.add_dynamic_partitions(scenario_partitions[tier].name, scenario_keys)
    return dg.MaterializeResult(metadata={
        "suite": config.suite, "runs": len(runs),
        "partitions": dg.MetadataValue.md("\n".join(f"- `{c.key}`: {r.run_name}" for c, r in zip(cells, runs))),
        "datasets": dg.MetadataValue.json({t: k for t, k in datasets_by_tier.items() if k})})


def add_grid_keys(instance: dg.DagsterInstance, cells: list[grid_layer.Cell]) -> None:
    """The cells' benchmarks and models as keys of the grid's two dimensions (new ones at the end)."""
    for partitions, keys in ((benchmark_partitions, [c.benchmark for c in cells]),
                             (model_partitions, [c.model for c in cells])):
        known = set(instance.get_dynamic_partitions(partitions.name))
        new = [k for k in dict.fromkeys(keys) if k not in known]
        if new:
            instance.add_dynamic_partitions(partitions.name, new)


def _dataset_asset(tier: str) -> dg.AssetsDefinition:
    @dg.asset(name=f"{tier}_datasets", group_name="datasets", partitions_def=scenario_partitions[tier],
              kinds={"duckdb"}, deps=[run_entries], output_required=False,
              backfill_policy=dg.BackfillPolicy.single_run(),
              description=f"Instances of each {tier}-tier scenario spec (ids as HELM assigns them); rebuilt only "
                          "when the spec or the bytes of its data files change.")
    @user_errors
    def _asset(context: dg.AssetExecutionContext, medhelm: MedhelmResource):
        ws = medhelm.workspace()
        with ws.store.held():  # the DuckDB file stays open from one dataset to the next (no checkpoint each)
            for key in context.partition_keys:  # one Dagster run builds every dataset a suite needs
                info = dataset_layer.build_dataset(ws, key)
                yield dg.AssetMaterialization(
                    context.asset_key, partition=key,
                    metadata={"dagster/row_count": info["num_instances"], "tier": info["tier"],
                              "content_hash": info["content_hash"], "scenario_key": info["scenario_key"],
                              "rebuilt": info["built"]},
                    tags={DATA_VERSION_TAG: info["scenario_key"]})

    return _asset


DATASET_ASSETS = {tier: _dataset_asset(tier) for tier in entry_layer.TIERS}

# The per-run layers, one asset each; one step materializes them for many runs at once.
STAGE_ASSETS = {"requests": ["requests"], "completions": ["completions"], "annotations": ["annotations"],
                "scores": ["instance_stats", "run_stats"]}
RUN_CHECKS = {check.name: check for check in run_checks.RUN_CHECKS}


class LayersConfig(dg.Config):
    runs: list[str] = Field(default=[], description="only these runs (`<suite>/<HELM run name>`) of the selected "
                            "cells; empty: every registered run there (medhelm-run names its invocation's runs)")
    budget_usd: Optional[float] = Field(default=None, ge=0, description="spend at most this on new model and "
                                        "judge calls in this Dagster run (medhelm-run --budget); stored answers "
                                        "cost nothing; materialize again to continue")


@dg.multi_asset(
    name="layers",
    specs=[
        dg.AssetSpec("requests", group_name="requests", kinds={"duckdb"}, skippable=True,
                     deps=[dg.AssetDep(a, partition_mapping=dg.AllPartitionMapping()) for a in DATASET_ASSETS.values()],
                     description="Prompts sent to the model: seed-0 sampling over valid+test, HELM's prompt layout."),
        dg.AssetSpec("completions", group_name="completions", kinds={"openai", "duckdb"}, deps=["requests"],
                     skippable=True,
                     description="Model answers, content-addressed by (deployment, request): only missing ones are "
                                 "requested."),
        dg.AssetSpec("annotations", group_name="annotations", kinds={"openai", "duckdb"}, deps=["completions"],
                     skippable=True,
                     description="LLM-jury annotations as HELM stores them, and a verdict per judge with an explicit "
                                 "status (an instance's judges are asked as soon as its answer is in)."),
        dg.AssetSpec("instance_stats", group_name="scores", kinds={"duckdb"}, deps=["annotations"], skippable=True,
                     description="Per-instance stats (HELM's per_instance_stats.json) and jury scores."),
        dg.AssetSpec("run_stats", group_name="scores", kinds={"duckdb"}, deps=["annotations"], skippable=True,
                     description="Run-level stats as HELM aggregates them (stats.json)."),
    ],
    check_specs=[dg.AssetCheckSpec(c.name, asset=c.asset, description=c.description) for c in run_checks.RUN_CHECKS],
    partitions_def=grid_partitions, backfill_policy=dg.BackfillPolicy.single_run(), can_subset=True, pool="llm_api",
)
@user_errors
def run_layers(context: dg.AssetExecutionContext, config: LayersConfig, medhelm: MedhelmResource,
               run_controls: RunControlsParam):
    """Every selected cell's run at once (`run.suite.run_suite`); each run's materializations and
    check results are recorded when that run ends, so the UI shows per-cell status as it goes."""
    if config.budget_usd is not None:  # this Dagster run's own cap (medhelm-run's comes in run_controls)
        run_controls = dataclasses.replace(run_controls, budget=Budget(config.budget_usd))
    ws = medhelm.workspace(run_controls)
    keys = list(context.partition_keys)
    backfill_id = context.run.tags.get(BACKFILL_TAG)
    if backfill_id is None:
        yield from _run_cells(context, config, ws, run_controls, keys)
        return
    with claimed(ws.output_path / "dagster_backfills", backfill_id) as claim:
        if not claim.done:  # this run does the whole backfill's grid (medhelm_dagster/backfills.py)
            mine = set(keys)
            keys = [k for k in backfill_partitions(context, backfill_id) if k not in mine] + keys
        yield from _run_cells(context, config, ws, run_controls, keys)
        claim.mark_done()


def _run_cells(context: dg.AssetExecutionContext, config: LayersConfig, ws: Workspace, run_controls: RunControls,
               keys: list[str]):
    """The selected layers of the runs at these cells, with a materialization per cell and layer."""
    selected = {k.to_user_string() for k in context.selected_asset_keys}
    stages = [s for s, keys in STAGE_ASSETS.items() if selected & set(keys)]
    checks = {k.name for k in context.selected_asset_check_keys}
    at = grid_layer.runs_at(ws, [grid_layer.Cell.from_key(k) for k in keys])
    cells = {run: cell for cell, run in at.items() if run is not None}
    only = set(config.runs)
    runs = [run for run in cells if not only or run.key in only]
    failed = []
    # What every materialization names: HELM's run name (not the partition key), its suite and edition.
    editions = entry_layer.editions_of(ws, runs)
    # The runs medhelm-run started before this Dagster run was planned, else started now.
    execution = suite_layer.take_started(run_controls, runs, stages) or suite_layer.SuiteExecution(ws, runs, stages)
    for outcome in execution.outcomes():
        if run_controls.on_outcome is not None:
            run_controls.on_outcome(outcome)
        if not outcome.ok:
            failed.append(outcome)
            if outcome.started:
                context.log.error(f"{outcome.run.run_name}: {outcome.error}")
        partition = cells[outcome.run].key
        for stage in outcome.stages:
            for key in STAGE_ASSETS[stage]:
                if key in selected:
                    yield dg.AssetMaterialization(key, partition=partition,
                                                  metadata={"suite": outcome.run.suite,
                                                            "run_name": outcome.run.run_name,
                                                            "edition": editions.get(outcome.run, ws.edition),
                                                            **_stage_metadata(outcome, key)},
                                                  tags=_data_version(outcome, key))
        for check in RUN_CHECKS.values():
            if check.name in checks and check.name in outcome.checks:
                passed, metadata = outcome.checks[check.name]
                yield dg.AssetCheckEvaluation(asset_key=dg.AssetKey(check.asset), check_name=check.name,
                                              passed=passed, metadata=metadata,
                                              severity=dg.AssetCheckSeverity(check.severity),
                                              partition=partition)
    holes = [cell for cell, run in at.items() if run is None] if failed or not only else []
    for hole in holes:
        # A backfill of every cell reaches cells no suite registered: say so (an asset a backfill
        # asked for and did not get counts as failed). After the runs: they never wait on these.
        # An invocation that names its runs (medhelm-run) spans a rectangle of cells with holes
        # where its conf has no run: they are recorded only when the Dagster run fails (a planned
        # cell of a successful run is not failed), which spares a wide suite a few events per hole.
        for key in (k for keys in STAGE_ASSETS.values() for k in keys if k in selected):
            yield dg.AssetMaterialization(key, partition=hole.key, metadata={
                "registered": False, "note": f"suite {hole.suite!r} has no run of {hole.benchmark!r} on this model"})
    if failed:
        first = next((o for o in failed if o.error is not None), failed[0])
        raise first.error if len(runs) == 1 and first.error is not None else dg.Failure(
            description=f"{len(failed)} of {len(runs)} runs did not complete; first: {first.run.run_name}: "
                        f"{first.error or 'not started (budget reached)'}")


def _data_version(outcome: suite_layer.RunOutcome, key: str) -> dict[str, str] | None:
    """The requests' digest as their data version (unchanged prompts: downstream is not stale)."""
    if key == "requests" and "requests" in outcome.info:
        return {DATA_VERSION_TAG: outcome.info["requests"]["digest"]}
    return None


def _stage_metadata(outcome: suite_layer.RunOutcome, key: str) -> dict:
    if outcome.reused:
        return {"reused": True}
    info = outcome.info
    if key == "requests":
        return {"dagster/row_count": info["requests"]["num_requests"], "digest": info["requests"]["digest"]}
    if key == "completions":
        return {**_engine_metadata(outcome.model), **_run_cost_metadata(outcome, "model")}
    if key == "annotations":
        ann = info["annotations"]
        return {"annotated": ann["annotated"], "judge_calls_new": ann["judge_calls_new"],
                "judge_calls_reused": ann["judge_calls_reused"], "verdicts": dg.MetadataValue.json(ann["statuses"]),
                **_engine_metadata(outcome.judge), **_run_cost_metadata(outcome, "judge")}
    computed = info["scores"]
    if key == "instance_stats":
        return {"dagster/row_count": computed["per_instance_rows"], "instances": computed["instances"]}
    return {"dagster/row_count": computed["run_stats"], "helm_files": dg.MetadataValue.path(str(computed["directory"]))}


def _engine_metadata(report) -> dict:
    """Progress of the completion engine for this materialization: done / remaining / failed / cost / throughput."""
    return {"done": report.reused + report.new, "remaining": report.failed + report.skipped,
            "failed": report.failed, "new": report.new, "reused": report.reused, "retries": report.retries,
            "content_filtered": report.content_filtered,
            "cost_usd": dg.MetadataValue.float(round(report.cost_usd, 6)),
            "prompt_tokens": report.prompt_tokens, "completion_tokens": report.completion_tokens,
            "throughput_per_s": dg.MetadataValue.float(round(report.throughput, 3)),
            "seconds": dg.MetadataValue.float(round(report.seconds, 3)),
            "concurrency": dg.MetadataValue.json(report.concurrency)}


def _run_cost_metadata(outcome: suite_layer.RunOutcome, kind: str) -> dict:
    """The run's cost so far from the `run_costs` view (all materializations, reused answers included)."""
    cost = outcome.cost.get(f"{kind}_cost_usd")
    return {f"run_{kind}_cost_usd": dg.MetadataValue.float(round(float(cost or 0.0), 6))}


PER_RUN_ASSETS = [run_layers]
