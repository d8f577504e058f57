"""`mimiciv_billing_code` (HELM `get_mimiciv_billing_code_spec`): generation, MIMICIVBillingCodeMetric
(metric.py) and the generic metrics."""
from __future__ import annotations

from typing import Any

from medhelm_core.catalog import Benchmark
from medhelm_core.helm_types import generation_adapter_spec, metric_spec, run_spec as make_run_spec, scenario_spec
from medhelm_core.runspecs.metric_bundles import generic_metric_specs


def run_spec(bench: Benchmark, data_path: Any) -> dict[str, Any]:
    """`mimiciv_billing_code:data_path=<mimiciv_icd10.feather>`: MIMICIVBillingCodeMetric + generic metrics."""
    text = bench.text["run_spec"]
    return make_run_spec(
        name=text["name"],
        scenario=scenario_spec(text["scenario_class"], {"data_path": data_path}),
        adapter=generation_adapter_spec(**text["adapter"]),
        metric_specs=[metric_spec(text["metric_class"], {})] + generic_metric_specs(),
        groups=text["groups"],
    )
