"""MedXpertQATextScenario (medhelm 0.8.0 `medxpert_qa_text_scenario.py`): `TsinghuaC3I/MedXpertQA`
config `Text`, split `test` (no pinned revision) -> test, in dataset order; input = `question` as is
(it already lists the answer choices); one reference per entry of the `options` mapping, in its order
(A-J), correct iff the key equals `label`; `extra_data` = the row's `id`, `medical_task`,
`body_system`, `question_type`. Instance ids are left unset (the pipeline assigns `id0, id1, ...`).
"""
from __future__ import annotations

from typing import Any

from medhelm_core.catalog import Benchmark
from medhelm_core.helm_types import TEST_SPLIT, instance, reference
from medhelm_core.scenarios.public import huggingface
from medhelm_core.scenarios.public.base import no_args as check  # noqa: F401  (no constructor args upstream)


def files(bench: Benchmark, args: dict[str, Any]) -> list:
    return huggingface.files(bench)


def load(bench: Benchmark, args: dict[str, Any]) -> list[dict]:
    columns = bench.text["scenario"]["extra_data_columns"]
    instances = []
    for row in huggingface.rows(bench):
        label = row["label"]
        refs = [reference(text, letter == label) for letter, text in row["options"].items()]
        extra = {column: row[column] for column in columns}
        instances.append(instance(row["question"], refs, TEST_SPLIT, extra_data=extra))
    return instances
