"""Public scenarios read from CSV files with `csv.DictReader`: medbullets, medec.

HELM opens both with `open(path, "r", encoding="utf-8")` (universal newlines, no `newline=""`), so
a CRLF inside a quoted field reaches the text as "\\n"; we read them the same way.

* MedBulletsScenario (`medbullets_scenario.py`): `medbullets_op5.csv` -> test; rows lacking
  `question`, `answer_idx` or `opa` are skipped; always five references A-E from `opa`..`ope`
  (a missing column -> "Not applicable"), correct iff the letter equals `answer_idx`.
* MedecScenario (`medec_scenario.py`): the MEDEC-MS test CSV -> test; rows with an empty
  `Sentences` are skipped; input = `Sentences.strip()`; one correct reference:
  `f"{Error Sentence ID} {Corrected Sentence}"` when `Error Flag` is 1, the corrected sentence is
  not "NA" and the id is not "-1", else "CORRECT".
"""
from __future__ import annotations

import csv
from typing import Any

from medhelm_core import data_sources as ds
from medhelm_core.helm_types import TEST_SPLIT, instance, reference
from medhelm_core.scenarios.public._base import parse_error, register_public, text


def _file(entry: str):
    data = text(entry)["data"]
    return ds.fetch(ds.UpstreamFile(entry, data["file"], data["url"]))


def _rows(entry: str) -> list[dict]:
    located = ds.Located(_file(entry))
    try:
        with located.open_text() as f:
            return list(csv.DictReader(f))
    except (csv.Error, UnicodeDecodeError) as e:
        raise parse_error(entry, located, e) from None


# ----------------------------------------------------------------------------- medbullets
def _medbullets_load(args: dict[str, Any]) -> list[dict]:
    spec = text("medbullets")["scenario"]
    missing = spec["missing_option"]
    instances = []
    for row in _rows("medbullets"):
        if not row.get("question") or not row.get("answer_idx") or not row.get("opa"):
            continue  # HELM prints "Skipping invalid row"
        option_map = {letter: row.get(col, missing) for letter, col in zip(spec["answer_choices"], spec["option_columns"])}
        correct = row["answer_idx"]
        refs = [reference(option_map.get(letter, missing), letter == correct) for letter in spec["answer_choices"]]
        instances.append(instance(row["question"], refs, TEST_SPLIT))
    return instances


register_public("medbullets", _medbullets_load, lambda args: [_file("medbullets")])


# ----------------------------------------------------------------------------- medec
def _medec_load(args: dict[str, Any]) -> list[dict]:
    correct_text = text("medec")["scenario"]["correct_answer"]
    instances = []
    for row in _rows("medec"):
        if not row.get("Sentences"):
            continue
        input_text = row["Sentences"].strip()
        try:
            error_flag = int(row.get("Error Flag", 0))
        except (TypeError, ValueError) as e:
            raise parse_error("medec", "the Error Flag column", e) from None
        sentence_id = row.get("Error Sentence ID", "-1").strip()
        corrected = row.get("Corrected Sentence", "").strip()
        if error_flag == 1 and corrected != "NA" and sentence_id != "-1":
            gold = f"{sentence_id} {corrected}"
        else:
            gold = correct_text
        instances.append(instance(input_text, [reference(gold, True)], TEST_SPLIT))
    return instances


register_public("medec", _medec_load, lambda args: [_file("medec")])
