"""HELM 0.5.16's metrics, re-implemented on plain dicts: the library every benchmark draws on.

Public API:

* `evaluate_run(run_spec, request_states, tokenizer_name, metrics) -> (per_instance_stats, stats)`
  (`evaluate.py`), in the JSON shape of HELM's per_instance_stats.json / stats.json;
* `Stat` and MetricName helpers (`stat.py`);
* `helm_metric`, `metric_table`, `create_metric` (`base.py`): a metric is a `Metric` subclass
  (implement `evaluate_generation`) or a `MetricInterface` (implement `evaluate`) marked
  `@helm_metric("helm.benchmark.metrics.<module>.<Class>")`;
* `basic.py`, `summarization.py`: the metrics many benchmarks use (the LLM jury's metric is in
  `medhelm_core/jury/`, a benchmark's own in its folder's `metric.py`); `catalog.Catalog.metrics`
  puts them into one table.
"""
from __future__ import annotations

from medhelm_core.metrics.base import (  # noqa: F401
    EvalContext,
    Metric,
    MetricError,
    MetricFactory,
    MetricInterface,
    MetricResult,
    MetricTable,
    PerInstanceStats,
    create_metric,
    helm_metric,
    metric_table,
)
from medhelm_core.metrics.evaluate import evaluate_run  # noqa: F401
from medhelm_core.metrics.stat import Stat, merge_stat, metric_name  # noqa: F401
