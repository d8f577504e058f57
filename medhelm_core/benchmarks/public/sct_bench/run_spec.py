"""`sct_bench` (medhelm 0.8.0 `get_sct_bench_spec(reason=False, few_shot=False)`): generation with
no instructions and max_tokens 200, SCTBenchMetric plus `get_basic_metric_specs([])`.

Both arguments go into the scenario args as given (a run entry gives strings: `"True"`), and the run
name gets `reason=True` / `few_shot=True` for each argument that is *truthy*. So `reason=False` from a
run entry (the string "False") is named `sct_bench:reason=True` and runs the reason prompt: medhelm's
bug, reproduced.
"""
from __future__ import annotations

from typing import Any

from medhelm_core.catalog import Benchmark
from medhelm_core.runspecs.public import build_public_run_spec


def run_spec(bench: Benchmark, reason: Any = False, few_shot: Any = False) -> dict:
    spec = build_public_run_spec(bench, {"reason": reason, "few_shot": few_shot})
    labels = bench.text["run_spec"]["name_parts"]
    parts = [labels[key] for key, value in (("reason", reason), ("few_shot", few_shot)) if value]
    if parts:
        spec["name"] = f"{spec['name']}:{','.join(parts)}"
    return spec
