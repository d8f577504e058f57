"""What the gated MedHELM benchmarks' run specs share (HELM `medhelm_run_specs.py`): HELM's
`max_length` default (the LLM-jury builder of dischargeme, medalign, mimic_rrs and mimic_bhc is
`runspecs.jury_entries.build_jury_run_spec`, shared with the other tiers). Each
folder's `run_spec.py` (medhelm_core/benchmarks/gated/<name>/) holds HELM's function with its exact
signature and reads its literal text from `bench.text["run_spec"]`.

They return the RunSpec dict before run expanders are applied, with HELM's scenario-arg order.
Building a run spec reads no data file (only the judges config, as HELM does), so `--dry-run` works
without the credentialed data.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # for annotations only (nothing imported at run time)
    from medhelm_core.catalog import Benchmark


# The default of HELM's `max_length` parameters: a sentinel, so the value itself comes from
# `run_spec.default_max_length` of the benchmark's text.
BENCHMARK_DEFAULT = object()


def gated_max_length(bench: Benchmark, max_length: Any) -> Any:
    """`max_length` as given, or the benchmark's `run_spec.default_max_length` when left out."""
    return bench.text["run_spec"]["default_max_length"] if max_length is BENCHMARK_DEFAULT else max_length
