"""`medcalc_bench` (HELM `get_medcalc_bench_spec`): generation, the exact-match bundle plus
MedCalcBenchMetric."""
from __future__ import annotations

from typing import Any

from medhelm_core.catalog import Benchmark
from medhelm_core.runspecs.public import build_public_run_spec


def run_spec(bench: Benchmark, version: Any = None) -> dict:
    """As HELM: `version` goes into the scenario args (which HELM's scenario then rejects) and the
    name becomes `medcalc_bench:version=<v>`."""
    spec = build_public_run_spec(bench, {} if version is None else {"version": version})
    if version is not None:
        spec["name"] = f"{spec['name']}:version={version}"
    return spec
