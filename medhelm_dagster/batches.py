"""Vendor batches in Dagster: the `medhelm_batches` sensor collects them and launches the layers of the runs
they complete; the `vendor_batches` asset shows the ledger (`batches`, `batch_items`) in the UI.

The sensor is stopped until a user turns it on (Automation, or `dagster sensor start medhelm_batches`). Each
tick (at most every minute) it looks at the runs whose requests went into a vendor batch and are not
complete (`batch_pass.batch_runs`) and runs one batch pass that does not wait: the batches that ended are
collected, and the judge requests of the answers now stored go into the judges' batches (deployments with
`batch: true`; a request is never batched twice by the sensor: what failed or expired, the online run asks).
The runs no live batch holds any more get one `run_layers` run per suite, which finds their answers stored;
a run is launched once, and again only after a new batch held it. The ledger's state is recorded as an
observation of `vendor_batches` whenever it changed.
"""
from __future__ import annotations

import json

import dagster as dg

from medhelm_core.batch import ledger
from medhelm_core.run.grid import registered_cells
from medhelm_core.run.workspace import RunRef, Workspace
from medhelm_core.store import stable_hash
from medhelm_dagster.partitions import grid_range_tags
from medhelm_dagster.resources import MedhelmResource

SENSOR = "medhelm_batches"
SHOWN = 50  # batches listed in an observation (the newest)

vendor_batches = dg.AssetSpec(
    "vendor_batches", group_name="batches", kinds={"duckdb"},
    description="The vendors' batches medhelm submitted (tables `batches` and `batch_items`): each batch's "
                "state and the requests it holds, by item state. Observed by the medhelm_batches sensor.")


def ledger_summary(ws: Workspace) -> tuple[list[tuple], dict[str, dict[str, int]]]:
    """(the newest batches, oldest first: batch id, vendor, vendor id, deployment, state, requests, created,
    collected, error), {batch id: {item state: count}}."""
    with ws.store.connect() as conn:
        rows = conn.execute(
            "SELECT batch_id, vendor, vendor_batch_id, model_deployment, state, num_requests, created_at,"
            " collected_at, error FROM (SELECT * FROM batches ORDER BY created_at DESC, batch_id LIMIT ?)"
            " ORDER BY created_at, batch_id", [SHOWN]).fetchall()
        counts: dict[str, dict[str, int]] = {}
        for batch_id, state, n in conn.execute(
                "SELECT batch_id, state, count(*) FROM batch_items WHERE batch_id IN (SELECT unnest(?::VARCHAR[]))"
                " GROUP BY ALL ORDER BY ALL", [[r[0] for r in rows]]).fetchall():
            counts.setdefault(batch_id, {})[state] = n
    return rows, counts


def _observation(ws: Workspace) -> tuple[str, dg.AssetObservation | None]:
    """(a digest of the ledger's state, the observation showing it; None when there is no batch)."""
    rows, counts = ledger_summary(ws)
    digest = stable_hash([[str(v) for v in r] for r in rows] + [counts])[:16]
    if not rows:
        return digest, None
    lines = ["| batch | vendor | vendor id | deployment | state | requests | items | created | collected |",
             "|---|---|---|---|---|---|---|---|---|"]
    for batch_id, vendor, vendor_id, dep, state, n, created, collected, error in rows:
        items = ", ".join(f"{s} {c}" for s, c in counts.get(batch_id, {}).items())
        state = f"{state} ({error})" if error else state
        lines.append(f"| `{batch_id}` | {vendor} | {vendor_id or ''} | {dep} | {state} | {n} | {items} | "
                     f"{created or ''} | {collected or ''} |")
    live = [r for r in rows if r[4] not in ledger.SETTLED_STATES]
    return digest, dg.AssetObservation("vendor_batches", metadata={
        "outstanding": len(live), "requests_outstanding": sum(r[5] for r in live),
        "batches": dg.MetadataValue.md("\n".join(lines))})


def _requests(context, ws: Workspace, ready: list[RunRef], launches: int) -> list[dg.RunRequest]:
    """One `run_layers` run per suite over the cells of its ready runs (its config names exactly them)."""
    cells = {run: cell for cell, run in registered_cells(ws, {r.suite for r in ready}).items()}
    out = []
    for suite in sorted({r.suite for r in ready}):
        runs = [r for r in ready if r.suite == suite and r in cells]
        if not runs:
            continue
        keys = sorted(r.key for r in runs)
        out.append(dg.RunRequest(
            run_key=f"{SENSOR}:{suite}:{stable_hash(keys)[:12]}:{launches}",
            run_config={"ops": {"layers": {"config": {"runs": keys}}}},
            tags={"medhelm/suite": suite, "medhelm/launched_by": SENSOR,
                  **grid_range_tags(context.instance, [cells[r] for r in runs])}))
    return out


@dg.sensor(name=SENSOR, job_name="run_layers", minimum_interval_seconds=60,
           default_status=dg.DefaultSensorStatus.STOPPED,
           description="Collect the vendors' batches medhelm-run submitted (--batch, --no-wait), batch the jury "
                       "behind collected answers, and launch run_layers for the runs no batch holds any more.")
def batch_sensor(context: dg.SensorEvaluationContext, medhelm: MedhelmResource):
    # Here, not at the top: the vendors' SDKs it loads would slow every load of the code location.
    from medhelm_core.run.batch_pass import batch_pass, batch_runs

    ws = medhelm.workspace()
    cursor = json.loads(context.cursor) if context.cursor else {}
    launched, launches = set(cursor.get("launched", [])), int(cursor.get("launches", 0))
    if not ws.store.exists():
        return dg.SkipReason("no store yet")
    watched = batch_runs(ws)
    report = batch_pass(ws, watched, wait=False, jury_only=True) if watched or ledger.outstanding(ws.store) else None
    pending = {r.key for r in report.pending_runs} if report is not None else set()
    for error in report.errors if report is not None else []:
        context.log.warning(error)
    # Forget a run once complete, or held by a batch again: it is launched again when that batch is collected.
    launched = {k for k in launched if k in {r.key for r in watched} and k not in pending}
    ready = [r for r in watched if r.key not in pending and r.key not in launched]
    requests = _requests(context, ws, ready, launches) if ready else []
    launched |= {r.key for r in ready}
    digest, observation = _observation(ws)
    events = [observation] if observation is not None and digest != cursor.get("ledger") else []
    new_cursor = json.dumps({"launched": sorted(launched), "launches": launches + bool(requests), "ledger": digest})
    if not requests:
        skip = (report.summary_line() if report is not None and (report.collected or report.submitted)
                else f"{len(pending)} run(s) wait on {len(report.outstanding) if report else 0} batch(es)")
        return dg.SensorResult(skip_reason=skip, cursor=new_cursor, asset_events=events)
    return dg.SensorResult(run_requests=requests, cursor=new_cursor, asset_events=events)


BATCH_SENSORS = [batch_sensor]
