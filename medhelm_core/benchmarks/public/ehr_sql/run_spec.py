"""`ehr_sql` (HELM `get_ehr_sql_run_spec`): generation, the exact-match bundle plus EhrSqlMetric, and
the EhrSqlAnnotator that runs the SQL."""
from __future__ import annotations

from medhelm_core.catalog import Benchmark
from medhelm_core.runspecs.public import build_public_run_spec


def run_spec(bench: Benchmark) -> dict:
    return build_public_run_spec(bench)
