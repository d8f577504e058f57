"""The ten Stanford Health Care private multiple-choice scenarios (HELM `shc_*_scenario.py`).

Each reads a CSV (`prompt`/`question`, `context`, `label`) with `csv.DictReader`, renders one sentence
template per row and keeps the rows in a dict keyed by the rendered prompt: a repeated prompt keeps
its first position but takes the last row's label. `shc_ent_med` skips rows whose label is exactly
"" and numbers the kept rows ("1 Provide an answer..."); `shc_sequoia_med` numbers every row with a
leading space (" 1 Provide an answer..."), reads its question from the `question` column and so never
deduplicates. Every instance has one reference per answer choice, the label's tagged correct; a
label outside the choices aborts (HELM: `assert`).

Literal text: medhelm_core/benchmarks/shc.yaml.
"""
from __future__ import annotations

import copy
import csv
from typing import Any

from medhelm_core.helm_types import TEST_SPLIT, instance, reference
from medhelm_core.registry import MedhelmError, ScenarioDef, register_scenario
from medhelm_core.scenarios._common import (
    first_line,
    literal,
    missing_column,
    require_file,
    require_path_arg,
    scenario_json,
    unlimited_csv_fields,
)

SHC_ENTRIES = (
    "shc_bmt_med",
    "shc_cdi_med",
    "shc_conf_med",
    "shc_ent_med",
    "shc_gip_med",
    "shc_privacy_med",
    "shc_proxy_med",
    "shc_ptbm_med",
    "shc_sei_med",
    "shc_sequoia_med",
)


def shc_text(entry: str) -> dict[str, Any]:
    """The literal-text block of one SHC benchmark (run_spec, scenario, helm_metadata)."""
    return literal("shc")[entry]


def _column(row: dict[str, Any], column: str, entry: str, path: str) -> Any:
    try:
        return row[column]
    except KeyError:
        raise missing_column(entry, path, column) from None


def _read_prompts(entry: str, path: str) -> dict[str, Any]:
    """prompt -> label, in first-seen order (HELM's `create_benchmark`)."""
    spec = shc_text(entry)["scenario"]
    template: str = spec["prompt_template"]
    question_column: str = spec["question_column"]
    skip_empty_label: bool = spec["skip_empty_label"]
    data: dict[str, Any] = {}
    counter = 1
    try:
        # Same open() as HELM: platform default encoding, universal newlines (so a CRLF inside a
        # quoted field reads as "\n").
        with unlimited_csv_fields(), open(path, "r") as file:
            for row in csv.DictReader(file):
                if skip_empty_label and _column(row, "label", entry, path) == "":
                    continue
                question = _column(row, question_column, entry, path)
                context = _column(row, "context", entry, path)
                answer = _column(row, "label", entry, path)
                # Short rows give None values, which HELM's f-strings render as "None".
                prompt = template.format(counter=counter, question=question, context=context)
                data[prompt] = answer
                counter += 1
    except (csv.Error, UnicodeDecodeError) as e:
        raise MedhelmError(f"{entry}: cannot parse data_path file {path}: {first_line(e)}") from None
    return data


def _make_scenario(entry: str) -> ScenarioDef:
    text = shc_text(entry)
    spec = text["scenario"]
    choices: list[str] = list(spec["answer_choices"])

    def load(args: dict[str, Any]) -> list[dict]:
        path = require_path_arg(args, "data_path", entry)
        require_file(path, entry, "data_path")
        instances = []
        for prompt, answer in _read_prompts(entry, path).items():
            if answer not in choices:
                raise MedhelmError(
                    f"{entry}: label {answer!r} is not one of {choices} in data_path file {path}"
                )
            refs = [reference(choice, choice == answer) for choice in choices]
            instances.append(instance(prompt, refs, TEST_SPLIT))
        return instances

    def metadata(args: dict[str, Any]) -> dict[str, Any]:
        return scenario_json(spec["name"], spec["description"], spec["tags"], spec["definition_path"])

    def data_files(args: dict[str, Any]) -> list[str]:
        return [require_path_arg(args, "data_path", entry)]

    def helm_metadata(args: dict[str, Any]) -> dict[str, Any]:
        meta = text["helm_metadata"]
        if meta is None:
            # HELM 0.5.16's SHCSEIMedScenario defines no get_metadata(); the base class raises
            # NotImplementedError, which helm-summarize's schema auto-generation skips.
            raise NotImplementedError(f"{text['run_spec']['scenario_class']} has no get_metadata() in HELM")
        return copy.deepcopy(meta)

    return register_scenario(
        ScenarioDef(
            class_name=text["run_spec"]["scenario_class"],
            tier="private",
            load=load,
            metadata=metadata,
            data_files=data_files,
            helm_metadata=helm_metadata,
        )
    )


SHC_SCENARIOS: dict[str, ScenarioDef] = {entry: _make_scenario(entry) for entry in SHC_ENTRIES}
