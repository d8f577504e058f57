"""N2C2-CT Matching (HELM `n2c2_ct_matching_scenario.py`): does the patient meet one inclusion
criterion of the n2c2 2018 Track 1 cohort-selection task?

`data_path` is the n2c2 folder; its `test/` subfolder holds one XML file per patient:
`<PatientMatching><TEXT>notes</TEXT><TAGS><ABDOMINAL met="met"/>...</TAGS></PatientMatching>`.
As HELM's `XMLDataLoader` + `create_prompt` (zero-shot: only `test/` is read):

* the `.xml` files in sorted file-name order, parsed with `xml.etree.ElementTree`; the text of the
  last TEXT element (or "") gets every "\\n\\n\\n" replaced by "\\n" (one pass) and is split on runs of
  100 asterisks into notes (each stripped, empty ones dropped); the criteria are every child of every
  TAGS element: 1 if its `met` attribute is "met", else 0;
* each note is rendered "## Note #<n>\\nDate: <its 'Record date: YYYY-MM-DD' or ''>\\n<note>", the notes
  joined by "\\n" + 50 asterisks + "\\n\\n"; the current date is the last record date found in any note
  (None if none, printed "None");
* references "yes"/"no" ("yes" correct iff the subject criterion is met), split "test".

HELM creates a missing `test/` folder and then has no instances; medhelm stops with the gated
error instead. Literal text: benchmark.yaml (`bench.text`).
"""
from __future__ import annotations

import os
import re
import xml.etree.ElementTree as ET
from typing import Any, Optional

from medhelm_core.catalog import Benchmark
from medhelm_core.helm_types import CORRECT_TAG, TEST_SPLIT, instance
from medhelm_core.errors import MedhelmError
from medhelm_core.scenarios.common import first_line, require_arg
from medhelm_core.scenarios.gated.files import data_path_arg, missing_data


def _spec(bench: Benchmark) -> dict[str, Any]:
    return bench.text["scenario"]


def parse_patient_xml(bench: Benchmark, path: str) -> tuple[list[str], dict[str, int]]:
    """HELM's `XMLDataLoader.parse_xml` (convert_to_numbers, split_text, remove_excessive_new_lines)."""
    spec = _spec(bench)
    try:
        root = ET.parse(path).getroot()
    except (ET.ParseError, OSError) as e:
        raise MedhelmError(f"{bench.name}: cannot parse {path}: {first_line(e)}") from None
    notes: list[str] = []
    tags: dict[str, int] = {}
    marker: str = spec["note_split_marker"]
    for elem in root.iter():
        if elem.tag == "TEXT":
            text = elem.text if elem.text else ""
            text = text.replace("\n\n\n", "\n")
            notes = [x.strip() for x in text.split(marker) if x.strip() != ""]
        elif elem.tag == "TAGS":
            tags = {}
            for tag in root.iter("TAGS"):
                for subtag in tag:
                    tags[subtag.tag] = 1 if subtag.attrib.get("met") == "met" else 0
    return notes, tags


def _note_date(bench: Benchmark, note: str) -> Optional[str]:
    match = re.search(_spec(bench)["record_date_pattern"], note)
    return match.group(1) if match else None


def render_prompt(bench: Benchmark, subject: str, notes: list[str]) -> str:
    """HELM's `N2C2CTMatchingScenario.create_prompt`."""
    spec = _spec(bench)
    if subject not in spec["long_definitions"]:
        raise MedhelmError(f"{bench.name}: unknown subject {subject!r} (known: {', '.join(spec['long_definitions'])})")
    rendered = [spec["note_template"].format(index=i + 1, date=_note_date(bench, note) or "", note=note)
                for i, note in enumerate(notes)]
    current_date = None
    for note in notes:
        current_date = _note_date(bench, note) or current_date
    return spec["prompt_template"].format(
        subject=subject,
        definition=spec["long_definitions"][subject],
        num_notes=len(notes),
        notes=spec["notes_separator"].join(rendered),
        current_date=current_date,
    )


def _test_dir(bench: Benchmark, data_path: str) -> str:
    return os.path.join(data_path, _spec(bench)["split_dirs"]["test"])


def load(bench: Benchmark, args: dict[str, Any]) -> list[dict]:
    spec = _spec(bench)
    data_path = data_path_arg(args, bench.name)
    subject = require_arg(args, "subject", bench.name)
    if not isinstance(subject, str) or subject not in spec["long_definitions"]:
        raise MedhelmError(f"{bench.name}: unknown subject {subject!r} (known: {', '.join(spec['long_definitions'])})")
    folder = _test_dir(bench, data_path)
    if not os.path.isdir(folder):
        raise missing_data(bench, "test folder of patient XML files", folder)
    choices: list[str] = spec["answer_choices"]
    instances = []
    for file_name in sorted(f for f in os.listdir(folder) if f.endswith(".xml")):
        path = os.path.join(folder, file_name)
        notes, labels = parse_patient_xml(bench, path)
        if subject not in labels:
            raise MedhelmError(f"{bench.name}: {path} has no <{subject}> criterion in its TAGS")
        answer = "yes" if labels[subject] else "no"
        refs = [{"output": {"text": c}, "tags": [CORRECT_TAG] if c == answer else []} for c in choices]
        instances.append(instance(render_prompt(bench, subject, notes), refs, TEST_SPLIT))
    return instances


def files(bench: Benchmark, args: dict[str, Any]) -> list[str]:
    return [_test_dir(bench, data_path_arg(args, bench.name))]
