"""MedHELMConfigurableScenario (HELM `medhelm_configurable_scenario.py`): a user's benchmark config.

* The prompt file is read whole (universal newlines); its placeholders are the field names
  `string.Formatter().parse` finds; each row renders `template.format_map({field: row.get(field, "")})`
  -- a column the CSV lacks renders as "", and values render as pandas parsed them ("0051" -> "51",
  an empty cell -> "nan", an int column with a gap -> "51.0").
* The dataset is read with `pandas.read_csv`; without a `correct_answer` column it is accepted only
  when `jury_score` is the sole metric. `incorrect_answers` cells are `json.loads`-ed (a JSON string
  is then iterated character by character, as HELM does).
* References: `correct_answer` (tagged correct; the parsed value, so possibly an int or NaN) then each
  incorrect answer. All instances are split "test", ids unset.

Fixed names: this folder's benchmark.yaml. scenario.json and HELM's ScenarioMetadata come from the
config (name, description, main metric), so both are defined here.
"""
from __future__ import annotations

import json
import string
from typing import Any

from medhelm_core.catalog import Benchmark
from medhelm_core.errors import MedhelmError
from medhelm_core.helm_types import TEST_SPLIT, instance, reference
from medhelm_core.scenarios.common import (
    first_line,
    py_value,
    read_csv_frame,
    require_file,
    require_path_arg,
    scenario_json,
)


def _config(bench: Benchmark, args: dict[str, Any]):
    """This folder's `config.BenchmarkConfig` of the spec's config_path."""
    return bench.module("config").load_benchmark_config(bench, require_path_arg(args, "config_path", bench.name))


def template_fields(template: str, entry: str) -> list[str]:
    """Field names of a format string, in order, repeats kept (HELM `get_columns_in_template`)."""
    try:
        return [fname for _, fname, _, _ in string.Formatter().parse(template) if fname]
    except ValueError as e:
        raise MedhelmError(f"{entry}: prompt template is not a valid format string: {first_line(e)}") from None


def load(bench: Benchmark, args: dict[str, Any]) -> list[dict]:
    entry = bench.name
    config = _config(bench, args)
    name = args.get("name", config.name)
    text = bench.text["scenario"]
    correct_col, incorrect_col = text["correct_answer_column"], text["incorrect_answers_column"]
    where = f"config_path={config.path}"
    require_file(config.prompt_file, entry, "prompt_file", where)
    require_file(config.dataset_file, entry, "dataset_file", where)

    df = read_csv_frame(config.dataset_file, entry, "dataset_file")
    if correct_col not in df.columns:
        if not config.is_llm_as_judge() or len(config.metrics) > 1:
            raise MedhelmError(
                f"{entry}: dataset_file {config.dataset_file} must contain a '{correct_col}' column "
                f"unless jury_score is the only metric ({where})"
            )
    if incorrect_col in df.columns:
        try:
            df[incorrect_col] = df[incorrect_col].apply(json.loads)
        except (ValueError, TypeError) as e:
            raise MedhelmError(
                f"{entry}: {incorrect_col} in {config.dataset_file} must be JSON lists: {first_line(e)}"
            ) from None

    try:
        with open(config.prompt_file, "r") as f:
            template = f.read()
    except (OSError, UnicodeDecodeError) as e:
        raise MedhelmError(f"{entry}: cannot read prompt_file {config.prompt_file}: {first_line(e)}") from None
    fields = template_fields(template, entry)

    instances = []
    for position, (_, row) in enumerate(df.iterrows()):
        mapping = {fname: row.get(fname, "") for fname in fields}
        try:
            filled = template.format_map(mapping)
        except (KeyError, IndexError, ValueError, AttributeError, TypeError) as e:
            raise MedhelmError(
                f"{entry}: cannot fill prompt_file {config.prompt_file} for {name} dataset row {position}: "
                f"{type(e).__name__}: {first_line(e)}"
            ) from None
        refs = []
        if correct_col in row:
            refs.append(reference(py_value(row[correct_col]), True))
        if incorrect_col in row:
            try:
                incorrect = list(row[incorrect_col])
            except TypeError:
                raise MedhelmError(
                    f"{entry}: {incorrect_col} in {config.dataset_file} row {position} is not a list"
                ) from None
            refs.extend(reference(py_value(answer), False) for answer in incorrect)
        instances.append(instance(filled, refs, TEST_SPLIT))
    return instances


def metadata(bench: Benchmark, args: dict[str, Any]) -> dict[str, Any]:
    config = _config(bench, args)
    text = bench.text["scenario"]
    return scenario_json(args.get("name", config.name), config.description, text["tags"], text["definition_path"])


def helm_metadata(bench: Benchmark, args: dict[str, Any]) -> dict[str, Any]:
    config = _config(bench, args)
    name = args.get("name", config.name)
    return {
        "name": name,
        "display_name": name,
        "description": config.description,
        "taxonomy": {"task": "", "what": "", "when": "", "who": "", "language": ""},
        "main_metric": config.main_metric.name,
        "main_split": bench.text["scenario"]["main_split"],
    }


def files(bench: Benchmark, args: dict[str, Any]) -> list[str]:
    """config_path, prompt_file, dataset_file (the judge prompt is read by the run spec, not here)."""
    config_path = require_path_arg(args, "config_path", bench.name)
    try:
        config = bench.module("config").load_benchmark_config(bench, config_path)
    except MedhelmError:
        return [config_path]
    return [config_path, config.prompt_file, config.dataset_file]

