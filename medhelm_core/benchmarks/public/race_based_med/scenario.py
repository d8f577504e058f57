"""RaceBasedMedScenario (HELM `race_based_med_scenario.py`): the npj Digital Medicine
supplementary `.docx`, parsed with python-docx as HELM does: a paragraph whose stripped text starts
with "Run " and contains ":" opens an item (question = text after the first ": "); the following
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
from medhelm_core.catalog import Benchmark
from medhelm_core.errors import MedhelmError
from medhelm_core.helm_types import TEST_SPLIT, instance, reference
from medhelm_core.scenarios.public.base import no_args as check, parse_error, upstream_file  # noqa: F401  (check: HELM has no constructor args)


def files(bench: Benchmark, args: dict[str, Any]) -> list:
    return [upstream_file(bench)]


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


def load(bench: Benchmark, args: dict[str, Any]) -> list[dict]:
    try:
        from docx import Document
    except ImportError:  # pragma: no cover - a declared dependency
        raise MedhelmError(f"{bench.name} needs the package 'python-docx'") from None
    spec = bench.text["scenario"]
    path = upstream_file(bench)
    try:
        document = Document(str(path))
    except Exception as e:  # python-docx raises several types for a bad file
        raise parse_error(bench.name, path, e) from None
    rows = csv_round_trip(spec["csv_columns"], extract_red_text_runs(document, spec["run_prefix"], tuple(spec["red"])))
    question_col, response_col, label_col = spec["csv_columns"]
    yes, no = spec["answer_choices"]
    data: dict[str, str] = {}
    for row in rows:
        prompt = spec["prompt_template"].format(question=row[question_col], response=row[response_col])
        data[prompt] = yes if row[label_col] == "True" else no
    return [instance(prompt, [reference(choice, choice == answer) for choice in spec["answer_choices"]], TEST_SPLIT)
            for prompt, answer in data.items()]
