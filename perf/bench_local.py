"""Local Hugging Face models: HELM's one request at a time against our batching, side by side in one run.

The model is the tiny GPT-2-family model shipped in examples/local-hf (HELM 0.5.16's output for it is
../shared/oracle/local-hf). Two workloads:

* `prefill-bound`: the 40 requests HELM sent it in that oracle (pubmed_qa, medbullets, medcalc_bench,
  medhallu: prompts of 300 to 1,020 tokens, max_tokens 1 to 10), each asked --repeat times;
* `decode-bound`: the same prompts cut to their last 200 characters, with max_tokens 64, as in
  MedHELM's open-ended scenarios (max_tokens 128 to 1,024), where generation dominates.

1. `HELM's way (batch 1)`: one `generate` per request, in order: what HELM's HuggingFaceClient does
   (its server runs one request at a time under a lock); here our implementation of it, the
   code path `batch_size: 1` takes.
2. `batched @N`: --threads callers submit every request at once through the model's batcher
   (`batch_size` N), as the engine's workers do during a suite.

Every row's answers (generated token ids) are compared with row 1's: `identical` must say yes.

    .venv/bin/python perf/bench_local.py [--repeat 2] [--batch-sizes 4,8,16] [--threads 32]
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from medhelm_core.clients import client_for_deployment  # noqa: E402
from medhelm_core.helm_config.deployments import Credentials, load_model_registry  # noqa: E402
from tests.oracle import SHARED  # noqa: E402

EXAMPLE = ROOT / "examples" / "local-hf"
ORACLE_RUNS = SHARED / "oracle" / "local-hf" / "benchmark_output" / "runs" / "local-hf"


def oracle_requests() -> list[dict]:
    out = []
    for run in sorted(ORACLE_RUNS.iterdir()):
        state = run / "scenario_state.json"
        if state.is_file():
            out += [s["request"] for s in json.loads(state.read_text())["request_states"]]
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--batch-sizes", default="4,8,16")
    ap.add_argument("--threads", type=int, default=32)
    args = ap.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.chdir(EXAMPLE)
    registry = load_model_registry("prod_env")
    dep = registry.get_deployment("huggingface/tiny-gpt2")
    client = client_for_deployment(dep, Credentials(), tokenizer_config=registry.tokenizer_configs[dep.tokenizer_name])
    oracle = oracle_requests()
    workloads = {
        "prefill-bound": oracle * args.repeat,
        "decode-bound": [dict(r, prompt=r["prompt"][-200:], max_tokens=64) for r in oracle] * args.repeat,
    }
    batcher = client.batcher(oracle[0]["model"])
    model = batcher.model
    print(f"tiny model on {model.device}, torch threads {__import__('torch').get_num_threads()}; "
          f"{len(oracle)} requests of the local-hf oracle x {args.repeat} per workload")
    print(f"{'workload':<15}{'row':<22}{'seconds':>9}{'req/s':>9}{'ratio':>7}  identical  batches  kept  redone")
    for workload, requests in workloads.items():
        raws = [client.raw_request(r) for r in requests]
        model.serve(raws[0])  # warm-up (first-call allocations)
        start = time.perf_counter()
        reference = [model.serve(r)["ids"] for r in raws]
        rows = [("HELM's way (batch 1)", time.perf_counter() - start, True, {})]
        for size in [int(s) for s in args.batch_sizes.split(",")]:
            batcher.batch_size = size
            model.checked_batches, model.batching_ok = 0, True
            before = dict(model.counts)
            start = time.perf_counter()
            with ThreadPoolExecutor(args.threads) as pool:
                got = list(pool.map(lambda r: batcher.submit(r)["ids"], raws))
            elapsed = time.perf_counter() - start
            rows.append((f"batched @{size}", elapsed, got == reference,
                         {k: model.counts[k] - before[k] for k in model.counts}))
        n, base = len(raws), len(raws) / rows[0][1]
        for name, seconds, same, counts in rows:
            print(f"{workload:<15}{name:<22}{seconds:>9.2f}{n / seconds:>9.1f}{n / seconds / base:>7.2f}  "
                  f"{'yes' if same else 'NO':<9}  {counts.get('batches', 0):>7}  {counts.get('batched', 0):>4}  "
                  f"{counts.get('redone', 0):>6}")


if __name__ == "__main__":
    main()
