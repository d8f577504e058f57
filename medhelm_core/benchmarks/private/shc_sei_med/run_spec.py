"""`shc_sei_med:data_path=<csv>` (HELM `get_shc_sei_spec`): multiple choice joint, the exact-match bundle."""
from __future__ import annotations

from typing import Any

from medhelm_core.catalog import Benchmark
from medhelm_core.runspecs.private import build_shc_run_spec


def run_spec(bench: Benchmark, data_path: Any) -> dict[str, Any]:
    return build_shc_run_spec(bench, data_path)
