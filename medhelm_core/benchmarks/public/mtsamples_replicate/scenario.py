"""MTSamplesReplicateScenario (HELM `mtsamples_replicate_scenario.py`): the `.txt` files of
raulista1997/benchmarkdata's `mtsamples_processed` directory (contents-API listing at
`?ref=ebc104a`, cut at 1,000 entries) -> test; reference = first non-empty of PLAN:, SUMMARY:,
FINDINGS:; input = the text cut before PLAN: only. The listing and per-file rules are shared with
mtsamples_procedures (`scenarios/public/mtsamples.py`).
"""
from __future__ import annotations

from typing import Any

from medhelm_core.catalog import Benchmark
from medhelm_core.scenarios.public import mtsamples
from medhelm_core.scenarios.public.base import no_args as check  # noqa: F401  (HELM has no constructor args)


def files(bench: Benchmark, args: dict[str, Any]) -> list[str]:
    return mtsamples.files(bench)


def load(bench: Benchmark, args: dict[str, Any]) -> list[dict]:
    return mtsamples.load(bench)
