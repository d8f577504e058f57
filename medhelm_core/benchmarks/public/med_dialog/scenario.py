"""MedDialogScenario (HELM `med_dialog_scenario.py`): `<subset>/test.json` of the CodaLab bundle ->
test; input `src`, reference `tgt`. `subset` must be healthcaremagic or icliniq. Ids are left unset
(the pipeline assigns `id0, id1, ...`, as HELM does).
"""
from __future__ import annotations

from typing import Any

from medhelm_core import data_sources as ds
from medhelm_core.catalog import Benchmark
from medhelm_core.errors import MedhelmError
from medhelm_core.helm_types import TEST_SPLIT, instance, reference
from medhelm_core.scenarios.public.json_files import read_json


def check(bench: Benchmark, args: dict[str, Any]) -> None:
    subsets = bench.text["data"]["subsets"]
    unknown = sorted(set(args) - {"subset"})
    if unknown:
        raise MedhelmError(f"{bench.name}: MedDialogScenario takes only 'subset', got {unknown}")
    if "subset" not in args:
        raise MedhelmError(f"{bench.name}: missing required argument 'subset'")
    if args["subset"] not in subsets:
        raise MedhelmError(f"{bench.name}: invalid subset {args['subset']!r} (expected one of {subsets})")


def _file(bench: Benchmark, args: dict[str, Any]):
    data = bench.text["data"]
    subset = args["subset"]
    return ds.fetch(ds.UpstreamFile(bench.name, data["file"].format(subset=subset), data["url"].format(subset=subset)))


def files(bench: Benchmark, args: dict[str, Any]) -> list:
    return [_file(bench, args)]


def load(bench: Benchmark, args: dict[str, Any]) -> list[dict]:
    examples = read_json(bench, _file(bench, args))["data"]
    return [instance(ex["src"], [reference(ex["tgt"], True)], TEST_SPLIT) for ex in examples]
