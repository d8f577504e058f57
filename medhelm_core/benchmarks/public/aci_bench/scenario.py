"""ACIBenchScenario (HELM `aci_bench_scenario.py`): `train_full.json` -> train, then the three test
files in HELM's order -> test; per `data["data"]` entry the input is
`"Doctor-patient dialogue:\\n\\n" + src`, the one correct reference `tgt`. Ids are left unset (the
pipeline assigns `id0, id1, ...` over train + test, as HELM does).
"""
from __future__ import annotations

from typing import Any

from medhelm_core import data_sources as ds
from medhelm_core.catalog import Benchmark
from medhelm_core.helm_types import TEST_SPLIT, TRAIN_SPLIT, instance, reference
from medhelm_core.scenarios.public.json_files import read_json
from medhelm_core.scenarios.public.base import no_args as check  # noqa: F401  (HELM has no constructor args)


def _split_files(bench: Benchmark) -> list[tuple[str, Any]]:
    data = bench.text["data"]
    names = [(TRAIN_SPLIT, data["train"])] + [(TEST_SPLIT, n) for n in data["test"]]
    return [(split, ds.fetch(ds.UpstreamFile(bench.name, n, f"{data['base_url']}/{n}"))) for split, n in names]


def files(bench: Benchmark, args: dict[str, Any]) -> list:
    return [p for _, p in _split_files(bench)]


def load(bench: Benchmark, args: dict[str, Any]) -> list[dict]:
    template = bench.text["scenario"]["input_template"]
    instances = []
    for split, path in _split_files(bench):
        for entry in read_json(bench, path)["data"]:
            instances.append(instance(template.format(dialogue=entry["src"]), [reference(entry["tgt"], True)], split))
    return instances
