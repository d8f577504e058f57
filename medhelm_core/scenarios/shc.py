"""The ten Stanford Health Care private multiple-choice scenarios (HELM `shc_*_scenario.py`).

Each reads a CSV (`prompt`/`question`, `context`, `label`) with `csv.DictReader`, renders one sentence
template per row and keeps the rows in a dict keyed by the rendered prompt: a repeated prompt keeps
its first position but takes the last row's label. `shc_ent_med` skips rows whose label is exactly
"" and numbers the kept rows ("1 Provide an answer..."); `shc_sequoia_med` numbers every row with a
leading space (" 1 Provide an answer..."), reads its question from the `question` column and so never
deduplicates. Every instance has one reference per answer choice, the label's tagged correct; a
label outside the choices aborts (HELM: `assert`).

The loader the ten benchmark folders share: each `medhelm_core/benchmarks/private/shc_<x>_med/scenario.py`
uses `load` and `files` with its own `bench` (literal text: that folder's benchmark.yaml). scenario.json
and HELM's ScenarioMetadata are the catalog's defaults (`scenario:` / `helm_metadata:`; null = HELM
0.5.16's class defines no get_metadata(): the base class raises NotImplementedError, which
helm-summarize's schema auto-generation skips).
"""
from __future__ import annotations

import csv
from typing import TYPE_CHECKING, Any

from medhelm_core.errors import MedhelmError
from medhelm_core.helm_types import TEST_SPLIT, instance, reference
from medhelm_core.scenarios.common import (
    data_path_file,
    data_path_files,
    first_line,
    missing_column,
    unlimited_csv_fields,
)

if TYPE_CHECKING:  # for annotations only (nothing imported at run time)
    from medhelm_core.catalog import Benchmark


def _column(row: dict[str, Any], column: str, entry: str, path: str) -> Any:
    try:
        return row[column]
    except KeyError:
        raise missing_column(entry, path, column) from None


def _read_prompts(bench: Benchmark, path: str) -> dict[str, Any]:
    """prompt -> label, in first-seen order (HELM's `create_benchmark`)."""
    entry = bench.name
    spec = bench.text["scenario"]
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


def load(bench: Benchmark, args: dict[str, Any]) -> list[dict]:
    entry = bench.name
    choices: list[str] = list(bench.text["scenario"]["answer_choices"])
    path = data_path_file(args, entry)
    instances = []
    for prompt, answer in _read_prompts(bench, path).items():
        if answer not in choices:
            raise MedhelmError(
                f"{entry}: label {answer!r} is not one of {choices} in data_path file {path}"
            )
        refs = [reference(choice, choice == answer) for choice in choices]
        instances.append(instance(prompt, refs, TEST_SPLIT))
    return instances


files = data_path_files  # the one data file is the run entry's data_path
