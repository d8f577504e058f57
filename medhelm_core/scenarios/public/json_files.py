"""JSON files of the public benchmarks (aci_bench, pubmed_qa, med_dialog), parsed whole.

Ids are left unset (the pipeline assigns `id0, id1, ...` over train + test, as HELM does). Each
folder's scenario.py documents its HELM rules.
"""
from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from medhelm_core import data_sources as ds
from medhelm_core.scenarios.public.base import parse_error

if TYPE_CHECKING:  # for annotations only (nothing imported at run time)
    from medhelm_core.catalog import Benchmark


def read_json(bench: Benchmark, path) -> Any:
    located = path if isinstance(path, ds.Located) else ds.Located(path)
    try:
        return json.loads(located.read_text())
    except (ValueError, UnicodeDecodeError) as e:
        raise parse_error(bench.name, located, e) from None
