"""A suite online and by batch, side by side: calls, spend and wall time of medhelm-run.

    .venv/bin/python perf/bench_batch.py [--instances 50] [--poll-seconds 0.2] [--model-prices 0.15,0.60]
                                         [--judge-prices 2.50,10.00]

Setup: the golden synthetic suite `oracle-private` (6 runs, 2 of them with a jury of three judge
calls per instance) laid out twice, every deployment at one mock vendor that serves both APIs
(tests/mock_openai_batch.py: OpenAI's Batch API in front of the repo's mock model server), priced
per 1M prompt / completion tokens (the models at gpt-4o-mini's list prices, the judge at gpt-4o's, by
default). `medhelm-run` runs the suite once online and once with `--batch`, each in a fresh output
folder, then once more each (a rerun with nothing new).

Reported per mode: calls answered online and by batch, batches created, dollars recorded in
`completions` (model and judge apart), wall time of the command. The mock vendor ends a batch within
a few polls; a real one takes minutes to hours (at most 24), so the wall time by batch here is only
medhelm's own overhead (submitting, polling every `--poll-seconds`, collecting).
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import duckdb

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.mock_openai_batch import MockBatchServer  # noqa: E402
from tests.mock_server import MockServer  # noqa: E402
from tests.oracle import SYNTHETIC  # noqa: E402
from tests.parity import lay_out_inputs  # noqa: E402

JUDGE = "mockai/mock-judge"


def lay_out(root: Path, url: str, poll: float, model_prices: tuple[float, float],
            judge_prices: tuple[float, float]) -> None:
    env = lay_out_inputs(SYNTHETIC / "inputs", root, url) / "prod_env"
    (env / "credentials.conf").write_text('mockaiApiKey: "sk-mock-not-a-secret"\n')
    (env / "medhelm_deployments.yaml").write_text(
        "deployments:\n"
        f'  "mockai/*": {{batch_poll_seconds: {poll}, input_per_million: {model_prices[0]}, '
        f"output_per_million: {model_prices[1]}}}\n"
        f'  "{JUDGE}": {{input_per_million: {judge_prices[0]}, output_per_million: {judge_prices[1]}}}\n')


def medhelm_run(root: Path, instances: int, *flags: str) -> float:
    start = time.perf_counter()
    subprocess.run([str(ROOT / ".venv" / "bin" / "medhelm-run"), "--conf-paths", "work/conf/private.conf",
                    "--suite", "bench", "--max-eval-instances", str(instances), "-o", "out",
                    "--local-path", "work/prod_env", *flags], cwd=root, check=True,
                   env={**os.environ, "DAGSTER_HOME": str(root / "dagster_home")},
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - start


def spend(root: Path) -> tuple[float, float, int]:
    """(model USD, judge USD, completions) recorded in the store."""
    conn = duckdb.connect(str(root / "out" / "medhelm.duckdb"), read_only=True)
    try:
        model, judge, n = conn.execute(
            "SELECT sum(cost_usd) FILTER (WHERE model_deployment <> ?),"
            " sum(cost_usd) FILTER (WHERE model_deployment = ?), count(*) FROM completions", [JUDGE, JUDGE]).fetchone()
    finally:
        conn.close()
    return model or 0.0, judge or 0.0, n


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--instances", type=int, default=50)
    ap.add_argument("--poll-seconds", type=float, default=0.2)
    ap.add_argument("--model-prices", default="0.15,0.60")
    ap.add_argument("--judge-prices", default="2.50,10.00")
    args = ap.parse_args()
    prices = [tuple(float(x) for x in p.split(",")) for p in (args.model_prices, args.judge_prices)]
    upstream = MockServer()
    vendor = MockBatchServer(upstream=upstream.base_url)
    rows = []
    try:
        with tempfile.TemporaryDirectory() as tmp:
            for mode, flags in (("online", ()), ("batch", ("--batch",))):
                root = Path(tmp) / mode
                root.mkdir()
                lay_out(root, vendor.base_url, args.poll_seconds, *prices)
                before = (len(vendor.online), len(vendor.answered), vendor.creates)
                seconds = medhelm_run(root, args.instances, *flags)
                online, batched, creates = (len(vendor.online) - before[0], len(vendor.answered) - before[1],
                                            vendor.creates - before[2])
                rerun_before = (len(vendor.online), len(vendor.answered))
                rerun = medhelm_run(root, args.instances, *flags)
                rerun_calls = len(vendor.online) + len(vendor.answered) - sum(rerun_before)
                model, judge, stored = spend(root)
                rows.append((mode, online, batched, creates, stored, model, judge, seconds, rerun, rerun_calls))
    finally:
        vendor.close()
        upstream.close()
    print(f"oracle-private, --max-eval-instances {args.instances}: 6 runs (2 with a jury); models at "
          f"${prices[0][0]}/${prices[0][1]}, judge at ${prices[1][0]}/${prices[1][1]} per 1M tokens; "
          f"poll every {args.poll_seconds} s")
    print(f"{'mode':<7} {'online calls':>12} {'batched':>8} {'batches':>8} {'stored':>7} {'model USD':>10} "
          f"{'judge USD':>10} {'total USD':>10} {'wall s':>7} {'rerun s':>8} {'rerun calls':>11}")
    for mode, online, batched, creates, stored, model, judge, seconds, rerun, rerun_calls in rows:
        print(f"{mode:<7} {online:>12,} {batched:>8,} {creates:>8} {stored:>7,} {model:>10.4f} {judge:>10.4f} "
              f"{model + judge:>10.4f} {seconds:>7.1f} {rerun:>8.1f} {rerun_calls:>11}")
    online_usd, batch_usd = (r[5] + r[6] for r in rows)
    print(f"batch / online spend: {batch_usd / online_usd:.3f}")


if __name__ == "__main__":
    main()
