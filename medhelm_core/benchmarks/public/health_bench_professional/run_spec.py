"""`health_bench_professional` (medhelm 0.8.0 `get_health_bench_professional_run_spec(jury_config_path=None)`):
as `health_bench`'s (chat adapter, max_tokens 512), with LLMJuryMetric `health_bench_professional_score`
(default 0.0) plus `get_basic_metric_specs([])` and HealthBenchProfessionalAnnotator on the judges of
`jury_config_path`."""
from __future__ import annotations

from medhelm_core.catalog import Benchmark
from medhelm_core.runspecs.jury_entries import build_rubric_jury_run_spec


def run_spec(bench: Benchmark, jury_config_path: str | None = None) -> dict:
    return build_rubric_jury_run_spec(bench, jury_config_path)
