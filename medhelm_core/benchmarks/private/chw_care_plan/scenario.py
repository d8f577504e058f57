"""CHWCarePlanScenario (HELM `chw_care_plan_scenario.py`): `pandas.read_csv`; column "MO Note"; rows
whose note is NaN are skipped; the note itself is the (only) reference. All instances are split
"test", ids left unset.
"""
from __future__ import annotations

from typing import Any

from medhelm_core.catalog import Benchmark
from medhelm_core.helm_types import TEST_SPLIT, instance, reference
from medhelm_core.scenarios.common import (
    data_path_file,
    data_path_files,
    py_value,
    read_csv_frame,
    row_value,
)


def load(bench: Benchmark, args: dict[str, Any]) -> list[dict]:
    import pandas as pd

    entry = bench.name
    spec = bench.text["scenario"]
    path = data_path_file(args, entry)
    df = read_csv_frame(path, entry, "data_path")
    instances = []
    for _, row in df.iterrows():
        note = py_value(row_value(row, spec["note_column"], entry, path))
        prompt_text = spec["prompt_template"].format(clinical_note=note)
        if pd.isna(note):
            continue  # HELM prints "Skipping row <idx> due to NaN value in 'MO Note'"
        instances.append(instance(prompt_text, [reference(note, True)], TEST_SPLIT))
    return instances


files = data_path_files  # the one data file is the run entry's data_path
