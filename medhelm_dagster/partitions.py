"""Partitions follow what the confs select (dynamic, added when a suite's run entries are registered):

* the per-run layers: a benchmark × model grid (`medhelm_core.run.grid`), one cell per run —
  `benchmark` (HELM's run name without its model arguments) × `model` (`<suite>/<deployment>`),
  Dagster's key `<benchmark>|<suite>/<deployment>`;
* `<tier>_scenarios`: one dataset per scenario spec (`<ScenarioClass>:<arg>=<value>,...`).
"""
import dagster as dg
from dagster._core.storage.tags import ASSET_PARTITION_RANGE_END_TAG, ASSET_PARTITION_RANGE_START_TAG

from medhelm_core.run.grid import Cell

benchmark_partitions = dg.DynamicPartitionsDefinition(name="benchmarks")
model_partitions = dg.DynamicPartitionsDefinition(name="models")
grid_partitions = dg.MultiPartitionsDefinition({"benchmark": benchmark_partitions, "model": model_partitions})
scenario_partitions = {tier: dg.DynamicPartitionsDefinition(name=f"{tier}_scenarios")
                       for tier in ("public", "gated", "private")}


def _as_block(instance: dg.DagsterInstance, partitions_name: str, keys: list[str]) -> tuple[str, str]:
    """The first and last of `keys` once they are one block of a dynamic partitions definition.
    A run targets a range (in the order partitions were added), so keys that are not one block yet
    are moved to the end, in this order (removing a dynamic partition keeps its history)."""
    keys = list(dict.fromkeys(keys))
    wanted = set(keys)

    def positions() -> list[int]:
        return [i for i, k in enumerate(instance.get_dynamic_partitions(partitions_name)) if k in wanted]

    found = positions()
    if len(found) != len(keys) or found[-1] - found[0] + 1 != len(keys):
        for key in keys:
            if instance.has_dynamic_partition(partitions_name, key):
                instance.delete_dynamic_partition(partitions_name, key)
        instance.add_dynamic_partitions(partitions_name, keys)
        found = positions()
    existing = instance.get_dynamic_partitions(partitions_name)
    return existing[found[0]], existing[found[-1]]


def partition_range_tags(instance: dg.DagsterInstance, partitions_name: str, keys: list[str]) -> dict[str, str]:
    """The tags of a Dagster run over exactly `keys` of a dynamic partitions definition."""
    if len(set(keys)) == 1:
        return {"dagster/partition": keys[0]}
    start, end = _as_block(instance, partitions_name, keys)
    return {ASSET_PARTITION_RANGE_START_TAG: start, ASSET_PARTITION_RANGE_END_TAG: end}


def grid_range_tags(instance: dg.DagsterInstance, cells: list[Cell]) -> dict[str, str]:
    """The tags of one Dagster run over the rectangle of grid cells `cells` span (a range of
    benchmarks × a range of models: Dagster's two-dimensional range)."""
    first_b, last_b = _as_block(instance, benchmark_partitions.name, [c.benchmark for c in cells])
    first_m, last_m = _as_block(instance, model_partitions.name, [c.model for c in cells])
    return {ASSET_PARTITION_RANGE_START_TAG: Cell(first_b, first_m).key,
            ASSET_PARTITION_RANGE_END_TAG: Cell(last_b, last_m).key}
