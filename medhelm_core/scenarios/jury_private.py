"""The three private LLM-jury scenarios: mental_health, chw_care_plan, starr_patient_instructions.

* MentalHealthScenario (`mental_health_scenario.py`): `pandas.read_csv`; per row a
  PassageQuestionInput with an empty passage, so the text starts with "\\nQuestion: Topic: ...";
  values are formatted as pandas parsed them (`dialogue_type` 2 -> "2", 2.0 if the column has a NaN,
  a missing value -> "nan"); reference = `gold_counselor_response`.
* CHWCarePlanScenario (`chw_care_plan_scenario.py`): `pandas.read_csv`; column "MO Note"; rows whose
  note is NaN are skipped; the note itself is the (only) reference.
* StarrPatientInstructionsScenario (`starr_patient_instructions_scenario.py`): `csv.DictReader` on a
  UTF-8 file; keeps rows with `QC.strip().upper() == "TRUE"` and all five fields non-empty after
  `strip()`; reference = the stripped discharge instructions.

All instances are split "test", ids left unset. Literal text: medhelm_core/benchmarks/<name>.yaml.
"""
from __future__ import annotations

import copy
import csv
from typing import Any, Callable

from medhelm_core.helm_types import TEST_SPLIT, instance, passage_question_text, reference
from medhelm_core.registry import MedhelmError, ScenarioDef, register_scenario
from medhelm_core.scenarios._common import (
    first_line,
    literal,
    missing_column,
    py_value,
    read_csv_frame,
    require_file,
    require_path_arg,
    scenario_json,
    unlimited_csv_fields,
)


def _row_value(row: Any, column: str, entry: str, path: str) -> Any:
    try:
        return row[column]
    except KeyError:
        raise missing_column(entry, path, column) from None


# ----------------------------------------------------------------------------- mental_health
def _load_mental_health(args: dict[str, Any]) -> list[dict]:
    entry = "mental_health"
    spec = literal(entry)["scenario"]
    path = require_path_arg(args, "data_path", entry)
    require_file(path, entry, "data_path")
    df = read_csv_frame(path, entry, "data_path")
    instances = []
    for _, row in df.iterrows():
        question = spec["question_template"].format(
            topic=_row_value(row, "topic", entry, path),
            dialogue_type=_row_value(row, "dialogue_type", entry, path),
            context=_row_value(row, "context", entry, path),
        )
        text = passage_question_text(
            spec["passage"],
            question,
            passage_prefix=spec["passage_prefix"],
            question_prefix=spec["question_prefix"],
            separator=spec["separator"],
        )
        gold = py_value(_row_value(row, "gold_counselor_response", entry, path))
        instances.append(instance(text, [reference(gold, True)], TEST_SPLIT))
    return instances


# ----------------------------------------------------------------------------- chw_care_plan
def _load_chw_care_plan(args: dict[str, Any]) -> list[dict]:
    import pandas as pd

    entry = "chw_care_plan"
    spec = literal(entry)["scenario"]
    path = require_path_arg(args, "data_path", entry)
    require_file(path, entry, "data_path")
    df = read_csv_frame(path, entry, "data_path")
    instances = []
    for _, row in df.iterrows():
        note = py_value(_row_value(row, spec["note_column"], entry, path))
        prompt_text = spec["prompt_template"].format(clinical_note=note)
        if pd.isna(note):
            continue  # HELM prints "Skipping row <idx> due to NaN value in 'MO Note'"
        instances.append(instance(prompt_text, [reference(note, True)], TEST_SPLIT))
    return instances


# ----------------------------------------------------------------------------- starr_patient_instructions
def _load_starr(args: dict[str, Any]) -> list[dict]:
    entry = "starr_patient_instructions"
    spec = literal(entry)["scenario"]
    path = require_path_arg(args, "data_path", entry)
    require_file(path, entry, "data_path")
    fields: dict[str, str] = spec["fields"]
    instances = []

    def get(row: dict[str, Any], column: str, line: int) -> str:
        value = row.get(column, "")
        if value is None:  # a short row: DictReader fills None (HELM crashes on None.strip())
            raise MedhelmError(f"{entry}: row ending on line {line} of {path} has fewer fields than the header")
        return value.strip()

    try:
        # HELM reads this file as UTF-8 with universal newlines. The csv field-size limit is raised
        # (HELM keeps Python's 131072-character default unless an SHC scenario ran earlier in the process).
        with unlimited_csv_fields(), open(path, "r", encoding="utf-8") as csvfile:
            reader = csv.DictReader(csvfile)
            for row in reader:
                if get(row, spec["qc_column"], reader.line_num).upper() != spec["qc_value"]:
                    continue
                values = {key: get(row, column, reader.line_num) for key, column in fields.items()}
                if not all(values.values()):
                    continue
                input_text = spec["input_template"].format(**values)
                refs = [reference(values["discharge_instruction"], True)]
                instances.append(instance(input_text, refs, TEST_SPLIT))
    except (csv.Error, UnicodeDecodeError) as e:
        raise MedhelmError(f"{entry}: cannot parse data_path file {path}: {first_line(e)}") from None
    return instances


# ----------------------------------------------------------------------------- registration
def _register(entry: str, load: Callable[[dict[str, Any]], list[dict]]) -> ScenarioDef:
    text = literal(entry)
    spec = text["scenario"]

    def metadata(args: dict[str, Any]) -> dict[str, Any]:
        return scenario_json(spec["name"], spec["description"], spec["tags"], spec["definition_path"])

    def data_files(args: dict[str, Any]) -> list[str]:
        return [require_path_arg(args, "data_path", entry)]

    def helm_metadata(args: dict[str, Any]) -> dict[str, Any]:
        return copy.deepcopy(text["helm_metadata"])

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


MENTAL_HEALTH_SCENARIO = _register("mental_health", _load_mental_health)
CHW_CARE_PLAN_SCENARIO = _register("chw_care_plan", _load_chw_care_plan)
STARR_PATIENT_INSTRUCTIONS_SCENARIO = _register("starr_patient_instructions", _load_starr)
