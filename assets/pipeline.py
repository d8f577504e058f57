"""Per-run layers as partitioned assets: datasets → requests → completions → annotations →
instance_stats / run_stats → HELM run files. Each asset calls one layer of `medhelm_core.run`."""

import dagster as dg

from assets.errors import user_errors

from assets.partitions import runs_partitions, scenario_partitions
from assets.resources import MedhelmResource, RunControlsParam
from medhelm_core.costs import run_cost
from medhelm_core.run import annotations as annotation_layer
from medhelm_core.run import completions as completion_layer
from medhelm_core.run import datasets as dataset_layer
from medhelm_core.run import entries as entry_layer
from medhelm_core.run import requests as request_layer
from medhelm_core.run import scores as score_layer
from medhelm_core.run.workspace import RunRef
from medhelm_core.selections import RunSelection


class RunEntriesConfig(dg.Config, RunSelection):
    """helm-run's selection: which confs, which suite, how many instances (`RunSelection`)."""


@dg.asset(group_name="conf", kinds={"duckdb"},
          description="The run entries a suite asks for (HELM .conf files expanded into run specs).")
@user_errors
def run_entries(context: dg.AssetExecutionContext, config: RunEntriesConfig,
                medhelm: MedhelmResource) -> dg.MaterializeResult:
    ws = medhelm.workspace()
    entries = entry_layer.expand_selection(ws, config)
    runs = entry_layer.register_runs(ws, config.suite, entries)
    keys = [r.partition_key for r in runs]
    context.instance.add_dynamic_partitions(runs_partitions.name, keys)
    datasets_by_tier = entry_layer.scenario_partitions(entries, ws.catalog)
    for tier, scenario_keys in datasets_by_tier.items():
        if scenario_keys:
            context.instance.add_dynamic_partitions(scenario_partitions[tier].name, scenario_keys)
    return dg.MaterializeResult(metadata={
        "suite": config.suite, "runs": len(runs),
        "partitions": dg.MetadataValue.md("\n".join(f"- `{k}`" for k in keys)),
        "datasets": dg.MetadataValue.json({t: k for t, k in datasets_by_tier.items() if k})})


def _run(context: dg.AssetExecutionContext) -> RunRef:
    return RunRef.from_partition_key(context.partition_key)


def _dataset_asset(tier: str) -> dg.AssetsDefinition:
    @dg.asset(name=f"{tier}_datasets", group_name="datasets", partitions_def=scenario_partitions[tier],
              kinds={"duckdb"}, deps=[run_entries],
              description=f"Instances of each {tier}-tier scenario spec (ids as HELM assigns them); rebuilt only "
                          "when the spec or the bytes of its data files change.")
    @user_errors
    def _asset(context: dg.AssetExecutionContext, medhelm: MedhelmResource) -> dg.MaterializeResult:
        info = dataset_layer.build_dataset(medhelm.workspace(), context.partition_key)
        return dg.MaterializeResult(
            metadata={"dagster/row_count": info["num_instances"], "tier": info["tier"],
                      "content_hash": info["content_hash"], "rebuilt": info["built"]},
            data_version=dg.DataVersion(info["scenario_key"]))

    return _asset


DATASET_ASSETS = {tier: _dataset_asset(tier) for tier in entry_layer.TIERS}


@dg.asset(group_name="requests", partitions_def=runs_partitions, kinds={"duckdb"},
          deps=[dg.AssetDep(a, partition_mapping=dg.AllPartitionMapping()) for a in DATASET_ASSETS.values()],
          description="Prompts sent to the model: seed-0 sampling over valid+test, HELM's prompt layout.")
@user_errors
def requests(context: dg.AssetExecutionContext, medhelm: MedhelmResource) -> dg.MaterializeResult:
    info = request_layer.build_requests(medhelm.workspace(), _run(context))
    return dg.MaterializeResult(metadata={"dagster/row_count": info["num_requests"]},
                                data_version=dg.DataVersion(info["digest"]))


@dg.asset(group_name="completions", partitions_def=runs_partitions, kinds={"openai", "duckdb"}, deps=[requests],
          pool="llm_api",
          description="Model answers, content-addressed by (deployment, request): only missing ones are requested.")
@user_errors
def completions(context: dg.AssetExecutionContext, medhelm: MedhelmResource,
                run_controls: RunControlsParam) -> dg.MaterializeResult:
    ws, run = medhelm.workspace(run_controls), _run(context)
    report = completion_layer.run_completions(ws, run)
    return dg.MaterializeResult(metadata={**_engine_metadata(report), **_run_cost_metadata(ws, run, "model")})


@dg.asset(group_name="annotations", partitions_def=runs_partitions, kinds={"openai", "duckdb"},
          deps=[completions], pool="llm_api",
          description="LLM-jury annotations as HELM stores them, and a verdict per judge with an explicit status.")
@user_errors
def annotations(context: dg.AssetExecutionContext, medhelm: MedhelmResource,
                run_controls: RunControlsParam) -> dg.MaterializeResult:
    ws, run = medhelm.workspace(run_controls), _run(context)
    info = annotation_layer.run_annotations(ws, run)
    return dg.MaterializeResult(metadata={"annotated": info["annotated"], "judge_calls_new": info["judge_calls_new"],
                                          "judge_calls_reused": info["judge_calls_reused"],
                                          "verdicts": dg.MetadataValue.json(info["statuses"]),
                                          **_engine_metadata(info["report"]), **_run_cost_metadata(ws, run, "judge")})


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


def _run_cost_metadata(ws, run, kind: str) -> dict:
    """The run's cost so far from the `run_costs` view (all materializations, reused answers included)."""
    cost = run_cost(ws, run.suite, run.run_name).get(f"{kind}_cost_usd")
    return {f"run_{kind}_cost_usd": dg.MetadataValue.float(round(float(cost or 0.0), 6))}


@dg.multi_asset(
    specs=[dg.AssetSpec("instance_stats", group_name="scores", kinds={"duckdb"}, deps=[annotations],
                        partitions_def=runs_partitions,
                        description="Per-instance stats (HELM's per_instance_stats.json) and jury scores."),
           dg.AssetSpec("run_stats", group_name="scores", kinds={"duckdb"}, deps=[annotations],
                        partitions_def=runs_partitions,
                        description="Run-level stats as HELM aggregates them (stats.json).")],
    partitions_def=runs_partitions,
)
@user_errors
def scores(context: dg.AssetExecutionContext, medhelm: MedhelmResource):
    ws = medhelm.workspace()
    run = _run(context)
    computed = score_layer.compute_stats(ws, run)
    directory = score_layer.write_files(ws, run, computed)
    yield dg.MaterializeResult(asset_key="instance_stats",
                               metadata={"dagster/row_count": computed["per_instance_rows"],
                                         "instances": computed["instances"]})
    yield dg.MaterializeResult(asset_key="run_stats",
                               metadata={"dagster/row_count": computed["run_stats"],
                                         "helm_files": dg.MetadataValue.path(str(directory))})


PER_RUN_ASSETS = [requests, completions, annotations, scores]
