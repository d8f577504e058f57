"""Shared plumbing of the public-tier scenarios: argument checks and parse errors.

A public benchmark's `scenario.py` defines `load(bench, args) -> [Instance dict]` and
`files(bench, args) -> [path]` (the files `load` reads, resolved through `medhelm_core.data_sources`:
the data mirror or the online cache), reading its literal text from `bench.text`.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from medhelm_core import data_sources as ds
from medhelm_core.errors import MedhelmError
from medhelm_core.scenarios.common import first_line

if TYPE_CHECKING:  # for annotations only (nothing imported at run time)
    from medhelm_core.catalog import Benchmark


def no_args(bench: Benchmark, args: dict[str, Any]) -> None:
    """HELM's scenario classes without constructor arguments fail on any argument (a folder's
    `check`, for those classes)."""
    if args:
        cls = bench.scenario_class.rsplit(".", 1)[-1]
        raise MedhelmError(f"{bench.name}: {cls} takes no arguments, got {sorted(args)}")


def upstream_file(bench: Benchmark):
    """The one file of a benchmark's `data: {file, url}` (mirror or online cache)."""
    data = bench.text["data"]
    return ds.fetch(ds.UpstreamFile(bench.name, data["file"], data["url"]))


def parse_error(entry: str, what: Any, exc: BaseException) -> MedhelmError:
    return MedhelmError(f"{entry}: cannot parse {what}: {first_line(exc)}")
