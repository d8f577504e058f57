"""MedQA and MedMCQA (HELM `med_qa_scenario.py`, `med_mcqa_scenario.py`): JSONL files from
Google-Drive zips.

* MedQAScenario (run entry `medhelm_med_qa`): `phrases_no_exclude_{train,dev,test}.jsonl` (member
  `data_clean/questions/US/4_options/` of the zip) -> train / valid / test, in that order; each
  line `json.loads(line.rstrip())`, exactly four `options` (file order A-D), text
  `answer.rstrip('"').rstrip()`, correct iff the key equals `answer_idx`. Train rows only shift the
  `id<n>` numbering of valid/test (zero-shot runs never use them).
* MedMCQAScenario (run entry `medhelm_med_mcqa`): `train.json` -> train, `dev.json` -> **valid**
  (JSONL despite the name; the test set is not released); references `opa`..`opd` in that order,
  correct iff the 1-based option index equals `cop`.
"""
from __future__ import annotations

import json
from typing import Any

from medhelm_core import data_sources as ds
from medhelm_core.helm_types import instance, reference
from medhelm_core.errors import MedhelmError
from medhelm_core.scenarios.public._base import parse_error, register_public, text


def _members(entry: str) -> list[tuple[str, ds.Located]]:
    data = text(entry)["data"]
    prefix = f"{data['member_dir']}/" if data.get("member_dir") else ""
    return [(split, ds.fetch_member(ds.ZipMember(entry, name, data["zip_name"], data["url"], prefix + name)))
            for split, name in data["files"].items()]


def _json_lines(entry: str, located: ds.Located):
    with located.open_text() as f:
        for number, line in enumerate(f, 1):
            try:
                yield json.loads(line.rstrip())
            except ValueError as e:
                raise parse_error(entry, f"line {number} of {located}", e) from None


def _med_qa_load(args: dict[str, Any]) -> list[dict]:
    instances = []
    for split, located in _members("medhelm_med_qa"):
        for example in _json_lines("medhelm_med_qa", located):
            if len(example["options"]) != 4:
                raise MedhelmError(f"medhelm_med_qa: expected 4 possible answer choices: {example['options']}")
            refs = [reference(answer.rstrip('"').rstrip(), index == example["answer_idx"])
                    for index, answer in example["options"].items()]
            instances.append(instance(example["question"], refs, split))
    return instances


def _med_mcqa_load(args: dict[str, Any]) -> list[dict]:
    option_index = text("medhelm_med_mcqa")["scenario"]["option_index"]
    instances = []
    for split, located in _members("medhelm_med_mcqa"):
        for example in _json_lines("medhelm_med_mcqa", located):
            refs = [reference(example[option], index == example["cop"]) for option, index in option_index.items()]
            instances.append(instance(example["question"], refs, split))
    return instances


def _files(entry: str) -> list[str]:
    return list(dict.fromkeys(str(located.path) for _, located in _members(entry)))


register_public("medhelm_med_qa", _med_qa_load, lambda args: _files("medhelm_med_qa"))
register_public("medhelm_med_mcqa", _med_mcqa_load, lambda args: _files("medhelm_med_mcqa"))
