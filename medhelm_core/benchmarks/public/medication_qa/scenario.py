"""MedicationQAScenario (HELM `medication_qa_scenario.py`): `pd.read_excel` of
`MedInfo2019-QA-Medications.xlsx` (first sheet); rows whose `Answer` is NaN are dropped; one test
instance per row in sheet order: input `Question`, correct reference `Answer`.
"""
from __future__ import annotations

from typing import Any

from medhelm_core.catalog import Benchmark
from medhelm_core.errors import MedhelmError
from medhelm_core.helm_types import TEST_SPLIT, instance, reference
from medhelm_core.scenarios.common import py_value
from medhelm_core.scenarios.public.base import no_args as check, parse_error, upstream_file  # noqa: F401  (check: HELM has no constructor args)


def files(bench: Benchmark, args: dict[str, Any]) -> list:
    return [upstream_file(bench)]


def load(bench: Benchmark, args: dict[str, Any]) -> list[dict]:
    import pandas as pd

    path = upstream_file(bench)
    try:
        data = pd.read_excel(path)
    except Exception as e:  # openpyxl/zipfile/pandas raise many types for a bad workbook
        raise parse_error(bench.name, path, e) from None
    for column in ("Question", "Answer"):
        if column not in data.columns:
            raise MedhelmError(f"{bench.name}: column {column!r} missing in {path}")
    data = data[~data.Answer.isna()]
    return [instance(py_value(row.Question), [reference(py_value(row.Answer), True)], TEST_SPLIT)
            for _, row in data.iterrows()]
