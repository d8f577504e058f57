"""MedCalcBenchScenario (HELM `medcalc_bench_scenario.py`): split `test`; input
PassageQuestionInput("Patient note: " + note + "\\n", "\\n", "Question: " + question + "\\n");
reference `Ground Truth Answer`; `extra_data = {category, upper_limit, lower_limit}`;
`id = Row Number` (an int in v1.0). HELM 0.5.16 loads `ncbi/MedCalc-Bench` unpinned (today v1.2,
1,100 rows); we pin the v1.0 content the golden run used (`ncbi/MedCalc-Bench-v1.0` at a fixed
revision online; `huggingface/ncbi__MedCalc-Bench/test.parquet` in a mirror). The revision is
recorded in the cache's SOURCES.json.
"""
from __future__ import annotations

from typing import Any

from medhelm_core.catalog import Benchmark
from medhelm_core.errors import MedhelmError
from medhelm_core.helm_types import TEST_SPLIT, instance, passage_question_text, reference
from medhelm_core.scenarios.common import py_value
from medhelm_core.scenarios.public import huggingface


def check(bench: Benchmark, args: dict[str, Any]) -> None:
    if args:
        raise MedhelmError(
            f"{bench.name}: MedCalcBenchScenario takes no arguments, got {sorted(args)} (HELM's "
            "get_medcalc_bench_spec(version=...) passes `version` to a constructor without it and fails too)")


def files(bench: Benchmark, args: dict[str, Any]) -> list:
    return huggingface.files(bench)


def load(bench: Benchmark, args: dict[str, Any]) -> list[dict]:
    prefix = bench.text["scenario"]["passage_prefix"]
    instances = []
    for row in huggingface.rows(bench):
        input_text = passage_question_text(row["Patient Note"] + "\n", row["Question"] + "\n", passage_prefix=prefix)
        extra = {"category": row["Category"], "upper_limit": row["Upper Limit"], "lower_limit": row["Lower Limit"]}
        instances.append(instance(input_text, [reference(row["Ground Truth Answer"], True)], TEST_SPLIT,
                                  id=py_value(row["Row Number"]), extra_data=extra))
    return instances
