"""SCTBenchScenario (medhelm 0.8.0 `scenarios/sct_bench_scenario.py`): SCT-Bench's
`sct_cleaned_full.csv` -> test instances.

* The prompt: the guideline (without `reason`, its " and a brief explanation for your choice" is cut
  out), then with `few_shot` the header "## Examples with Response Labels" and the five examples
  (-2 .. +2) glued on without separators, then the test-case template. Its placeholders are filled by
  a chain of `str.replace` over the whole prompt, in the order scenario, hypothesis, additional
  information, so a `{{ hypothesis }}` (or `{{ additional information }}`) inside a stem is
  substituted too.
* `reason` / `few_shot` are used for their truth value. A run entry's arguments are strings, so
  `reason=False` is the string "False", which is true: the reason prompt. Upstream bug, reproduced.
* The file is read as medhelm reads it: UTF-8 with `errors="ignore"` (an invalid byte is dropped),
  universal newlines (CR LF, also inside a quoted field, becomes LF), `csv.DictReader`.
* A row with an empty (or missing) `sct_stem`, `question` or `additional_info` is skipped.
* The expert panel = `float()` of the columns -2, -1, 0, 1, 2, kept as
  `extra_data["expert_distribution"]`; the one correct reference is the rating label of the panel's
  *first* maximum (a tie goes to the lower rating; an all-zero panel gives "-2").
* id = `str(question_id)`; a repeated id makes the run fail when the metrics are computed, as in
  medhelm (two unperturbed stats for one instance).
"""
from __future__ import annotations

import csv
from typing import Any

from medhelm_core import data_sources as ds
from medhelm_core.catalog import Benchmark
from medhelm_core.errors import MedhelmError
from medhelm_core.helm_types import TEST_SPLIT, instance, reference
from medhelm_core.scenarios.public.base import parse_error, upstream_file

ARGUMENTS = ("reason", "few_shot")


def check(bench: Benchmark, args: dict[str, Any]) -> None:
    unknown = sorted(set(args) - set(ARGUMENTS))
    if unknown:
        raise MedhelmError(f"{bench.name}: SCTBenchScenario takes only {', '.join(ARGUMENTS)}, got {unknown}")


def files(bench: Benchmark, args: dict[str, Any]) -> list:
    return [upstream_file(bench)]


def prompt_template(text: dict[str, Any], reason: Any, few_shot: Any) -> str:
    """The prompt before the test case's placeholders are filled (`reason`/`few_shot`: truthiness)."""
    prompt = text["guideline"]
    # Upstream bug, reproduced: truthiness, and run entries give strings, so "False" means True.
    if not reason:
        prompt = prompt.replace(text["reason_text"], "")
    if few_shot:
        prompt += text["few_shot_header"] + "".join(example["text"] for example in text["few_shot_examples"])
    return prompt + text["testcase_template"]


def fill(template: str, row: dict[str, Any], placeholders: list[list[str]]) -> str:
    """The chained replace: each placeholder over the text the previous ones produced."""
    out = template
    for placeholder, column in placeholders:
        out = out.replace(placeholder, row[column])
    return out


def best_rating(distribution: list[float], labels: list[str]) -> str:
    """The label of the first maximum of the panel: a tie goes to the lowest rating, and an
    all-zero panel (no expert answer, arguably no reference) gets the first label, "-2"."""
    return labels[distribution.index(max(distribution))]


def _rows(bench: Benchmark) -> list[dict]:
    located = ds.Located(upstream_file(bench))
    try:
        with located.open_text(encoding="utf-8", errors="ignore") as f:
            return list(csv.DictReader(f))
    except csv.Error as e:
        raise parse_error(bench.name, located, e) from None


def load(bench: Benchmark, args: dict[str, Any]) -> list[dict]:
    text = bench.text["scenario"]
    template = prompt_template(text, args.get("reason", False), args.get("few_shot", False))
    placeholders = text["placeholders"]
    columns = text["distribution_columns"]
    instances = []
    for row in _rows(bench):
        try:
            if any(not row[column] for _, column in placeholders):
                continue
            distribution = [float(row[column]) for column in columns]
        except (KeyError, TypeError, ValueError) as e:  # medhelm fails on these too
            raise parse_error(bench.name, f"row {row.get(text['id_column'])!r} of {text['name']}'s CSV", e) from None
        instances.append(instance(
            fill(template, row, placeholders),
            [reference(best_rating(distribution, text["rating_labels"]), True)],
            TEST_SPLIT,
            id=str(row[text["id_column"]]),
            extra_data={"expert_distribution": distribution},
        ))
    return instances
