"""HealthBenchScenario (medhelm 0.8.0 `scenarios/health_bench_scenario.py`): simple-evals' HealthBench
JSONL (`2025-05-07-06-14-12_oss_eval.jsonl`) -> test instances, one per line, in file order.

* The file is read as medhelm reads it: UTF-8, universal newlines, `json.loads` of every line (a
  blank or broken line fails the scenario, as in medhelm).
* input = `Input(messages=row["prompt"])` (text ""); no references; id = the line index as a string;
  extra_data = `{"rubrics": row.get("rubrics", []), "example_tags": row.get("example_tags", []),
  "prompt_id": row.get("prompt_id")}` (`ideal_completions_data` and `canary` are not read).
"""
from __future__ import annotations

import json
from typing import Any

from medhelm_core.catalog import Benchmark
from medhelm_core.errors import MedhelmError
from medhelm_core.helm_types import TEST_SPLIT
from medhelm_core.scenarios.public.base import no_args as check  # noqa: F401  (no constructor args)
from medhelm_core.scenarios.public.base import parse_error, upstream_file


def files(bench: Benchmark, args: dict[str, Any]) -> list:
    return [upstream_file(bench)]


def load(bench: Benchmark, args: dict[str, Any]) -> list[dict]:
    path = upstream_file(bench)
    instances = []
    with open(path, "r", encoding="utf-8") as f:
        for idx, line in enumerate(f):
            try:
                row = json.loads(line)
            except ValueError as e:
                raise parse_error(bench.name, f"line {idx + 1} of {path}", e) from None
            if not isinstance(row, dict) or "prompt" not in row:
                raise MedhelmError(f"{bench.name}: line {idx + 1} of {path} has no 'prompt' (medhelm fails here too)")
            instances.append({
                "input": {"text": "", "messages": row["prompt"]},
                "references": [],
                "split": TEST_SPLIT,
                "id": str(idx),
                "extra_data": {"rubrics": row.get("rubrics", []), "example_tags": row.get("example_tags", []),
                               "prompt_id": row.get("prompt_id")},
            })
    return instances
