"""MediQAScenario (HELM `medi_qa_scenario.py`): `bigbio/mediqa_qa` split `test` (a script dataset:
parquet export online); input `QuestionText`; reference = `AnswerText` of the first answer with
`ReferenceRank == 1` ("" if none); `id = QID`.
"""
from __future__ import annotations

from typing import Any

from medhelm_core.catalog import Benchmark
from medhelm_core.helm_types import TEST_SPLIT, instance, reference
from medhelm_core.scenarios.public import huggingface
from medhelm_core.scenarios.public.base import no_args as check  # noqa: F401  (HELM has no constructor args)


def files(bench: Benchmark, args: dict[str, Any]) -> list:
    return huggingface.files(bench)


def _highest_ranked_answer(answers: list[dict]) -> str:
    for answer in answers:
        if answer["Answer"]["ReferenceRank"] != 1:
            continue
        return answer["Answer"]["AnswerText"]
    return ""


def load(bench: Benchmark, args: dict[str, Any]) -> list[dict]:
    instances = []
    for row in huggingface.rows(bench):
        q = row["QUESTION"]
        gold = _highest_ranked_answer(q["AnswerList"])
        instances.append(instance(q["QuestionText"], [reference(gold, True)], TEST_SPLIT, id=q["QID"]))
    return instances
