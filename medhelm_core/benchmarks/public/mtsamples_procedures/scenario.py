"""MTSamplesProceduresScenario (HELM `mtsamples_procedures_scenario.py`): the `.txt` files of
raulista1997/benchmarkdata's `mtsample_procedure` directory (contents-API listing of the default
branch) -> test; reference = first non-empty of PLAN:, SUMMARY:, FINDINGS:; input = the text cut
before PLAN:, then SUMMARY:, then FINDINGS:. The listing and per-file rules are shared with
mtsamples_replicate (`scenarios/public/mtsamples.py`).
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
