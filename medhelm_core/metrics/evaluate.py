"""Evaluate one run as HELM's `Runner.run_one` does after annotation.

The run spec's `metric_specs` are built in order (from a metric table: the catalog's) and each evaluates
the request states; their run-level stats are concatenated in that order (`stats.json`) and their
per-instance entries too (`per_instance_stats.json`: one entry per metric and instance, metric by
metric). Stats whose `sum` is NaN are dropped (`remove_stats_nans` /
`remove_per_instance_stats_nans`). Duplicate stat names are kept, as HELM only warns about them.

A run evaluates every stat HELM's metrics would, or refuses. `evaluate_run_partial` (re-scoring
published stats) computes what can be computed here and says, per stat name, why the rest cannot:
a metric's `not_computed` stats, and the token counts when the deployment's tokenizer is not here.
"""
from __future__ import annotations

import logging
from collections import Counter
from typing import Any

from medhelm_core.metrics.base import EvalContext, MetricError, MetricResult, MetricTable, create_metric
from medhelm_core.metrics.stat import Stat, is_nan
from medhelm_core.tokenizers import TokenizerError, UncountedTokenizer, get_tokenizer

# The stats that count tokens with the deployment's tokenizer (`BasicGenerationMetric`).
TOKENIZER_STATS = ("num_prompt_tokens", "num_output_tokens")  # the latter only when the prompt is echoed

log = logging.getLogger(__name__)


# What a run that cannot compute a stat HELM's spec asks for can do instead.
REFUSAL_HINT = " (or run with --metric-device cpu: HELM's specs on a machine without a GPU)"


def _not_computed(built: list, strict: bool) -> dict[str, str]:
    out: dict[str, str] = {}
    for metric in built:
        out.update(metric.not_computed)
    if strict and out:
        raise MetricError(next(iter(out.values())) + REFUSAL_HINT)
    return out


def check_metrics_computable(run_spec: dict[str, Any], metrics: MetricTable) -> None:
    """Raise `MetricError` (one line) when a metric of `run_spec` could not compute every stat HELM's
    would here (a package, model weights or data file missing): a run checks this before any call is
    paid for. The weights loaded here stay loaded for the evaluation."""
    built = [create_metric(spec, metrics) for spec in run_spec.get("metric_specs", [])]
    _not_computed(built, strict=True)
    for metric in built:
        metric.prepare()
    _not_computed(built, strict=True)


def _evaluate(run_spec, request_states, tokenizer, metrics, strict) -> tuple[list[MetricResult], dict[str, str]]:
    built = [create_metric(spec, metrics) for spec in run_spec.get("metric_specs", [])]
    _not_computed(built, strict)  # a run refuses before loading any weights
    for metric in built:
        metric.prepare()
    not_computed = _not_computed(built, strict)
    if tokenizer is None or isinstance(tokenizer, str):
        try:
            tokenizer = get_tokenizer(tokenizer)
        except TokenizerError as e:
            if strict:
                raise
            tokenizer = UncountedTokenizer(tokenizer)
            not_computed.update({name: str(e) for name in TOKENIZER_STATS})
    ctx = EvalContext(adapter_spec=run_spec["adapter_spec"], request_states=request_states, tokenizer=tokenizer,
                      run_spec=run_spec)
    return [metric.evaluate(ctx) for metric in built], not_computed


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
    per_instance, stats, _ = evaluate_run_partial(run_spec, request_states, tokenizer_name, metrics, strict=True)
    return per_instance, stats


def evaluate_run_partial(
    run_spec: dict[str, Any], request_states: list[dict[str, Any]], tokenizer_name: str | None,
    metrics: MetricTable, strict: bool = False,
) -> tuple[list[dict[str, Any]], list[dict[str, Any]], dict[str, str]]:
    """`evaluate_run`, and the stats it could not compute here (name -> cause): those are absent."""
    results, not_computed = _evaluate(run_spec, request_states, tokenizer_name, metrics, strict)
    stats: list[Stat] = [s for r in results for s in r.aggregated_stats]
    counts = Counter(s.key for s in stats)
    for key, n in counts.items():
        if n > 1:
            log.warning("duplicate metric name %s", key)
    per_instance = [p.to_json(drop_nan=True) for r in results for p in r.per_instance_stats]
    return per_instance, [s.to_json() for s in stats if not is_nan(s.sum)], not_computed
