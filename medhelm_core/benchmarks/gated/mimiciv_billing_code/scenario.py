"""MIMIC-IV Billing Code (HELM `mimiciv_billing_code_scenario.py`): discharge note -> ICD-10 codes.

`data_path` is a Feather file (`mimiciv_icd10.feather`) with columns "text" (the note) and "target"
(the codes). As HELM: `pandas.read_feather`; per row, a numpy array of codes becomes a list, any
other non-list value a one-element list of its `str()`; the reference is the codes' `str()`s joined
with "," (the only reference, tagged correct); input = the note; split "test". A row that cannot be
read (e.g. no "text" column) is skipped, as HELM's `except Exception: continue` does.
The metric is MIMICIVBillingCodeMetric (metric.py in this folder).
Literal text: benchmark.yaml (`bench.text`).
"""
from __future__ import annotations

from typing import Any

from medhelm_core.catalog import Benchmark
from medhelm_core.helm_types import TEST_SPLIT, instance, reference
from medhelm_core.scenarios.common import py_value
from medhelm_core.scenarios.gated.files import (
    bad_data,
    data_path_arg,
    require_exists,
    require_pyarrow,
)


def codes_text(codes: Any, separator: str = ",") -> str:
    import numpy as np

    if isinstance(codes, np.ndarray):
        codes = codes.tolist()
    elif not isinstance(codes, list):
        codes = [str(codes)]
    return separator.join(str(code) for code in codes)


def load(bench: Benchmark, args: dict[str, Any]) -> list[dict]:
    import pandas as pd

    spec = bench.text["scenario"]
    path = data_path_arg(args, bench.name)
    require_exists(bench, path, spec["file_label"])
    require_pyarrow(bench.name, "the Feather file")
    try:
        df = pd.read_feather(path)
    except Exception as e:  # noqa: BLE001 - pyarrow raises many kinds
        raise bad_data(bench.name, path, e) from None
    instances = []
    for _, row in df.iterrows():
        try:
            note = py_value(row[spec["text_column"]])
            codes = codes_text(row[spec["target_column"]], spec["code_separator"])
        except Exception:  # noqa: BLE001 - HELM prints "Error processing row" and skips it
            continue
        instances.append(instance(note, [reference(codes, True)], TEST_SPLIT))
    return instances


def files(bench: Benchmark, args: dict[str, Any]) -> list[str]:
    return [data_path_arg(args, bench.name)]
