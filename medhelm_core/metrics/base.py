"""HELM's metric machinery (`metrics/metric.py`): per-instance evaluation, aggregation, worst case.

* `EvalContext` plays HELM's `ScenarioState` + `MetricService`: the adapter spec, the request
  states, the unique instances in first-seen order, the `(trial, instance, reference_index)`
  index, and the deployment's tokenizer (built once per run).
* `Metric` is HELM's `Metric.evaluate`: for each train trial, every instance's single generation
  request state goes through `evaluate_generation`; its stats get the instance's context
  (`split`, `sub_split`, `perturbation`) and become one per-instance entry; they are merged by name
  (first-seen order), `derive_stats` and `derive_per_instance_stats` are added per context, then
  the worst-case copies (`compute_worst_case_metrics`), and each trial stat is reduced with
  `take_mean()` and merged across trials.
* `@helm_metric(class_name)` marks an implementation of a HELM metric class; `metric_table(modules)`
  collects the marked ones and `create_metric(spec, table)` builds a run spec's `{"class_name", "args"}`.
"""
from __future__ import annotations

import json
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Mapping, Optional

from medhelm_core.errors import MedhelmError
from medhelm_core.metrics.stat import (
    PERTURBATION_ORIGINAL,
    PERTURBATION_WORST,
    Stat,
    is_nan,
    merge_stat,
    name_key,
    normalize_perturbation,
    perturbation,
    perturbation_key,
    replace_name,
)
from medhelm_core.tokenizers import Tokenizer


class MetricError(MedhelmError):
    """A metric cannot be built or cannot evaluate the given request states."""


# ----------------------------------------------------------------------------------------------
# Instances and contexts
# ----------------------------------------------------------------------------------------------
Context = tuple  # (split, sub_split, perturbation dict or None)


def instance_key(instance: dict[str, Any]) -> tuple:
    """Identity of an Instance (HELM compares the frozen dataclass; id+split+perturbation suffice
    for instances built by a scenario, and the full JSON is the fallback without an id)."""
    iid = instance.get("id")
    if iid is None:
        return (None, json.dumps(instance, sort_keys=True))
    return (
        iid,
        instance.get("split"),
        instance.get("sub_split"),
        perturbation_key(instance.get("perturbation")),
    )


def instance_context(instance: dict[str, Any]) -> Context:
    return (instance.get("split"), instance.get("sub_split"), normalize_perturbation(instance.get("perturbation")))


def name_context(name: dict[str, Any]) -> Context:
    return (name.get("split"), name.get("sub_split"), name.get("perturbation"))


def context_key(context: Context) -> tuple:
    return (context[0], context[1], perturbation_key(context[2]))


def add_context(stat: Stat, context: Context) -> Stat:
    """HELM's `add_context`: a copy of `stat` named with the context's split/sub_split/perturbation."""
    split, sub_split, pert = context
    return Stat(replace_name(stat.name, split=split, sub_split=sub_split, perturbation=pert)).merge(stat)


@dataclass
class EvalContext:
    """What a metric sees: HELM's ScenarioState plus the metric service."""

    adapter_spec: dict[str, Any]
    request_states: list[dict[str, Any]]
    tokenizer: Tokenizer
    run_spec: dict[str, Any] = field(default_factory=dict)
    instances: list[dict[str, Any]] = field(init=False)
    instance_keys: list[tuple] = field(init=False)
    _index: dict[tuple, list[dict[str, Any]]] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        seen: dict[tuple, dict[str, Any]] = {}
        index: dict[tuple, list[dict[str, Any]]] = defaultdict(list)
        for rs in self.request_states:
            key = instance_key(rs["instance"])
            if key not in seen:
                seen[key] = rs["instance"]
            index[(rs.get("train_trial_index", 0), key, rs.get("reference_index"))].append(rs)
        self.instances = list(seen.values())
        self.instance_keys = list(seen.keys())
        self._index = dict(index)

    @property
    def num_train_trials(self) -> int:
        return int(self.adapter_spec.get("num_train_trials", 1))

    def get_request_states(
        self, train_trial_index: int, key: tuple, reference_index: Optional[int]
    ) -> list[dict[str, Any]]:
        return self._index.get((train_trial_index, key, reference_index), [])


@dataclass
class PerInstanceStats:
    instance_id: str
    perturbation: Optional[dict[str, Any]]
    train_trial_index: int
    stats: list[Stat]

    def to_json(self, drop_nan: bool = True) -> dict[str, Any]:
        out: dict[str, Any] = {"instance_id": self.instance_id}
        if self.perturbation is not None:
            out["perturbation"] = normalize_perturbation(self.perturbation)
        out["train_trial_index"] = self.train_trial_index
        out["stats"] = [s.to_json() for s in self.stats if not (drop_nan and is_nan(s.sum))]
        return out


@dataclass
class MetricResult:
    aggregated_stats: list[Stat]
    per_instance_stats: list[PerInstanceStats]


# ----------------------------------------------------------------------------------------------
# Metric base classes
# ----------------------------------------------------------------------------------------------
class MetricInterface:
    """Anything with HELM's `evaluate(scenario_state, ...) -> MetricResult`.

    `not_computed`: stats HELM's metric would also produce that this one cannot here (stat name ->
    the cause in words). A run refuses such a metric (its numbers would not be HELM's); a re-score
    of published stats computes the rest and lists these with their cause."""

    not_computed: dict[str, str] = {}

    def prepare(self) -> None:
        """Load what the metric needs beyond its arguments (model weights); a part that cannot be
        loaded goes into `not_computed`. Called once, only when the run will be evaluated."""

    def evaluate(self, ctx: EvalContext) -> MetricResult:  # pragma: no cover - abstract
        raise NotImplementedError


class Metric(MetricInterface):
    """HELM's `Metric`: subclasses implement `evaluate_generation` for one request state."""

    def evaluate_generation(
        self, adapter_spec: dict[str, Any], request_state: dict[str, Any], ctx: EvalContext
    ) -> list[Stat]:  # pragma: no cover - abstract
        raise NotImplementedError

    def derive_stats(self, stats_dict: dict[tuple, Stat]) -> list[Stat]:
        return []

    def derive_per_instance_stats(self, per_instance_stats: dict[tuple, list[Stat]]) -> list[Stat]:
        return []

    def evaluate(self, ctx: EvalContext) -> MetricResult:
        if ctx.adapter_spec.get("method") == "language_modeling":
            raise MetricError(
                f"{type(self).__name__} cannot evaluate the language_modeling adapter (HELM requires "
                "LanguageModelingMetric for it)"
            )
        adapter_spec = ctx.adapter_spec
        global_stats: dict[tuple, Stat] = {}
        all_per_instance: list[PerInstanceStats] = []

        for trial in range(ctx.num_train_trials):
            results: list[list[Stat]] = []
            for instance, key in zip(ctx.instances, ctx.instance_keys):
                states = ctx.get_request_states(trial, key, None)
                if not states:
                    results.append([])
                    continue
                if len(states) != 1:
                    raise MetricError(
                        f"instance {instance.get('id')!r} (train trial {trial}) has {len(states)} generation "
                        "request states; HELM expects exactly one"
                    )
                stats = self.evaluate_generation(adapter_spec, states[0], ctx)
                context = instance_context(instance)
                results.append([add_context(s, context) for s in stats])

            for instance, stats in zip(ctx.instances, results):
                if instance.get("id") is None:
                    raise MetricError("an instance without an id cannot be evaluated (HELM asserts instance.id)")
                if stats:
                    all_per_instance.append(
                        PerInstanceStats(instance["id"], instance.get("perturbation"), trial, stats)
                    )

            trial_stats: dict[tuple, Stat] = {}
            for stats in results:
                for stat in stats:
                    merge_stat(trial_stats, stat)

            # derive_stats, per context of the metric names
            grouped: dict[tuple, tuple[Context, dict[tuple, Stat]]] = {}
            for key, stat in trial_stats.items():
                context = name_context(stat.name)
                ck = context_key(context)
                if ck not in grouped:
                    grouped[ck] = (context, {})
                grouped[ck][1][key] = stat
            for context, stats_dict in grouped.values():
                for stat in self.derive_stats(stats_dict):
                    merge_stat(trial_stats, add_context(stat, context))

            # derive_per_instance_stats, per context of the instances
            grouped_pi: dict[tuple, tuple[Context, dict[tuple, list[Stat]]]] = {}
            for instance, key, stats in zip(ctx.instances, ctx.instance_keys, results):
                for stat in stats:
                    context = instance_context(instance)
                    ck = context_key(context)
                    if ck not in grouped_pi:
                        grouped_pi[ck] = (context, defaultdict(list))
                    grouped_pi[ck][1][key].append(stat)
            for context, per_instance in grouped_pi.values():
                for stat in self.derive_per_instance_stats(per_instance):
                    merge_stat(trial_stats, add_context(stat, context))

            for stat in compute_worst_case_metrics(ctx.instances, results):
                merge_stat(trial_stats, stat)

            for stat in trial_stats.values():
                merge_stat(global_stats, stat.take_mean())

        return MetricResult(list(global_stats.values()), all_per_instance)


def compute_worst_case_metrics(instances: list[dict[str, Any]], results: list[list[Stat]]) -> list[Stat]:
    """HELM's `compute_worst_case_metrics`.

    Per (metric name without perturbation, instance id), the `robustness` / `fairness` aggregate
    and each individual perturbation are merged with the original (unperturbed) value, and the
    minimum becomes a `computed_on: "worst"` stat; individual perturbations also get a
    `computed_on: "original"` copy of the original value. Without perturbations this yields, for
    every per-instance stat with count > 0, a robustness and a fairness copy of its value.
    """
    per_key: dict[tuple, tuple[dict[str, Any], list[Stat]]] = {}
    for instance, stats in zip(instances, results):
        for stat in stats:
            base = replace_name(stat.name, perturbation=None)
            k = (name_key(base), instance["id"])
            entry = per_key.get(k)
            if entry is None:
                per_key[k] = (base, [stat])
            else:
                entry[1].append(stat)

    derived: dict[tuple, Stat] = {}
    robustness_p = perturbation("robustness", robustness=True)
    fairness_p = perturbation("fairness", fairness=True)
    for base, stats in per_key.values():
        original: Optional[Stat] = None
        robustness_stat = Stat(replace_name(base, perturbation=robustness_p))
        fairness_stat = Stat(replace_name(base, perturbation=fairness_p))
        individual: dict[tuple, Stat] = {}
        for stat in stats:
            pert = stat.name.get("perturbation")
            if pert is None:
                if original is not None:
                    raise MetricError(f"for {base} got two unperturbed stats for one instance")
                original = stat
            else:
                if pert.get("robustness", False):
                    robustness_stat.merge(stat)
                if pert.get("fairness", False):
                    fairness_stat.merge(stat)
                pk = perturbation_key(pert)
                if pk in individual:
                    raise MetricError(f"for {base} got perturbation {pert} twice for one instance")
                individual[pk] = Stat(stat.name).merge(stat)

        for stat in [robustness_stat, fairness_stat, *individual.values()]:
            pert = stat.name["perturbation"]
            if original is not None:
                stat.merge(original)
                if pert["name"] not in ("robustness", "fairness"):
                    before = {**pert, "computed_on": PERTURBATION_ORIGINAL}
                    merge_stat(derived, Stat(replace_name(stat.name, perturbation=before)).merge(original))
            if stat.count > 0:
                worst = {**pert, "computed_on": PERTURBATION_WORST}
                merge_stat(derived, Stat(replace_name(stat.name, perturbation=worst)).add(stat.min))
    return list(derived.values())


# ----------------------------------------------------------------------------------------------
# Metric classes by HELM class_name (no registry: tables are collected from marked factories)
# ----------------------------------------------------------------------------------------------
MetricFactory = Callable[..., MetricInterface]
MetricTable = Mapping[str, MetricFactory]
HELM_METRIC_ATTRIBUTE = "__medhelm_metric__"


def helm_metric(*class_names: str) -> Callable[[MetricFactory], MetricFactory]:
    """Mark a metric class (or factory) as the implementation of these HELM `class_name`s (full
    dotted path); `metric_table(modules)` collects the marked factories of some modules."""

    def mark(factory: MetricFactory) -> MetricFactory:
        setattr(factory, HELM_METRIC_ATTRIBUTE, tuple(class_names))
        return factory

    return mark


def metric_table(modules: Iterable[Any]) -> dict[str, MetricFactory]:
    """HELM class_name -> factory, for the factories marked `@helm_metric` in these modules."""
    table: dict[str, MetricFactory] = {}
    for module in modules:
        for value in vars(module).values():
            # Only what the module defines (not what it imported), so a re-export is not a second definition.
            if getattr(value, "__module__", None) != module.__name__:
                continue
            for class_name in getattr(value, HELM_METRIC_ATTRIBUTE, ()):
                if class_name in table and table[class_name] is not value:
                    raise MetricError(f"metric {class_name!r} is defined twice ({module.__name__})")
                table[class_name] = value
    return table


def create_metric(spec: dict[str, Any], metrics: MetricTable) -> MetricInterface:
    """Build the metric for a run spec's MetricSpec `{"class_name", "args"}` from a metric table."""
    class_name = spec.get("class_name")
    factory = metrics.get(class_name)  # type: ignore[arg-type]
    if factory is None:
        raise MetricError(
            f"unknown metric class_name {class_name!r} in the run spec's metric_specs "
            f"(implemented: {', '.join(sorted(metrics))})"
        )
    try:
        return factory(**(spec.get("args") or {}))
    except TypeError as e:
        raise MetricError(f"metric {class_name!r}: bad args {spec.get('args')!r}: {e}") from e


def unique_stat_by_name(stats: Iterable[Stat], name: str) -> Optional[Stat]:
    """HELM's `get_unique_stat_by_name` (None if absent; error if several)."""
    matches = [s for s in stats if s.name["name"] == name]
    if not matches:
        return None
    if len(matches) != 1:
        raise MetricError(f"expected one stat named {name!r}, got {len(matches)}")
    return matches[0]
