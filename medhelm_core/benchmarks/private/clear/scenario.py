"""CLEAR (HELM `clear_scenario.py`): `<data_path>/<condition>.xlsx`, read with `pandas.read_excel`.

Per row: `text = str(row.get("text", "")).strip()`, `label = str(row.get("result_human", "")).strip()`;
rows where either is "" are skipped. Labels "1"/"0"/"2" map to the three answer texts; anything else
(e.g. "1.0" when the column holds a NaN and pandas reads it as float, or "nan") stays as is and so
matches no reference: such an instance has no correct reference. An empty `text` cell is NaN, which
`str()` turns into the 4-character text "nan" -- HELM keeps that row.

scenario.json's name and tags depend on the condition (`clear_{condition}`, `{condition_dashed}`), and
HELM builds the scenario (which validates the condition) before get_metadata(), so both are defined here.
"""
from __future__ import annotations

import copy
import os
from typing import Any

from medhelm_core.catalog import Benchmark
from medhelm_core.errors import MedhelmError
from medhelm_core.helm_types import TEST_SPLIT, instance, reference
from medhelm_core.scenarios.common import (
    first_line,
    require_arg,
    require_file,
    require_path_arg,
    scenario_json,
)


def _condition(bench: Benchmark, args: dict[str, Any]) -> str:
    condition = require_arg(args, "condition", bench.name)
    conditions = bench.text["scenario"]["conditions"]
    if condition not in conditions:
        raise MedhelmError(f"{bench.name}: condition {condition!r} not supported; available conditions: {conditions}")
    return condition


def excel_path(bench: Benchmark, args: dict[str, Any]) -> str:
    """`os.path.join(data_path, f"{condition}.xlsx")`, as HELM builds it."""
    return os.path.join(require_path_arg(args, "data_path", bench.name), f"{_condition(bench, args)}.xlsx")


def load(bench: Benchmark, args: dict[str, Any]) -> list[dict]:
    import pandas as pd

    entry = bench.name
    spec = bench.text["scenario"]
    condition = _condition(bench, args)
    path = excel_path(bench, args)
    require_file(path, entry, "data_path", f"data_path={args['data_path']}, condition={condition}")
    try:
        df = pd.read_excel(path)
    except Exception as e:  # openpyxl/zipfile/pandas raise many types for a bad workbook
        raise MedhelmError(f"{entry}: cannot read Excel file {path}: {first_line(e)}") from None

    condition_text = spec["condition_prompts"][condition]
    choices = [c.format(condition_text=condition_text) for c in spec["answer_choices"]]
    label_mapping = {k: v.format(condition_text=condition_text) for k, v in spec["label_mapping"].items()}
    template: str = spec["input_template"]

    instances = []
    for _, row in df.iterrows():
        text = str(row.get("text", "")).strip()
        label = str(row.get("result_human", "")).strip()
        if not text or not label:
            continue
        mapped_label = label_mapping.get(label, label)
        refs = [reference(choice, choice == mapped_label) for choice in choices]
        input_text = template.format(condition_text=condition_text, text=text)
        instances.append(instance(input_text, refs, TEST_SPLIT))
    return instances


def metadata(bench: Benchmark, args: dict[str, Any]) -> dict[str, Any]:
    spec = bench.text["scenario"]
    condition = _condition(bench, args)
    tags = [t.format(condition_dashed=condition.replace("_", "-")) for t in spec["tags"]]
    return scenario_json(spec["name"].format(condition=condition), spec["description"], tags, spec["definition_path"])


def files(bench: Benchmark, args: dict[str, Any]) -> list[str]:
    return [excel_path(bench, args)]


def helm_metadata(bench: Benchmark, args: dict[str, Any]) -> dict[str, Any]:
    _condition(bench, args)  # HELM builds the scenario (which validates the condition) before get_metadata()
    return copy.deepcopy(bench.text["helm_metadata"])
