"""EHRSHOT (HELM `ehrshot_scenario.py`): binary clinical predictions from a MEDS-format EHR.

`data_path` is the EHRSHOT MEDS folder: `data/data.parquet` (events: subject_id, time, code, ...),
`metadata/subject_splits.parquet` and `labels/<task>/labels.parquet` (subject_id, prediction_time,
boolean_value). As HELM's `create_benchmark` + `get_instances` do:

* every `labels/<task>/labels.parquet` must exist (HELM checks them all, then reads only the
  subject's); a `lab_*` task keeps `DataFrame.sample(n=10000, random_state=1)` of its labels;
* events are sorted by (subject_id, time) and labels by (subject_id, prediction_time); for each label
  in that SORTED order the timeline is the codes of the subject's events with `time <=
  prediction_time` (events without a time never qualify);
* the prompts, built in sorted-label order, are assigned POSITIONALLY to the labels in their original
  (file / sampled) order - HELM's `df_labels["prompt"] = prompts`. When a labels file is not already
  sorted, prompt i therefore goes with label i of the file, not with its own label. This is HELM's
  behaviour and it is kept;
* prompt = "\\n# Instructions\\n" + instruction + "\\n\\n# Your Task\\n" + "Patient EHR:\\n" + one
  "- <code>" line per event + "\\n\\n", the instruction being the persona / clinical definition /
  code definition / question paragraphs (per task family, HELM's CONFIG), each followed by "\\n" and
  joined with "\\n";
* a prompt with more than `max_length` tokens (tiktoken `encoding_for_model("gpt-4")`, i.e.
  cl100k_base) is skipped; references "yes"/"no", the label's (`"yes" if boolean_value else "no"`)
  tagged correct; split "test".

HELM caches the prompts in `benchmark_output/scenarios/ehrshot/<task>/medhelm_prompts.parquet` and
reuses that file on later runs even if the data changed. medhelm caches the built instances in the
`datasets`/`instances` tables instead, keyed by the content hash of the three input files, so a
changed file gives a new dataset. (HELM parallelises the timeline search over 4 processes in chunks
of 1000 labels; the result is the same list, built here in one process.)
Literal text: benchmark.yaml (`bench.text`).
"""
from __future__ import annotations

import os
from typing import Any

from medhelm_core.catalog import Benchmark
from medhelm_core.helm_types import CORRECT_TAG, TEST_SPLIT, instance
from medhelm_core.errors import MedhelmError
from medhelm_core.scenarios.common import first_line, require_arg
from medhelm_core.scenarios.gated.files import (
    bad_data,
    data_path_arg,
    encoding_for_model,
    missing_data,
    require_exists,
    require_pyarrow,
)


def _spec(bench: Benchmark) -> dict[str, Any]:
    return bench.text["scenario"]


def task_family(task: str) -> str:
    """`get_task_config`: guo_* -> "guo", lab_* -> "lab", anything else -> "new"."""
    if task.startswith("guo"):
        return "guo"
    if task.startswith("lab"):
        return "lab"
    return "new"


def _subject(bench: Benchmark, args: dict[str, Any]) -> str:
    subject = require_arg(args, "subject", bench.name)
    if not isinstance(subject, str):
        raise MedhelmError(f"{bench.name}: subject must be a task name, got {subject!r}")
    return subject


def instruction_text(bench: Benchmark, task: str) -> str:
    """HELM's `base_prompt(task, **CONFIG[family])["instruction"]`, after `lumia_prompt`'s replace."""
    spec = _spec(bench)
    cfg = spec["config"][task_family(task)]
    for table in ("task_full_names", "task_questions"):
        if task not in spec[table]:
            raise MedhelmError(f"{bench.name}: unknown subject {task!r} (known: {', '.join(spec['task_full_names'])})")
    task_full_name = spec["task_full_names"][task].lower()
    paragraphs = []
    if cfg["is_include_persona"]:
        paragraphs.append(spec["persona_template"].format(role=spec["personas"][task].lower(),
                                                          task_full_name=task_full_name))
    if cfg["is_include_clinical_def"] and cfg["is_use_short_clinical_def"]:
        paragraphs.append(spec["clinical_def_prefix"] + spec["clinical_short_defs"][task])
    elif cfg["is_include_clinical_def"]:
        paragraphs.append(spec["clinical_def_prefix"] + spec["clinical_defs"][task])
    if cfg["is_include_code_def"]:
        code_def = spec["code_def_separator"].join(sorted(spec["code_defs"][task]))
        paragraphs.append(spec["code_def_template"].format(task_full_name=task_full_name, code_def=code_def))
    action = spec["action_cot_template"] if cfg["is_include_cot"] else spec["action_template"]
    paragraphs.append(spec["action_prefix"] + action.format(question=spec["task_questions"][task]))
    instruction = "\n".join(p + "\n" for p in paragraphs)
    old, new = spec["instruction_replace"]
    return instruction.replace(old, new)


def render_prompt(bench: Benchmark, task: str, codes: list[Any], instruction: str | None = None) -> str:
    """HELM's `lumia_prompt` with the `codes_only` EHR converter."""
    spec = _spec(bench)
    if spec["config"]["ehr_converter"] != "codes_only":
        raise MedhelmError(f"{bench.name}: only the codes_only EHR converter is used by HELM's CONFIG")
    ehr = "\n".join(spec["code_line_template"].format(code=c) for c in codes)
    example = spec["example_template"].format(ehr=ehr)
    if instruction is None:
        instruction = instruction_text(bench, task)
    return spec["prompt_template"].format(instruction=instruction, example=example)


def _read_parquet(bench: Benchmark, path: str):
    import pandas as pd

    try:
        return pd.read_parquet(path)
    except Exception as e:  # noqa: BLE001 - pyarrow raises many kinds
        raise bad_data(bench.name, path, e) from None


def _column(bench: Benchmark, df, column: str, path: str):
    if column not in df.columns:
        raise MedhelmError(f"{bench.name}: column {column!r} missing in {path}")
    return df[column]


def prior_codes(bench: Benchmark, df_data, df_labels, data_file: str, labels_file: str) -> list[list[Any]]:
    """HELM's `get_prior_events`: per label, in (subject_id, prediction_time) order, the codes of the
    subject's events at or before the prediction time, in (subject_id, time) order."""
    for col in ("subject_id", "time", "code"):
        _column(bench, df_data, col, data_file)
    for col in ("subject_id", "prediction_time"):
        _column(bench, df_labels, col, labels_file)
    data_sorted = df_data.sort_values(["subject_id", "time"])
    labels_sorted = df_labels.sort_values(["subject_id", "prediction_time"])
    groups = {key: frame for key, frame in data_sorted.groupby("subject_id")}
    out: list[list[Any]] = []
    for subject_id, prediction_time in zip(labels_sorted["subject_id"], labels_sorted["prediction_time"]):
        events = groups.get(subject_id)
        if events is None or len(events) == 0:
            out.append([])
            continue
        try:
            prior = events[events["time"] <= prediction_time]
        except TypeError as e:
            raise MedhelmError(f"{bench.name}: cannot compare event times of {data_file} with prediction times of "
                               f"{labels_file}: {first_line(e)}") from None
        out.append(list(prior["code"]))
    return out


def _paths(bench: Benchmark, data_path: str, subject: str) -> dict[str, str]:
    files = _spec(bench)["files"]
    return {
        "data": os.path.join(data_path, files["data"]),
        "splits": os.path.join(data_path, files["splits"]),
        "labels_dir": os.path.join(data_path, files["labels_dir"]),
        "labels": os.path.join(data_path, files["labels_dir"], subject, files["labels"]),
    }


def load(bench: Benchmark, args: dict[str, Any]) -> list[dict]:
    spec = _spec(bench)
    subject = _subject(bench, args)
    data_path = data_path_arg(args, bench.name)
    max_length = args.get("max_length")
    labels_name = spec["file_labels"]
    paths = _paths(bench, data_path, subject)
    require_exists(bench, paths["data"], f"{labels_name['data']} file")
    require_exists(bench, paths["splits"], f"{labels_name['splits']} file")
    if not os.path.isdir(paths["labels_dir"]):
        raise missing_data(bench, "labels folder", paths["labels_dir"])
    require_pyarrow(bench.name, "the EHRSHOT MEDS parquet files")
    instruction = instruction_text(bench, subject)  # unknown subject: fail before reading the big files
    df_data = _read_parquet(bench, paths["data"])
    df_splits = _read_parquet(bench, paths["splits"])

    df_labels = None
    for task in sorted(os.listdir(paths["labels_dir"])):
        labels_file = os.path.join(paths["labels_dir"], task, spec["files"]["labels"])
        require_exists(bench, labels_file, f"{labels_name['labels']} file")
        if task != subject:
            continue
        df_labels = _read_parquet(bench, labels_file)
        if subject.startswith("lab_"):
            try:
                df_labels = df_labels.sample(n=spec["config"]["max_labels_per_task"], random_state=spec["config"]["seed"])
            except ValueError as e:
                raise MedhelmError(f"{bench.name}: {labels_file}: HELM samples {spec['config']['max_labels_per_task']} "
                                   f"labels of a lab_ task: {first_line(e)}") from None
        timelines = prior_codes(bench, df_data, df_labels, paths["data"], labels_file)
    if df_labels is None:
        raise missing_data(bench, f"labels of subject {subject!r}", paths["labels"])

    # HELM: df_labels["split"] = df_labels["subject_id"].map(df_splits["split"]) (unused: every instance is "test")
    _column(bench, df_splits, "split", paths["splits"])
    boolean_values = list(_column(bench, df_labels, "boolean_value", paths["labels"]))
    prompts = [render_prompt(bench, subject, codes, instruction) for codes in timelines]  # sorted-label order

    choices: list[str] = spec["answer_choices"]
    counter = encoding_for_model(spec["token_count_model"]) if max_length is not None else None
    instances = []
    for prompt, label in zip(prompts, boolean_values):  # positional, as HELM's column assignment
        if counter is not None:
            try:
                n_tokens = len(counter.encode(prompt))
            except ValueError as e:  # tiktoken refuses special tokens inside the text
                raise MedhelmError(f"{bench.name}: cannot count the tokens of a prompt: {first_line(e)}") from None
            if n_tokens > max_length:
                continue
        answer = "yes" if label else "no"
        refs = [{"output": {"text": c}, "tags": [CORRECT_TAG] if c == answer else []} for c in choices]
        instances.append(instance(prompt, refs, TEST_SPLIT))
    return instances


def files(bench: Benchmark, args: dict[str, Any]) -> list[str]:
    paths = _paths(bench, data_path_arg(args, bench.name), _subject(bench, args))
    return [paths["data"], paths["splits"], paths["labels"]]
