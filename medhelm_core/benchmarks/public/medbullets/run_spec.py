"""`medbullets` (HELM `get_medbullets_run_spec`): multiple choice, the exact-match bundle."""
from __future__ import annotations

from medhelm_core.catalog import Benchmark
from medhelm_core.runspecs.public import build_public_run_spec


def run_spec(bench: Benchmark) -> dict:
    return build_public_run_spec(bench)
