"""MedAlign (HELM `medalign_scenario.py` + `medalign_scenario_helper.py`): clinician instructions
answered over a patient's EHR (XML event stream).

`data_path` holds `clinician-reviewed-model-responses.tsv` (instruction_id, question, person_id, ...:
the instructions), `clinician-instruction-responses.tsv` (instruction_id, annotator_num,
clinician_response, ...: the gold answers) and `medalign_ehr_xml/<person_id>.xml` (one EHR per file).
As HELM's `return_dataset_dataframe(max_length, data_path)`:

* instructions: `read_csv(sep="\\t")`, keyed by instruction_id (a repeated id keeps its first
  position and takes its last row); EHRs: every file of medalign_ehr_xml, keyed by
  `int(<file name before the first ".">)`, read as UTF-8;
* per instruction (tokenizer = fast tokenizer = tiktoken cl100k_base), the EHR budget is
  `max_length - 256 - tokens(prompt template) - tokens(instruction)`; with no budget the EHR is
  left out; if the whole EHR fits, it is encoded, decoded, re-encoded and its last `budget` tokens
  decoded (a round trip); otherwise its last `budget` tokens are decoded. The prompt is
  "Instruction: Answer the following question based on the EHR:\\n\\nEHR: {ehr}\\n\\nQuestion:
  {question}\\n\\nAnswer:";
* gold answers: the rows with annotator_num == 'Annotator_1', inner-joined (in their order) with the
  prompts on instruction_id;
* instance text = "\\nQuestion: " + prompt (HELM's PassageQuestionInput with an empty passage),
  reference = clinician_response, split "test".

HELM's tiktoken decode of a cut token sequence may end in a replacement character, exactly as here.
Literal text: benchmark.yaml (`bench.text`).
"""
from __future__ import annotations

import os
from typing import Any

from medhelm_core.catalog import Benchmark
from medhelm_core.helm_types import TEST_SPLIT, instance, passage_question_text, reference
from medhelm_core.errors import MedhelmError
from medhelm_core.scenarios.common import first_line, py_value
from medhelm_core.scenarios.gated.files import (
    bad_data,
    data_path_arg,
    encoding,
    missing_data,
    require_exists,
)


def _spec(bench: Benchmark) -> dict[str, Any]:
    return bench.text["scenario"]


def _paths(bench: Benchmark, data_path: str) -> dict[str, str]:
    files = _spec(bench)["files"]
    return {key: os.path.join(data_path, rel) for key, rel in files.items()}


def _read_tsv(bench: Benchmark, path: str):
    import pandas as pd

    try:
        return pd.read_csv(path, sep="\t")
    except (ValueError, OSError, UnicodeDecodeError) as e:
        raise bad_data(bench.name, path, e) from None


def read_instructions(bench: Benchmark, path: str) -> dict[Any, dict[str, Any]]:
    """HELM's `get_instructions`: instruction_id -> {instruction, patient_id}."""
    df = _read_tsv(bench, path)
    required = {"instruction_id", "question", "person_id"}
    if not required.issubset(df.columns):
        raise MedhelmError(f"{bench.name}: {path} lacks one of the columns {sorted(required)}")
    return {row["instruction_id"]: {"instruction": row["question"], "patient_id": row["person_id"]}
            for _, row in df.iterrows()}


def read_ehrs(bench: Benchmark, folder: str) -> dict[int, str]:
    """HELM's `get_ehrs`: int(file name before the first ".") -> file text."""
    if not os.path.isdir(folder):
        raise missing_data(bench, "EHR folder", folder)
    ehrs: dict[int, str] = {}
    for fname in os.listdir(folder):
        try:
            patient_id = int(fname.split(".")[0])
        except ValueError:
            raise MedhelmError(f"{bench.name}: EHR file name {fname!r} in {folder} is not <person_id>.xml") from None
        try:
            with open(os.path.join(folder, fname), encoding="utf-8", mode="r") as f:
                ehrs[patient_id] = f.read()
        except (OSError, UnicodeDecodeError) as e:
            raise bad_data(bench.name, os.path.join(folder, fname), e) from None
    return ehrs


def _encode(bench: Benchmark, enc, text: Any, what: str) -> list:
    try:
        return enc.encode(text)
    except (TypeError, ValueError) as e:
        raise MedhelmError(f"{bench.name}: cannot tokenize {what}: {first_line(e)}") from None


def trimmed_prompt(bench: Benchmark, instruction: Any, ehr: str, max_length: int, enc=None) -> str:
    """HELM's `pack_and_trim_prompts` for one instruction (include_ehr=True, tokenizer "tiktoken")."""
    spec = _spec(bench)
    template: str = spec["prompt_template"]
    enc = enc if enc is not None else encoding(spec["tokenizer"])
    fast = enc  # HELM's "fast tokenizer" is also tiktoken cl100k_base
    n_instruction = len(_encode(bench, enc, instruction, "an instruction"))
    n_template = len(_encode(bench, enc, template, "the prompt template"))
    budget = max_length - spec["generation_length"] - n_template - n_instruction
    if budget <= 0:
        return template.format(question=instruction, ehr="")
    fast_encoded = _encode(bench, fast, ehr, "an EHR")
    if len(fast_encoded) <= budget:
        fast_truncated = fast.decode(fast_encoded[-(2 * budget):])
        encoded = _encode(bench, enc, fast_truncated, "an EHR")
        truncated = enc.decode(encoded[-budget:])
    else:
        truncated = fast.decode(fast_encoded[-budget:])
    return template.format(question=instruction, ehr=truncated)


def load(bench: Benchmark, args: dict[str, Any]) -> list[dict]:
    import pandas as pd

    spec = _spec(bench)
    data_path = data_path_arg(args, bench.name)
    max_length = args.get("max_length")
    if not isinstance(max_length, int):
        raise MedhelmError(f"{bench.name}: max_length must be an integer, got {max_length!r}")
    paths = _paths(bench, data_path)
    require_exists(bench, paths["instructions"], f"{spec['file_labels']['instructions']}")
    require_exists(bench, paths["responses"], f"{spec['file_labels']['responses']}")

    instructions = read_instructions(bench, paths["instructions"])
    ehrs = read_ehrs(bench, paths["ehrs"])
    enc = encoding(spec["tokenizer"])
    prompts: dict[Any, str] = {}
    for instruction_id, info in instructions.items():
        try:
            patient_id = int(info["patient_id"])
        except (TypeError, ValueError):
            raise MedhelmError(f"{bench.name}: instruction {instruction_id!r} has person_id {info['patient_id']!r}, "
                               "not an integer") from None
        if patient_id not in ehrs:
            raise missing_data(bench, f"EHR of person_id {patient_id} (instruction {instruction_id!r})",
                               os.path.join(paths["ehrs"], f"{patient_id}.xml"))
        prompts[instruction_id] = trimmed_prompt(bench, info["instruction"], ehrs[patient_id], max_length, enc)
    if not prompts:
        raise MedhelmError(f"{bench.name}: No prompts were found for length: {max_length}. Try again with a larger length.")

    prompts_df = (pd.DataFrame.from_dict(prompts, orient="index", columns=["prompt"])
                  .reset_index().rename(columns={"index": "instruction_id"}))
    gold = _read_tsv(bench, paths["responses"])
    for col in ("annotator_num", "instruction_id", "clinician_response"):
        if col not in gold.columns:
            raise MedhelmError(f"{bench.name}: column {col!r} missing in {paths['responses']}")
    gold = gold[gold["annotator_num"] == spec["reference_annotator"]][["instruction_id", "clinician_response"]]
    merged = gold.merge(prompts_df, on="instruction_id", how="inner")

    instances = []
    for _, row in merged.iterrows():
        text = passage_question_text(spec["passage"], py_value(row["prompt"]), passage_prefix=spec["passage_prefix"],
                                     question_prefix=spec["question_prefix"], separator=spec["separator"])
        instances.append(instance(text, [reference(py_value(row["clinician_response"]), True)], TEST_SPLIT))
    return instances


def files(bench: Benchmark, args: dict[str, Any]) -> list[str]:
    paths = _paths(bench, data_path_arg(args, bench.name))
    return [paths["instructions"], paths["responses"], paths["ehrs"]]
