"""MedHalluScenario (HELM `medhallu_scenario.py`): `UTAustin-AIHealth/MedHallu` `pqa_labeled`
split `train` at HELM's pinned revision; two test instances per row (ground truth -> "0",
hallucinated -> "1"); `Knowledge` (a list of strings) renders as its Python list repr.
"""
from __future__ import annotations

from typing import Any

from medhelm_core.catalog import Benchmark
from medhelm_core.helm_types import TEST_SPLIT, instance, reference
from medhelm_core.scenarios.public import huggingface
from medhelm_core.scenarios.public.base import no_args as check  # noqa: F401  (HELM has no constructor args)


def files(bench: Benchmark, args: dict[str, Any]) -> list:
    return huggingface.files(bench)


def load(bench: Benchmark, args: dict[str, Any]) -> list[dict]:
    spec = bench.text["scenario"]
    template = spec["input_template"]
    instances = []
    for row in huggingface.rows(bench):
        for answer, label in ((row["Ground Truth"], spec["ground_truth_label"]),
                              (row["Hallucinated Answer"], spec["hallucinated_label"])):
            input_text = template.format(knowledge=row["Knowledge"], question=row["Question"], answer=answer)
            instances.append(instance(input_text, [reference(label, True)], TEST_SPLIT))
    return instances
