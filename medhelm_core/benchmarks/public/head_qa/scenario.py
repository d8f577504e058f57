"""HeadQAScenario (HELM `headqa_scenario.py`, args `language="en"`, `category=None`):
`dvilares/head_qa` config `<language>`, split `test`; rows with an `image` are skipped, then the
optional category filter; input `qtext`; references = `answers` in order (`atext`, correct iff
`aid == ra`); `extra_data = {"id": qid, "name", "category", "year"}`. A script dataset: online we
read the hub's parquet export (`scenarios/public/huggingface.py`).
"""
from __future__ import annotations

from typing import Any

from medhelm_core.catalog import Benchmark
from medhelm_core.errors import MedhelmError
from medhelm_core.helm_types import TEST_SPLIT, instance, reference
from medhelm_core.scenarios.public import huggingface


def _args(bench: Benchmark, args: dict[str, Any]) -> tuple[str, Any]:
    unknown = sorted(set(args) - {"language", "category"})
    if unknown:
        raise MedhelmError(f"{bench.name}: HeadQAScenario takes only 'language' and 'category', got {unknown}")
    return args.get("language", "en"), args.get("category")


def check(bench: Benchmark, args: dict[str, Any]) -> None:
    _args(bench, args)


def files(bench: Benchmark, args: dict[str, Any]) -> list:
    return huggingface.files(bench, _args(bench, args)[0])


def load(bench: Benchmark, args: dict[str, Any]) -> list[dict]:
    language, category = _args(bench, args)
    instances = []
    for ex in huggingface.rows(bench, language):
        if ex["image"] is not None:  # SKIP_VQA
            continue
        if category is not None and ex["category"] != category:
            continue
        refs = [reference(opt["atext"], opt["aid"] == ex["ra"]) for opt in ex["answers"]]
        extra = {"id": ex["qid"], "name": ex["name"], "category": ex["category"], "year": ex["year"]}
        instances.append(instance(ex["qtext"], refs, TEST_SPLIT, extra_data=extra))
    return instances
