"""Hugging Face datasets of the public benchmarks (head_qa, medcalc_bench, medhallu, medi_qa): the
split a benchmark's `data:` names, and its rows.

Rows come from `medhelm_core.data_sources` (one parquet file per split, read through `datasets`).
Each folder's scenario.py documents its HELM rules.
"""
from __future__ import annotations

from pathlib import Path

from medhelm_core import data_sources as ds

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # for annotations only (nothing imported at run time)
    from medhelm_core.catalog import Benchmark


def split(bench: Benchmark, config: str | None = None) -> ds.HFSplit:
    data = bench.text["data"]
    return ds.HFSplit(
        scenario=bench.name,
        path=data["hf_path"],
        config=config if config is not None else data.get("config"),
        split=data["split"],
        revision=data.get("online_revision", data.get("revision")),
        parquet_export=bool(data.get("parquet_export")),
        export_config=data.get("export_config"),
        online_path=data.get("online_path"),
    )


def rows(bench: Benchmark, config: str | None = None):
    hf = split(bench, config)
    return ds.load_hf_split(ds.fetch_hf_split(hf), hf.split)


def files(bench: Benchmark, config: str | None = None) -> list[Path]:
    return [ds.fetch_hf_split(split(bench, config))]
