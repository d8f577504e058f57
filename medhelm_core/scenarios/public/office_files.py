"""Public scenarios read from office documents: medication_qa (xlsx), race_based_med (docx).

* MedicationQAScenario (`medication_qa_scenario.py`): `pd.read_excel` of
  `MedInfo2019-QA-Medications.xlsx` (first sheet); rows whose `Answer` is NaN are dropped; one test
  instance per row in sheet order: input `Question`, correct reference `Answer`.
* RaceBasedMedScenario (`race_based_med_scenario.py`): the npj Digital Medicine supplementary
  `.docx`, parsed with python-docx as HELM does: a paragraph whose stripped text starts with
  "Run " and contains ":" opens an item (question = text after the first ": "); the following
  paragraphs up to the next such paragraph are the response (stripped, joined with "\\n", stripped);
  the label is True iff a run in them has font colour RGB (255, 0, 0). HELM writes these rows to
  `race_based.csv` and reads it back (we do the same round trip in memory: `csv.writer` with
  `newline=""`, read back with universal newlines), then keys the instances by prompt in a dict
  (a repeated prompt keeps its first position and its last label). References yes / no.
"""
from __future__ import annotations

import csv
import io
from typing import Any

from medhelm_core import data_sources as ds
from medhelm_core.helm_types import TEST_SPLIT, instance, reference
from medhelm_core.errors import MedhelmError
from medhelm_core.scenarios._common import py_value
from medhelm_core.scenarios.public._base import parse_error, register_public, text


def _file(entry: str):
    data = text(entry)["data"]
    return ds.fetch(ds.UpstreamFile(entry, data["file"], data["url"]))


# ----------------------------------------------------------------------------- medication_qa
def _medication_qa_load(args: dict[str, Any]) -> list[dict]:
    import pandas as pd

    path = _file("medication_qa")
    try:
        data = pd.read_excel(path)
    except Exception as e:  # openpyxl/zipfile/pandas raise many types for a bad workbook
        raise parse_error("medication_qa", path, e) from None
    for column in ("Question", "Answer"):
        if column not in data.columns:
            raise MedhelmError(f"medication_qa: column {column!r} missing in {path}")
    data = data[~data.Answer.isna()]
    return [instance(py_value(row.Question), [reference(py_value(row.Answer), True)], TEST_SPLIT)
            for _, row in data.iterrows()]


register_public("medication_qa", _medication_qa_load, lambda args: [_file("medication_qa")])


# ----------------------------------------------------------------------------- race_based_med
def extract_red_text_runs(document, run_prefix: str = "Run ", red: tuple = (255, 0, 0)) -> list[tuple[str, str, str]]:
    """(question, response, "True"/"False") per "Run N: question" paragraph, as HELM extracts them."""
    results = []
    paragraphs = document.paragraphs
    for i, paragraph in enumerate(paragraphs):
        stripped = paragraph.text.strip()
        if not (stripped.startswith(run_prefix) and ":" in stripped):
            continue
        parts = stripped.split(": ", 1)
        if len(parts) < 2:
            continue
        question = parts[1].strip()
        response, is_true = [], False
        for following in paragraphs[i + 1:]:
            next_text = following.text.strip()
            if next_text.startswith(run_prefix) and ":" in next_text:
                break
            response.append(next_text)
            for run in following.runs:
                if run.font.color and run.font.color.rgb:
                    if run.font.color.rgb == red:
                        is_true = True
        results.append((question, "\n".join(response).strip(), "True" if is_true else "False"))
    return results


def csv_round_trip(columns: list[str], rows: list[tuple[str, str, str]]) -> list[dict[str, str]]:
    """Write rows as HELM's `create_csv_from_word` does and read them back with `csv.DictReader`
    over a file opened with universal newlines."""
    buffer = io.StringIO(newline="")
    writer = csv.writer(buffer)
    writer.writerow(columns)
    writer.writerows(rows)
    return list(csv.DictReader(io.StringIO(ds.universal_newlines(buffer.getvalue()))))


def _race_based_load(args: dict[str, Any]) -> list[dict]:
    try:
        from docx import Document
    except ImportError:  # pragma: no cover - a declared dependency
        raise MedhelmError("race_based_med needs the package 'python-docx'") from None
    spec = text("race_based_med")["scenario"]
    path = _file("race_based_med")
    try:
        document = Document(str(path))
    except Exception as e:  # python-docx raises several types for a bad file
        raise parse_error("race_based_med", path, e) from None
    rows = csv_round_trip(spec["csv_columns"], extract_red_text_runs(document, spec["run_prefix"], tuple(spec["red"])))
    question_col, response_col, label_col = spec["csv_columns"]
    yes, no = spec["answer_choices"]
    data: dict[str, str] = {}
    for row in rows:
        prompt = spec["prompt_template"].format(question=row[question_col], response=row[response_col])
        data[prompt] = yes if row[label_col] == "True" else no
    return [instance(prompt, [reference(choice, choice == answer) for choice in spec["answer_choices"]], TEST_SPLIT)
            for prompt, answer in data.items()]


register_public("race_based_med", _race_based_load, lambda args: [_file("race_based_med")])
