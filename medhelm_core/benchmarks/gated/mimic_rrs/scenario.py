"""MIMIC-RRS (HELM `mimic_rrs_scenario.py`): radiology findings -> impression (MIMIC-III reports).

`data_path` is a folder with `test.findings.tok` and `test.impression.tok`: line i of one pairs with
line i of the other. As HELM: both files are read with the platform's default encoding and
universal newlines, every line `strip()`ped; different line counts abort; pairs with an empty
finding or impression are skipped; input = the finding, the only reference = the impression,
split "test" (zero-shot: only the test files are read).
Literal text: benchmark.yaml (`bench.text`).
"""
from __future__ import annotations

import os
from typing import Any

from medhelm_core.catalog import Benchmark
from medhelm_core.helm_types import instance, reference
from medhelm_core.errors import MedhelmError
from medhelm_core.scenarios.gated.files import (
    bad_data,
    data_path_arg,
    require_exists,
)


def _paths(bench: Benchmark, data_path: str) -> list[tuple[str, str, str, str]]:
    """(split, findings path, impressions path, HELM split) per split, in HELM's order."""
    spec = bench.text["scenario"]
    out = []
    for data_split, split in spec["splits"].items():
        findings = os.path.join(data_path, spec["files"]["findings"].format(split=data_split))
        impressions = os.path.join(data_path, spec["files"]["impressions"].format(split=data_split))
        out.append((data_split, findings, impressions, split))
    return out


def _read_lines(bench: Benchmark, path: str) -> list[str]:
    try:
        with open(path, "r") as file:
            return [line.strip() for line in file.readlines()]
    except (OSError, UnicodeDecodeError) as e:
        raise bad_data(bench.name, path, e) from None


def load(bench: Benchmark, args: dict[str, Any]) -> list[dict]:
    spec = bench.text["scenario"]
    data_path = data_path_arg(args, bench.name)
    instances = []
    for _, findings_path, impressions_path, split in _paths(bench, data_path):
        require_exists(bench, findings_path, spec["file_labels"]["findings"])
        require_exists(bench, impressions_path, spec["file_labels"]["impressions"])
        findings = _read_lines(bench, findings_path)
        impressions = _read_lines(bench, impressions_path)
        if len(findings) != len(impressions):
            raise MedhelmError(f"{bench.name}: Findings and impressions must have the same length: {findings_path} has "
                               f"{len(findings)} lines, {impressions_path} has {len(impressions)}")
        for finding, impression in zip(findings, impressions):
            if not finding or not impression:
                continue
            instances.append(instance(finding, [reference(impression, True)], split))
    return instances


def files(bench: Benchmark, args: dict[str, Any]) -> list[str]:
    return [p for _, f, i, _ in _paths(bench, data_path_arg(args, bench.name)) for p in (f, i)]
