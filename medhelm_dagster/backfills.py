"""A backfill of the benchmark × model grid does its work in one run.

Dagster's backfill daemon cuts a two-dimensional set of partitions into one run per key of its
shorter side (a run per model column; `DefaultPartitionsSubset.get_partition_key_ranges`), and
nothing in a partitions definition or backfill policy changes that. Separate runs would each keep
their own limiter per judge, so a jury shared by every column would get that many times its
`max_concurrency`. So the first of a backfill's grid runs to start takes the backfill's claim and
runs every cell the backfill targets in one engine call: every endpoint busy once, the jury
pipelined across models. The others wait for the claim, find it done, and record their own cells
from the stored answers (no call). If the claimant fails, the next run to take the claim runs what
is left.
"""
from __future__ import annotations

import contextlib
import re
from pathlib import Path
from typing import Iterator

import dagster as dg
import filelock

BACKFILL_TAG = "dagster/backfill"


def backfill_partitions(context: dg.AssetExecutionContext, backfill_id: str) -> list[str]:
    """Every partition the backfill targets for the assets this step materializes, in the order
    of the partitions definition (empty when the backfill is not found)."""
    backfill = context.instance.get_backfill(backfill_id)
    if backfill is None or not backfill.is_asset_backfill:
        return []
    target = backfill.get_asset_backfill_data(context.repository_def.asset_graph).target_subset
    wanted: set[str] = set()
    for key in context.selected_asset_keys:
        if key in target.partitions_subsets_by_asset_key:
            wanted |= set(target.get_partitions_subset(key).get_partition_keys())
    order = context.assets_def.partitions_def.get_partition_keys(dynamic_partitions_store=context.instance)
    return [k for k in order if k in wanted]


class Claim:
    """One backfill's claim, held while its work runs: `done` once a run finished all of it."""

    def __init__(self, folder: Path, backfill_id: str):
        name = re.sub(r"[^A-Za-z0-9_-]", "_", backfill_id)
        folder.mkdir(parents=True, exist_ok=True)
        self.lock = filelock.FileLock(str(folder / f"{name}.lock"))
        self.marker = folder / f"{name}.done"

    @property
    def done(self) -> bool:
        return self.marker.exists()

    def mark_done(self) -> None:
        self.marker.write_text("done\n")


@contextlib.contextmanager
def claimed(folder: Path, backfill_id: str) -> Iterator[Claim]:
    """Hold the backfill's claim (waiting while another run of it holds it)."""
    claim = Claim(folder, backfill_id)
    with claim.lock:
        yield claim
