"""MedQAScenario (HELM `med_qa_scenario.py`, run entry `medhelm_med_qa`):
`phrases_no_exclude_{train,dev,test}.jsonl` (member `data_clean/questions/US/4_options/` of the
Google-Drive zip) -> train / valid / test, in that order; each line `json.loads(line.rstrip())`,
exactly four `options` (file order A-D), text `answer.rstrip('"').rstrip()`, correct iff the key
equals `answer_idx`. Train rows only shift the `id<n>` numbering of valid/test (zero-shot runs
never use them).
"""
from __future__ import annotations

from typing import Any

from medhelm_core.catalog import Benchmark
from medhelm_core.errors import MedhelmError
from medhelm_core.helm_types import instance, reference
from medhelm_core.scenarios.public import med_qa
from medhelm_core.scenarios.public.base import no_args as check  # noqa: F401  (HELM has no constructor args)


def files(bench: Benchmark, args: dict[str, Any]) -> list[str]:
    return med_qa.files(bench)


def load(bench: Benchmark, args: dict[str, Any]) -> list[dict]:
    instances = []
    for split, located in med_qa.members(bench):
        for example in med_qa.json_lines(bench, located):
            if len(example["options"]) != 4:
                raise MedhelmError(f"{bench.name}: expected 4 possible answer choices: {example['options']}")
            refs = [reference(answer.rstrip('"').rstrip(), index == example["answer_idx"])
                    for index, answer in example["options"].items()]
            instances.append(instance(example["question"], refs, split))
    return instances
