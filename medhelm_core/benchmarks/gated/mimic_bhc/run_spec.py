"""`mimic_bhc` (HELM `get_mimic_bhc_spec`): generation, summarization metrics and the
MIMICBHCAnnotator LLM jury (its judges from `jury_config_path`, else the default judges.yaml)."""
from __future__ import annotations

from typing import Any

from medhelm_core.catalog import Benchmark
from medhelm_core.runspecs.jury_entries import build_jury_run_spec


def run_spec(bench: Benchmark, data_path: Any, jury_config_path: str | None = None) -> dict[str, Any]:
    """`mimic_bhc:data_path=<JSON-lines file>[,jury_config_path=<yaml>]`."""
    return build_jury_run_spec(bench, {"data_path": data_path}, jury_config_path)
