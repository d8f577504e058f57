"""MIMIC-IV-BHC (HELM `mimic_bhc_scenario.py`): clinical note -> brief hospital course.

`data_path` is a JSON-lines file (`mimic_iv_bhc.json`): per line an object with "input" (the note)
and "target" (the BHC). As HELM: the file is read with the platform's default encoding, every line
parsed with `json.loads`; pairs with an empty (or missing/null) note or summary are skipped; input =
the note, the only reference = the summary, split "test" (zero-shot: no train split).
Literal text: benchmark.yaml (`bench.text`).
"""
from __future__ import annotations

import json
from typing import Any

from medhelm_core.catalog import Benchmark
from medhelm_core.helm_types import TEST_SPLIT, instance, reference
from medhelm_core.errors import MedhelmError
from medhelm_core.scenarios.common import first_line
from medhelm_core.scenarios.gated.files import (
    bad_data,
    data_path_arg,
    require_exists,
)


def load(bench: Benchmark, args: dict[str, Any]) -> list[dict]:
    spec = bench.text["scenario"]
    path = data_path_arg(args, bench.name)
    require_exists(bench, path, spec["file_label"])
    try:
        with open(path, "r") as f:
            data = []
            for number, line in enumerate(f, 1):
                try:
                    data.append(json.loads(line))
                except json.JSONDecodeError as e:
                    raise MedhelmError(f"{bench.name}: line {number} of {path} is not JSON: {first_line(e)}") from None
    except (OSError, UnicodeDecodeError) as e:
        raise bad_data(bench.name, path, e) from None
    instances = []
    for number, obj in enumerate(data, 1):
        try:
            note, summary = obj[spec["input_key"]], obj[spec["target_key"]]
        except (KeyError, TypeError):
            raise MedhelmError(f"{bench.name}: line {number} of {path} lacks {spec['input_key']!r} or "
                               f"{spec['target_key']!r}") from None
        if not note or not summary:
            continue
        instances.append(instance(note, [reference(summary, True)], TEST_SPLIT))
    return instances


def files(bench: Benchmark, args: dict[str, Any]) -> list[str]:
    return [data_path_arg(args, bench.name)]
