"""MedMCQAScenario (HELM `med_mcqa_scenario.py`, run entry `medhelm_med_mcqa`): from the
Google-Drive zip, `train.json` -> train, `dev.json` -> **valid** (JSONL despite the name; the test
set is not released); each line `json.loads(line.rstrip())`; references `opa`..`opd` in that
order, correct iff the 1-based option index equals `cop`.
"""
from __future__ import annotations

from typing import Any

from medhelm_core.catalog import Benchmark
from medhelm_core.helm_types import instance, reference
from medhelm_core.scenarios.public import med_qa
from medhelm_core.scenarios.public.base import no_args as check  # noqa: F401  (HELM has no constructor args)


def files(bench: Benchmark, args: dict[str, Any]) -> list[str]:
    return med_qa.files(bench)


def load(bench: Benchmark, args: dict[str, Any]) -> list[dict]:
    option_index = bench.text["scenario"]["option_index"]
    instances = []
    for split, located in med_qa.members(bench):
        for example in med_qa.json_lines(bench, located):
            refs = [reference(example[option], index == example["cop"]) for option, index in option_index.items()]
            instances.append(instance(example["question"], refs, split))
    return instances
