"""MedecScenario (HELM `medec_scenario.py`): the MEDEC-MS test CSV -> test; rows with an empty
`Sentences` are skipped; input = `Sentences.strip()`; one correct reference:
`f"{Error Sentence ID} {Corrected Sentence}"` when `Error Flag` is 1, the corrected sentence is
not "NA" and the id is not "-1", else "CORRECT". Read with `csv.DictReader` over universal
newlines, as HELM (`scenarios/public/csv_files.py`).
"""
from __future__ import annotations

from typing import Any

from medhelm_core.catalog import Benchmark
from medhelm_core.helm_types import TEST_SPLIT, instance, reference
from medhelm_core.scenarios.public import csv_files
from medhelm_core.scenarios.public.base import no_args as check, parse_error, upstream_file  # noqa: F401  (check: HELM has no constructor args)


def files(bench: Benchmark, args: dict[str, Any]) -> list:
    return [upstream_file(bench)]


def load(bench: Benchmark, args: dict[str, Any]) -> list[dict]:
    correct_text = bench.text["scenario"]["correct_answer"]
    instances = []
    for row in csv_files.rows(bench):
        if not row.get("Sentences"):
            continue
        input_text = row["Sentences"].strip()
        try:
            error_flag = int(row.get("Error Flag", 0))
        except (TypeError, ValueError) as e:
            raise parse_error(bench.name, "the Error Flag column", e) from None
        sentence_id = row.get("Error Sentence ID", "-1").strip()
        corrected = row.get("Corrected Sentence", "").strip()
        if error_flag == 1 and corrected != "NA" and sentence_id != "-1":
            gold = f"{sentence_id} {corrected}"
        else:
            gold = correct_text
        instances.append(instance(input_text, [reference(gold, True)], TEST_SPLIT))
    return instances
