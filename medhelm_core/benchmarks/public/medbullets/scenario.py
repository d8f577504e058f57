"""MedBulletsScenario (HELM `medbullets_scenario.py`): `medbullets_op5.csv` -> test; rows lacking
`question`, `answer_idx` or `opa` are skipped; always five references A-E from `opa`..`ope`
(a missing column -> "Not applicable"), correct iff the letter equals `answer_idx`. Read with
`csv.DictReader` over universal newlines, as HELM (`scenarios/public/csv_files.py`).
"""
from __future__ import annotations

from typing import Any

from medhelm_core.catalog import Benchmark
from medhelm_core.helm_types import TEST_SPLIT, instance, reference
from medhelm_core.scenarios.public import csv_files
from medhelm_core.scenarios.public.base import no_args as check, upstream_file  # noqa: F401  (HELM has no constructor args)


def files(bench: Benchmark, args: dict[str, Any]) -> list:
    return [upstream_file(bench)]


def load(bench: Benchmark, args: dict[str, Any]) -> list[dict]:
    spec = bench.text["scenario"]
    missing = spec["missing_option"]
    instances = []
    for row in csv_files.rows(bench):
        if not row.get("question") or not row.get("answer_idx") or not row.get("opa"):
            continue  # HELM prints "Skipping invalid row"
        option_map = {letter: row.get(col, missing) for letter, col in zip(spec["answer_choices"], spec["option_columns"])}
        correct = row["answer_idx"]
        refs = [reference(option_map.get(letter, missing), letter == correct) for letter in spec["answer_choices"]]
        instances.append(instance(row["question"], refs, TEST_SPLIT))
    return instances
