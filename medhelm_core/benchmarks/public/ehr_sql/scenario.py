"""EhrSqlScenario (HELM `ehr_sql_scenario.py`): EHRSQL eICU questions -> SQL.

* Files: `eicu.sqlite` (the database the EhrSqlAnnotator executes SQL against), `eicu.sql` (the
  schema), `train.json` / `valid.json` / `test.json` (EHRSQL @ e172ec8). Split map: train -> train,
  **valid -> test, test -> test**. In a data mirror without `train.json`, the byte-identical member
  `eicu/train.json` of `eicu.zip` (raulista1997/benchmarkdata) is read.
* Schema prompt: each line of `eicu.sql` stripped; a block starts at a line beginning with
  `CREATE TABLE` and ends at the first line ending with `;`; lines joined with "\\n", blocks with "\\n\\n".
* Only entries with both `question` and `query` (and, when `skip_null_queries`, a `query` other than
  the string "null": medhelm 0.8.0); input text
  `"-- Database Schema:\\n" + schema + "\\n\\n--" + 21 spaces + "Question:\\n" + question + "\\n\\n"`
  (HELM's backslash line continuation injects the spaces); reference = `query`;
  `extra_data = {"db_path": "eicu.sqlite", "value": entry.get("value", {}), "is_impossible": ...}`.
* Every file sits in the data folder `data.folder` (`ehr_sql`; medhelm 0.8.0's pinned EHRSQL commit
  has its own).
"""
from __future__ import annotations

import io
from typing import Any

from medhelm_core import data_sources as ds
from medhelm_core.catalog import Benchmark
from medhelm_core.errors import MedhelmError
from medhelm_core.helm_types import instance, reference
from medhelm_core.scenarios.public.base import no_args as check  # noqa: F401  (HELM has no constructor args)
from medhelm_core.scenarios.public.json_files import read_json


def database_path(bench: Benchmark) -> str:
    """`eicu.sqlite` (mirror or online cache): what HELM's EhrSqlAnnotator opens."""
    data = bench.text["data"]
    return str(ds.fetch(ds.UpstreamFile(data["folder"], data["db_file"], data["db_url"])))


def _schema_file(bench: Benchmark):
    data = bench.text["data"]
    return ds.fetch(ds.UpstreamFile(data["folder"], data["schema_file"], data["schema_url"]))


def split_file(bench: Benchmark, split_name: str) -> ds.Located:
    data = bench.text["data"]
    name = f"{split_name}.json"
    up = ds.UpstreamFile(data["folder"], name, f"{data['base_url']}/{name}")
    return ds.fetch_or_mirror_member(up, data["mirror_fallback_zip"], f"{data['mirror_fallback_dir']}/{name}")


def extract_schema(schema_text: str) -> str:
    blocks: list[str] = []
    current: list[str] = []
    inside = False
    for line in io.StringIO(schema_text).readlines():  # HELM: f.readlines()
        line = line.strip()
        if line.startswith("CREATE TABLE"):
            inside = True
            current = [line]
        elif inside:
            current.append(line)
            if line.endswith(";"):
                inside = False
                blocks.append("\n".join(current))
    return "\n\n".join(blocks)


def files(bench: Benchmark, args: dict[str, Any]) -> list[str]:
    paths = [database_path(bench), str(_schema_file(bench))]
    paths += [str(split_file(bench, s).path) for s in bench.text["data"]["splits"]]
    return list(dict.fromkeys(paths))


def load(bench: Benchmark, args: dict[str, Any]) -> list[dict]:
    spec = bench.text["scenario"]
    database_path(bench)  # HELM downloads the database before anything else
    schema = extract_schema(ds.Located(_schema_file(bench)).read_text())
    instances = []
    for split_name, helm_split in bench.text["data"]["splits"].items():
        located = split_file(bench, split_name)
        entries = read_json(bench, located)
        if not isinstance(entries, list):
            raise MedhelmError(f"{bench.name}: {located} does not hold a JSON list")
        for entry in entries:
            if "question" in entry and "query" in entry and not (spec["skip_null_queries"] and entry["query"] == "null"):
                input_text = spec["input_template"].format(schema=schema, question=entry["question"])
                extra = {"db_path": spec["db_path"], "value": entry.get("value", {}),
                         "is_impossible": entry.get("is_impossible", False)}
                instances.append(instance(input_text, [reference(entry["query"], True)], helm_split, extra_data=extra))
    return instances
