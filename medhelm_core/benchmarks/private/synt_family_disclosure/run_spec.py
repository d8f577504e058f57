"""`synt_family_disclosure:data_path=<csv>` (medhelm 0.8.0 `get_synt_family_disclosure_spec`): multiple choice joint, zero-shot
(`max_train_instances=0`), the exact-match bundle."""
from __future__ import annotations

from typing import Any

from medhelm_core.catalog import Benchmark
from medhelm_core.runspecs.private import build_shc_run_spec


def run_spec(bench: Benchmark, data_path: Any) -> dict[str, Any]:
    return build_shc_run_spec(bench, data_path)
