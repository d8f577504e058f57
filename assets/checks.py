"""Asset checks where data can go wrong."""
import json

import dagster as dg

from assets.partitions import runs_partitions
from assets.pipeline import annotations, completions, scores
from assets.resources import MedhelmResource
from medhelm_core.run.workspace import RunRef


@dg.asset_check(asset=completions, partitions_def=runs_partitions,
                description="Every sampled request has a completion or an explicit recorded error.")
def every_request_answered(context: dg.AssetCheckExecutionContext, medhelm: MedhelmResource) -> dg.AssetCheckResult:
    run = RunRef.from_partition_key(context.partition_key)
    with medhelm.workspace().store.connect() as conn:
        total, answered, errored = conn.execute(
            "SELECT count(*), count(c.request_key),"
            " count(*) FILTER (WHERE c.request_key IS NULL AND e.request_key IS NOT NULL)"
            " FROM requests r LEFT JOIN completions c USING (request_key)"
            " LEFT JOIN (SELECT DISTINCT request_key FROM completion_errors) e USING (request_key)"
            " WHERE r.suite = ? AND r.run_name = ?", [run.suite, run.run_name]).fetchone()
    silent = total - answered - errored
    return dg.AssetCheckResult(passed=silent == 0 and total > 0,
                               metadata={"requests": total, "answered": answered, "errors": errored,
                                         "unaccounted": silent})


@dg.asset_check(asset=annotations, partitions_def=runs_partitions,
                description="Judges that failed (request or parse) are counted; HELM would silently default them.")
def judges_all_ok(context: dg.AssetCheckExecutionContext, medhelm: MedhelmResource) -> dg.AssetCheckResult:
    run = RunRef.from_partition_key(context.partition_key)
    with medhelm.workspace().store.connect() as conn:
        rows = dict(conn.execute("SELECT status, count(*) FROM judge_verdicts WHERE suite = ? AND run_name = ?"
                                 " GROUP BY status", [run.suite, run.run_name]).fetchall())
    failed = rows.get("parse_failed", 0) + rows.get("request_failed", 0)
    return dg.AssetCheckResult(passed=failed == 0, severity=dg.AssetCheckSeverity.WARN,
                               metadata={"statuses": dg.MetadataValue.json(rows), "failed": failed})


@dg.asset_check(asset=dg.AssetKey("run_stats"), partitions_def=runs_partitions,
                description="num_instances in stats.json equals the number of evaluated instances per split.")
def stats_count_equals_instances(context: dg.AssetCheckExecutionContext,
                                 medhelm: MedhelmResource) -> dg.AssetCheckResult:
    run = RunRef.from_partition_key(context.partition_key)
    with medhelm.workspace().store.connect() as conn:
        expected = dict(conn.execute(
            "SELECT split, count(DISTINCT instance_id) FROM requests WHERE suite = ? AND run_name = ?"
            " GROUP BY split", [run.suite, run.run_name]).fetchall())
        got = dict(conn.execute(
            "SELECT split, mean FROM run_stats WHERE suite = ? AND run_name = ? AND name = 'num_instances'"
            " AND perturbation IS NULL", [run.suite, run.run_name]).fetchall())
    passed = bool(expected) and all(got.get(s) == n for s, n in expected.items())
    return dg.AssetCheckResult(passed=passed, metadata={"expected": json.dumps(expected), "num_instances": json.dumps(got)})


CHECKS = [every_request_answered, judges_all_ok, stats_count_equals_instances]
assert scores  # run_stats is produced by the scores multi-asset
