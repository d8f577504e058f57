"""CLEAR (HELM `clear_scenario.py`): `<data_path>/<condition>.xlsx`, read with `pandas.read_excel`.

Per row: `text = str(row.get("text", "")).strip()`, `label = str(row.get("result_human", "")).strip()`;
rows where either is "" are skipped. Labels "1"/"0"/"2" map to the three answer texts; anything else
(e.g. "1.0" when the column holds a NaN and pandas reads it as float, or "nan") stays as is and so
matches no reference: such an instance has no correct reference. An empty `text` cell is NaN, which
`str()` turns into the 4-character text "nan" -- HELM keeps that row.

Literal text: medhelm_core/benchmarks/clear.yaml.
"""
from __future__ import annotations

import copy
import os
from typing import Any

from medhelm_core.helm_types import TEST_SPLIT, instance, reference
from medhelm_core.registry import MedhelmError, ScenarioDef, register_scenario
from medhelm_core.scenarios._common import (
    first_line,
    literal,
    require_arg,
    require_file,
    require_path_arg,
    scenario_json,
)

ENTRY = "clear"


def _text() -> dict[str, Any]:
    return literal("clear")


def _condition(args: dict[str, Any]) -> str:
    condition = require_arg(args, "condition", ENTRY)
    conditions = _text()["scenario"]["conditions"]
    if condition not in conditions:
        raise MedhelmError(f"{ENTRY}: condition {condition!r} not supported; available conditions: {conditions}")
    return condition


def excel_path(args: dict[str, Any]) -> str:
    """`os.path.join(data_path, f"{condition}.xlsx")`, as HELM builds it."""
    return os.path.join(require_path_arg(args, "data_path", ENTRY), f"{_condition(args)}.xlsx")


def _load(args: dict[str, Any]) -> list[dict]:
    import pandas as pd

    spec = _text()["scenario"]
    condition = _condition(args)
    path = excel_path(args)
    require_file(path, ENTRY, "data_path", f"data_path={args['data_path']}, condition={condition}")
    try:
        df = pd.read_excel(path)
    except Exception as e:  # openpyxl/zipfile/pandas raise many types for a bad workbook
        raise MedhelmError(f"{ENTRY}: cannot read Excel file {path}: {first_line(e)}") from None

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


def _metadata(args: dict[str, Any]) -> dict[str, Any]:
    spec = _text()["scenario"]
    condition = _condition(args)
    tags = [t.format(condition_dashed=condition.replace("_", "-")) for t in spec["tags"]]
    return scenario_json(spec["name"].format(condition=condition), spec["description"], tags, spec["definition_path"])


def _data_files(args: dict[str, Any]) -> list[str]:
    return [excel_path(args)]


def _helm_metadata(args: dict[str, Any]) -> dict[str, Any]:
    _condition(args)  # HELM builds the scenario (which validates the condition) before get_metadata()
    return copy.deepcopy(_text()["helm_metadata"])


CLEAR_SCENARIO = register_scenario(
    ScenarioDef(
        class_name=_text()["run_spec"]["scenario_class"],
        tier="private",
        load=_load,
        metadata=_metadata,
        data_files=_data_files,
        helm_metadata=_helm_metadata,
    )
)
