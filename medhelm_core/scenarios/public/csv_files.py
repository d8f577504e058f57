"""CSV files of the public benchmarks (medbullets, medec), read with `csv.DictReader`.

HELM opens both with `open(path, "r", encoding="utf-8")` (universal newlines, no `newline=""`), so
a CRLF inside a quoted field reaches the text as "\\n"; we read them the same way. Each folder's
scenario.py documents its HELM rules.
"""
from __future__ import annotations

import csv

from medhelm_core import data_sources as ds
from medhelm_core.scenarios.public.base import parse_error, upstream_file

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # for annotations only (nothing imported at run time)
    from medhelm_core.catalog import Benchmark


def rows(bench: Benchmark) -> list[dict]:
    located = ds.Located(upstream_file(bench))
    try:
        with located.open_text() as f:
            return list(csv.DictReader(f))
    except (csv.Error, UnicodeDecodeError) as e:
        raise parse_error(bench.name, located, e) from None
