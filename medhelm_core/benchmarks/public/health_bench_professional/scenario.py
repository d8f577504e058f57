"""HealthBenchProfessionalScenario (medhelm 0.8.0 `scenarios/health_bench_scenario.py`):
`healthbench_professional_eval.jsonl` of OpenAI's `assets.zip` -> test instances, one per line.

* Read as medhelm reads it: UTF-8, universal newlines, `json.loads` of every line.
* input = `Input(messages=row["conversation"].get("messages", []))` (text ""); no references; id = the
  line index as a string; extra_data = `{"rubrics": row.get("rubric_items", []), "prompt_id":
  row.get("id"), "physician_response": row.get("physician_response", "")}`: an absent physician
  response becomes "" (and is still compared with), a `null` one stays None (no comparison).
  `specialty` is not read.
* Online the zip is downloaded and the member read from it; a data mirror holds the member as
  `<mirror>/health_bench_professional/assets/healthbench_professional_eval.jsonl`.
"""
from __future__ import annotations

import json
from typing import Any

from medhelm_core import data_sources as ds
from medhelm_core.catalog import Benchmark
from medhelm_core.errors import MedhelmError
from medhelm_core.helm_types import TEST_SPLIT
from medhelm_core.scenarios.public.base import no_args as check  # noqa: F401  (no constructor args)
from medhelm_core.scenarios.public.base import parse_error


def _member(bench: Benchmark) -> ds.Located:
    data = bench.text["data"]
    return ds.fetch_member(ds.ZipMember(bench.name, data["mirror_name"], data["zip_name"], data["url"],
                                        data["member"]))


def files(bench: Benchmark, args: dict[str, Any]) -> list:
    return [str(_member(bench).path)]


def load(bench: Benchmark, args: dict[str, Any]) -> list[dict]:
    located = _member(bench)
    instances = []
    with located.open_text() as f:
        for idx, line in enumerate(f):
            try:
                row = json.loads(line)
            except ValueError as e:
                raise parse_error(bench.name, f"line {idx + 1} of {located}", e) from None
            try:
                messages = row["conversation"].get("messages", [])
            except (KeyError, TypeError, AttributeError) as e:
                raise MedhelmError(f"{bench.name}: line {idx + 1} of {located}: no conversation "
                                   f"({type(e).__name__}: {e}; medhelm fails here too)") from None
            instances.append({
                "input": {"text": "", "messages": messages},
                "references": [],
                "split": TEST_SPLIT,
                "id": str(idx),
                "extra_data": {"rubrics": row.get("rubric_items", []), "prompt_id": row.get("id"),
                               "physician_response": row.get("physician_response", "")},
            })
    return instances
