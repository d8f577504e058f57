"""Builders for HELM's JSON objects (RunSpec, AdapterSpec, Instance, ...), as plain dicts.

Field order and defaults follow HELM 0.5.16 (`adaptation/adapter_spec.py`, `run_spec.py`,
`scenarios/scenario.py`), so `json.dumps(obj, indent=2)` gives HELM's own file layout.
HELM omits fields whose value is None; `drop_nones` does the same.
"""
from __future__ import annotations

from typing import Any

CORRECT_TAG = "correct"
TRAIN_SPLIT, VALID_SPLIT, TEST_SPLIT = "train", "valid", "test"
EVAL_SPLITS = (VALID_SPLIT, TEST_SPLIT)

ADAPT_GENERATION = "generation"
ADAPT_MULTIPLE_CHOICE_JOINT = "multiple_choice_joint"
ADAPT_CHAT = "chat"

# AdapterSpec fields in HELM's declaration order, with their dataclass defaults.
ADAPTER_SPEC_DEFAULTS: dict[str, Any] = {
    "method": "",
    "global_prefix": "",
    "global_suffix": "",
    "instructions": "",
    "input_prefix": "Input: ",
    "input_suffix": "\n",
    "reference_prefix": "A. ",
    "reference_suffix": "\n",
    "chain_of_thought_prefix": "",
    "chain_of_thought_suffix": "\n",
    "output_prefix": "Output: ",
    "output_suffix": "\n",
    "instance_prefix": "\n",
    "substitutions": [],
    "max_train_instances": 5,
    "max_eval_instances": None,
    "num_outputs": 5,
    "num_train_trials": 1,
    "num_trials": 1,
    "sample_train": True,
    "model_deployment": None,
    "model": None,
    "temperature": 1,
    "max_tokens": 100,
    "stop_sequences": [],
    "random": None,
    "multi_label": False,
    "image_generation_parameters": None,
    "reeval_parameters": None,
    "eval_splits": None,
    "output_mapping_pattern": None,
}

DATA_AUGMENTER_SPEC_DEFAULT: dict[str, Any] = {
    "perturbation_specs": [],
    "should_augment_train_instances": False,
    "should_include_original_train": False,
    "should_skip_unchanged_train": False,
    "should_augment_eval_instances": False,
    "should_include_original_eval": False,
    "should_skip_unchanged_eval": False,
    "seeds_per_instance": 1,
}


# Fields whose value is a plain dict in HELM (ObjectSpec.args, Instance.extra_data,
# RequestState.annotations / output_mapping; Input.messages and Request.messages, lists of plain
# dicts): `dataclasses.asdict` copies plain dicts as they are,
# so None values inside them survive (`"category": null` in head_qa's scenario args, a jury's
# `"prompt_text": null`, ehr_sql's `"query_error": null`).
PLAIN_DICT_FIELDS = frozenset({"args", "extra_data", "annotations", "output_mapping", "messages"})


def drop_nones(obj: Any) -> Any:
    """HELM's `asdict_without_nones`: drop None-valued dataclass fields at every level (plain-dict
    fields, `PLAIN_DICT_FIELDS`, are kept as they are)."""
    if isinstance(obj, dict):
        return {k: (v if k in PLAIN_DICT_FIELDS else drop_nones(v)) for k, v in obj.items() if v is not None}
    if isinstance(obj, list):
        return [drop_nones(v) for v in obj]
    return obj


def adapter_spec(**fields: Any) -> dict[str, Any]:
    unknown = set(fields) - set(ADAPTER_SPEC_DEFAULTS)
    if unknown:
        raise ValueError(f"unknown AdapterSpec fields: {sorted(unknown)}")
    spec = {k: (list(v) if isinstance(v, list) else v) for k, v in ADAPTER_SPEC_DEFAULTS.items()}
    spec.update(fields)
    return spec


def _format_instructions(instructions: str) -> str:
    return f"{instructions}\n" if instructions else ""


def _format_prefix(noun: str | None, append_new_line: bool) -> str:
    if noun is None:
        return ""
    return f"{noun}:" + ("\n" if append_new_line else " ")


def generation_adapter_spec(
    instructions: str = "",
    input_noun: str | None = None,
    newline_after_input_noun: bool = False,
    output_noun: str | None = None,
    newline_after_output_noun: bool = False,
    max_train_instances: int = 5,
    num_outputs: int = 1,
    max_tokens: int = 5,
    stop_sequences: list[str] | None = None,
    temperature: float = 0.0,
    multi_label: bool = False,
) -> dict[str, Any]:
    """HELM's `get_generation_adapter_spec` (common_adapter_specs.py)."""
    return adapter_spec(
        method=ADAPT_GENERATION,
        instructions=_format_instructions(instructions),
        input_prefix=_format_prefix(input_noun, newline_after_input_noun),
        input_suffix="\n",
        output_prefix=_format_prefix(output_noun, newline_after_output_noun),
        output_suffix="\n",
        max_train_instances=max_train_instances,
        num_outputs=num_outputs,
        max_tokens=max_tokens,
        temperature=temperature,
        stop_sequences=["\n"] if stop_sequences is None else list(stop_sequences),
        multi_label=multi_label,
    )


def multiple_choice_joint_adapter_spec(
    instructions: str,
    input_noun: str | None,
    output_noun: str,
    max_train_instances: int = 5,
    num_outputs: int = 5,
    max_tokens: int = 1,
    sample_train: bool = True,
    **overrides: Any,
) -> dict[str, Any]:
    """HELM's `get_multiple_choice_adapter_spec(method=ADAPT_MULTIPLE_CHOICE_JOINT, ...)`."""
    fields: dict[str, Any] = dict(
        method=ADAPT_MULTIPLE_CHOICE_JOINT,
        instructions=_format_instructions(instructions),
        input_prefix=f"{input_noun}: " if input_noun is not None else "",
        input_suffix="\n" if input_noun is not None else "",
        output_prefix=f"{output_noun}: ",
        output_suffix="\n",
        max_train_instances=max_train_instances,
        num_outputs=num_outputs,
        max_tokens=max_tokens,
        temperature=0.0,
        stop_sequences=["\n"],
        sample_train=sample_train,
    )
    fields.update(overrides)
    return adapter_spec(**fields)


def scenario_spec(class_name: str, args: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"class_name": class_name, "args": dict(args or {})}


def metric_spec(class_name: str, args: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"class_name": class_name, "args": dict(args or {})}


def annotator_spec(class_name: str, args: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"class_name": class_name, "args": dict(args or {})}


def run_spec(
    name: str,
    scenario: dict[str, Any],
    adapter: dict[str, Any],
    metric_specs: list[dict[str, Any]],
    groups: list[str],
    annotators: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """A HELM RunSpec in its JSON field order.

    `annotators=None` stays None (HELM's default; `drop_nones` then omits the key, as in HELM's
    run_spec.json for specs without annotators), while an empty list stays `[]` (the configurable
    benchmark passes `[]` and HELM writes `"annotators": []`).
    """
    return {
        "name": name,
        "scenario_spec": scenario,
        "adapter_spec": adapter,
        "metric_specs": metric_specs,
        "data_augmenter_spec": dict(DATA_AUGMENTER_SPEC_DEFAULT),
        "groups": list(groups),
        "annotators": list(annotators) if annotators is not None else None,
    }


def reference(text: str, correct: bool) -> dict[str, Any]:
    return {"output": {"text": text}, "tags": [CORRECT_TAG] if correct else []}


def instance(
    text: str,
    references: list[dict[str, Any]],
    split: str,
    id: str | None = None,
    sub_split: str | None = None,
    extra_data: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """A HELM Instance (input, references, split, sub_split, id, ..., extra_data)."""
    inst: dict[str, Any] = {"input": {"text": text}, "references": references, "split": split}
    if sub_split is not None:
        inst["sub_split"] = sub_split
    if id is not None:
        inst["id"] = id
    if extra_data is not None:
        inst["extra_data"] = extra_data
    return inst


def passage_question_text(passage: str, question: str, passage_prefix: str = "",
                          question_prefix: str = "Question: ", separator: str = "\n") -> str:
    """Text of HELM's `PassageQuestionInput`."""
    return f"{passage_prefix}{passage}{separator}{question_prefix}{question}"
