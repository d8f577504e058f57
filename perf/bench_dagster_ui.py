"""The Dagster UI's "Materialize all" against `medhelm-run`, on the shipped example, in one run.

In a fresh copy of the checkout (its own DAGSTER_HOME and output folder):

1. `medhelm-run (first)`: scripts/example.sh: the demo server, medhelm-run on conf/example.conf
   (6 runs, 3 datasets, every model and judge call new), medhelm-summarize;
2. `medhelm-run (rerun)`: the same medhelm-run again: nothing is stale, so no call and no Dagster run;
3. `Materialize all`: `dg dev` on loopback, then the backfill the UI's button launches (every asset,
   every partition) through the webserver's GraphQL API, timed from launch to COMPLETED_SUCCESS. Every
   layer is materialized again from the stored answers (no model call); the time is mostly Dagster's:
   the backfill daemon launches one run per step of the graph (conf, datasets, summaries) and one
   per model column of the benchmark × model grid (the per-run layers; the two columns at once) at
   its ticks, each run a fresh process.

    .venv/bin/python perf/bench_dagster_ui.py
"""
from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.dagster_dev import DagsterDev, fresh_checkout  # noqa: E402

RUN = [".venv/bin/medhelm-run", "--conf-paths", "conf/example.conf", "--suite", "example", "--max-eval-instances", "10",
       "--local-path", "examples/prod_env"]


def timed(cmd: list[str], work: Path, env: dict) -> float:
    start = time.perf_counter()
    r = subprocess.run(cmd, cwd=work, env=env, capture_output=True, text=True)
    if r.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed: {r.stderr[-2000:]}")
    return time.perf_counter() - start


def main() -> None:
    tmp = Path(tempfile.mkdtemp(prefix="medhelm-bench-ui-"))
    work = fresh_checkout(tmp)
    env = {**{k: v for k, v in os.environ.items() if not k.startswith(("MEDHELM_", "DAGSTER_"))},
           "DAGSTER_HOME": str(work / ".dagster_home"), "MEDHELM_LOCAL_PATH": "examples/prod_env"}
    first = timed(["bash", "scripts/example.sh"], work, env)
    rerun = timed(RUN, work, env)
    dev = DagsterDev(work, env, tmp / "dg-dev.log")
    try:
        nodes = dev.graphql("{ assetNodes { assetKey { path } isExecutable isObservable } }")["assetNodes"]
        selection = [{"path": n["assetKey"]["path"]} for n in nodes if n["isExecutable"] and not n["isObservable"]]
        start = time.perf_counter()
        launched = dev.graphql("""mutation($p: LaunchBackfillParams!) { launchPartitionBackfill(backfillParams: $p) {
            ... on LaunchBackfillSuccess { backfillId } } }""", {"p": {"assetSelection": selection, "allPartitions": True}})
        backfill = launched["launchPartitionBackfill"]["backfillId"]
        while True:
            state = dev.graphql("""query($id: String!) { partitionBackfillOrError(backfillId: $id) {
                ... on PartitionBackfill { status runs(limit: 100) { id } } } }""", {"id": backfill})
            state = state["partitionBackfillOrError"]
            if state["status"] not in ("REQUESTED", "CANCELING"):
                break
            time.sleep(1)
        ui = time.perf_counter() - start
    finally:
        dev.stop()
    print(f"example: 6 runs x 10 instances, 3 datasets; {len(selection)} assets")
    print(f"{'row':<34}{'seconds':>9}{'ratio':>8}  Dagster runs")
    print(f"{'medhelm-run (first, + summarize)':<34}{first:>9.1f}{1.0:>8.2f}  3 + summarize")
    print(f"{'medhelm-run (rerun, nothing stale)':<34}{rerun:>9.1f}{rerun / first:>8.2f}  0")
    print(f"{'Materialize all (' + state['status'] + ')':<34}{ui:>9.1f}{ui / first:>8.2f}  {len(state['runs'])}")


if __name__ == "__main__":
    main()
