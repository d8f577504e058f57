"""MentalHealthScenario (HELM `mental_health_scenario.py`): `pandas.read_csv`; per row a
PassageQuestionInput with an empty passage, so the text starts with "\\nQuestion: Topic: ...";
values are formatted as pandas parsed them (`dialogue_type` 2 -> "2", 2.0 if the column has a NaN,
a missing value -> "nan"); reference = `gold_counselor_response`. All instances are split "test",
ids left unset.
"""
from __future__ import annotations

from typing import Any

from medhelm_core.catalog import Benchmark
from medhelm_core.helm_types import TEST_SPLIT, instance, passage_question_text, reference
from medhelm_core.scenarios.common import (
    data_path_file,
    data_path_files,
    py_value,
    read_csv_frame,
    row_value,
)


def load(bench: Benchmark, args: dict[str, Any]) -> list[dict]:
    entry = bench.name
    spec = bench.text["scenario"]
    path = data_path_file(args, entry)
    df = read_csv_frame(path, entry, "data_path")
    instances = []
    for _, row in df.iterrows():
        question = spec["question_template"].format(
            topic=row_value(row, "topic", entry, path),
            dialogue_type=row_value(row, "dialogue_type", entry, path),
            context=row_value(row, "context", entry, path),
        )
        text = passage_question_text(
            spec["passage"],
            question,
            passage_prefix=spec["passage_prefix"],
            question_prefix=spec["question_prefix"],
            separator=spec["separator"],
        )
        gold = py_value(row_value(row, "gold_counselor_response", entry, path))
        instances.append(instance(text, [reference(gold, True)], TEST_SPLIT))
    return instances


files = data_path_files  # the one data file is the run entry's data_path
