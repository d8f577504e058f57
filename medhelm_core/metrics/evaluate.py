"""Evaluate one run as HELM's `Runner.run_one` does after annotation.

The run spec's `metric_specs` are built in order (from a metric table: the catalog's) and each evaluates
the request states; their run-level stats are concatenated in that order (`stats.json`) and their
per-instance entries too (`per_instance_stats.json`: one entry per metric and instance, metric by
metric). Stats whose `sum` is NaN are dropped (`remove_stats_nans` /
`remove_per_instance_stats_nans`). Duplicate stat names are kept, as HELM only warns about them.
"""
from __future__ import annotations

import logging
from collections import Counter
from typing import Any

from medhelm_core.metrics.base import EvalContext, MetricResult, MetricTable, create_metric
from medhelm_core.metrics.stat import Stat, is_nan
from medhelm_core.tokenizers import get_tokenizer

log = logging.getLogger(__name__)


def evaluate_run_stats(
    run_spec: dict[str, Any], request_states: list[dict[str, Any]], tokenizer_name: str | None,
    metrics: MetricTable,
) -> list[MetricResult]:
    """The `MetricResult` of each metric spec, in order (Stat objects, before NaN removal)."""
    built = [create_metric(spec, metrics) for spec in run_spec.get("metric_specs", [])]
    ctx = EvalContext(
        adapter_spec=run_spec["adapter_spec"],
        request_states=request_states,
        tokenizer=get_tokenizer(tokenizer_name) if tokenizer_name is None or isinstance(tokenizer_name, str)
        else tokenizer_name,
        run_spec=run_spec,
    )
    return [metric.evaluate(ctx) for metric in built]


def evaluate_run(
    run_spec: dict[str, Any], request_states: list[dict[str, Any]], tokenizer_name: str | None,
    metrics: MetricTable,
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(per_instance_stats, stats) exactly as HELM writes per_instance_stats.json and stats.json.

    `tokenizer_name` is the model deployment's `tokenizer_name` (e.g. "simple/tokenizer1"), or the
    tokenizer itself (`Workspace.tokenizer`), used for `num_prompt_tokens`; None means a deployment
    without tokenizer (count 1). `metrics`
    maps HELM metric class names to implementations (`Catalog.metrics`, or `catalog.library_metrics()`).
    """
    results = evaluate_run_stats(run_spec, request_states, tokenizer_name, metrics)
    stats: list[Stat] = [s for r in results for s in r.aggregated_stats]
    counts = Counter(s.key for s in stats)
    for key, n in counts.items():
        if n > 1:
            log.warning("duplicate metric name %s", key)
    per_instance = [p.to_json(drop_nan=True) for r in results for p in r.per_instance_stats]
    return per_instance, [s.to_json() for s in stats if not is_nan(s.sum)]
