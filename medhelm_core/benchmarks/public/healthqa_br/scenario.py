"""HEALTHQA_BR_Scenario (HELM `healthqa_br_scenario.py`): `Larxel/healthqa-br`, split `train`, every
row -> test, in row order.

A row is `{question, answer}`, the alternatives written inside `question` as `\\n'X': 'text'` lines:
* the stem is the text before the first alternative line (`scenario.choices_start`), stripped; the
  alternatives are the stripped rest, read as `'X': 'text'` pairs (`scenario.choice`; a text ends at
  its first apostrophe, so `'uso de água d'Oeste'` gives `uso de água d`). A letter given twice keeps
  its first position and its last text (a dict);
* `answer.strip().upper()` must be one of the letters, else the row is skipped (so is a row whose
  alternatives start on the stem's line: no alternatives at all);
* references are the alternatives' texts in order, each tagged correct iff its text equals the
  answer's text (duplicate texts are all correct).
"""
from __future__ import annotations

import re
from typing import Any

from medhelm_core.catalog import Benchmark
from medhelm_core.helm_types import TEST_SPLIT, instance, reference
from medhelm_core.scenarios.public import huggingface
from medhelm_core.scenarios.public.base import no_args as check  # noqa: F401  (HELM has no constructor args)


def files(bench: Benchmark, args: dict[str, Any]) -> list:
    return huggingface.files(bench)


def _split(text: str, start: re.Pattern) -> tuple[str, str]:
    """(stem, alternatives text)."""
    found = start.search(text)
    if found is None:
        return text.strip(), ""
    return text[:found.start()].strip(), text[found.start():].strip()


def load(bench: Benchmark, args: dict[str, Any]) -> list[dict]:
    spec = bench.text["scenario"]
    start, choice = re.compile(spec["choices_start"]), re.compile(spec["choice"])
    instances = []
    for row in huggingface.rows(bench):
        stem, rest = _split(row["question"], start)
        options: dict[str, str] = {}
        for letter, text in choice.findall(rest):
            options[letter] = text
        key = row["answer"].strip().upper()
        if key not in options:
            continue
        correct = options[key]
        refs = [reference(text, text == correct) for text in options.values()]
        instances.append(instance(stem, refs, TEST_SPLIT))
    return instances
