"""StarrPatientInstructionsScenario (HELM `starr_patient_instructions_scenario.py`): `csv.DictReader`
on a UTF-8 file; keeps rows with `QC.strip().upper() == "TRUE"` and all five fields non-empty after
`strip()`; reference = the stripped discharge instructions. All instances are split "test", ids
left unset.
"""
from __future__ import annotations

import csv
from typing import Any

from medhelm_core.catalog import Benchmark
from medhelm_core.errors import MedhelmError
from medhelm_core.helm_types import TEST_SPLIT, instance, reference
from medhelm_core.scenarios.common import data_path_file, data_path_files, first_line, unlimited_csv_fields


def load(bench: Benchmark, args: dict[str, Any]) -> list[dict]:
    entry = bench.name
    spec = bench.text["scenario"]
    path = data_path_file(args, entry)
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


files = data_path_files  # the one data file is the run entry's data_path
