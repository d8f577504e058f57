"""HELM 0.5.16's metrics, re-implemented on plain dicts.

Public API:

* `evaluate_run(run_spec, request_states, tokenizer_name) -> (per_instance_stats, stats)`
  (`evaluate.py`), in the JSON shape of HELM's per_instance_stats.json / stats.json;
* `Stat` and MetricName helpers (`stat.py`);
* `METRICS`, `register_metric`, `create_metric` (`base.py`): the registry keyed by HELM's metric
  `class_name`. A new metric is a `Metric` subclass (implement `evaluate_generation`) or a
  `MetricInterface` (implement `evaluate`) decorated with
  `@register_metric("helm.benchmark.metrics.<module>.<Class>")` in a module imported below;
* `jury_score_corrected` (`jury.py`).
"""
from medhelm_core.metrics.base import (  # noqa: F401
    METRICS,
    EvalContext,
    Metric,
    MetricError,
    MetricInterface,
    MetricResult,
    PerInstanceStats,
    create_metric,
    register_metric,
)
from medhelm_core.metrics.stat import Stat, merge_stat, metric_name  # noqa: F401

# Modules whose import registers metric classes.
from medhelm_core.metrics import basic, ehr_sql, jury, medcalc, medec, summarization  # noqa: F401,E402
from medhelm_core.metrics import mimiciv_billing_code  # noqa: F401,E402  (gated tier)
from medhelm_core.metrics.jury import jury_score_corrected  # noqa: F401,E402

from medhelm_core.metrics.evaluate import evaluate_run  # noqa: F401,E402
