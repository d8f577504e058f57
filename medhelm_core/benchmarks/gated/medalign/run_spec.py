"""`medalign` (HELM `get_medalign_spec`): generation, summarization metrics and the
MedalignAnnotator LLM jury (its judges from `jury_config_path`, else the default judges.yaml)."""
from __future__ import annotations

from typing import Any

from medhelm_core.catalog import Benchmark
from medhelm_core.runspecs.gated import BENCHMARK_DEFAULT, gated_max_length
from medhelm_core.runspecs.jury_entries import build_jury_run_spec


def run_spec(bench: Benchmark, data_path: Any, jury_config_path: str | None = None, max_length: Any = BENCHMARK_DEFAULT) -> dict[str, Any]:
    """`medalign:data_path=<folder>[,jury_config_path=<yaml>][,max_length=100000]`."""
    args = {"max_length": gated_max_length(bench, max_length), "data_path": data_path}
    return build_jury_run_spec(bench, args, jury_config_path)
