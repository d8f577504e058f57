"""MedQA and MedMCQA (HELM `med_qa_scenario.py`, `med_mcqa_scenario.py`): JSONL files from
Google-Drive zips (`data: {zip_name, url, member_dir, files}`), one member per split. Each line is
`json.loads(line.rstrip())`. The folders' scenario.py (medhelm_med_qa, medhelm_med_mcqa) document
their HELM rules.
"""
from __future__ import annotations

import json

from medhelm_core import data_sources as ds
from medhelm_core.scenarios.public.base import parse_error

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # for annotations only (nothing imported at run time)
    from medhelm_core.catalog import Benchmark


def members(bench: Benchmark) -> list[tuple[str, ds.Located]]:
    """(HELM split, the zip member) per file, in the order of `data.files`."""
    data = bench.text["data"]
    prefix = f"{data['member_dir']}/" if data.get("member_dir") else ""
    return [(split, ds.fetch_member(ds.ZipMember(bench.name, name, data["zip_name"], data["url"], prefix + name)))
            for split, name in data["files"].items()]


def json_lines(bench: Benchmark, located: ds.Located):
    with located.open_text() as f:
        for number, line in enumerate(f, 1):
            try:
                yield json.loads(line.rstrip())
            except ValueError as e:
                raise parse_error(bench.name, f"line {number} of {located}", e) from None


def files(bench: Benchmark) -> list[str]:
    return list(dict.fromkeys(str(located.path) for _, located in members(bench)))
