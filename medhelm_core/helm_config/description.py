"""Run-entry descriptions: HELM's `parse_object_spec` grammar and the run-expander args.

`common/object_spec.py` `parse_object_spec(description)`:

* if the description contains ":", it is split at the first ":" into the run-spec function name
  and the args string, which is split on every "," and each piece at its first "=" (a piece
  without "=" is an error, so is an empty args string: `"name:"`); otherwise the whole
  description is the name and there are no args;
* each value is converted with Python's `int()`, else `float()`, else kept as the string
  (so `4000` -> 4000, `0.5` -> 0.5, `1e3` -> 1000.0, `nan` -> nan, ` 7` -> 7); keys are kept
  verbatim (no stripping);
* args form a dict: a repeated key keeps its first position and its last value.

`benchmark/run_spec_factory.py` `construct_run_specs` then peels off the args whose key is a
registered run expander (`run_expander.py` `RUN_EXPANDERS`, all names listed in
`HELM_RUN_EXPANDER_NAMES`), in the order they appear; the other args are the run-spec
function's keyword arguments.
"""
from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict

from medhelm_core.errors import MedhelmError

# Every key of HELM 0.5.16's RUN_EXPANDERS (run_expander.py RUN_EXPANDER_SUBCLASSES), in its order.
HELM_RUN_EXPANDER_NAMES: tuple[str, ...] = (
    "instructions",
    "prompt",
    "newline",
    "stop",
    "format_prompt",
    "follow_format_instructions",
    "add_to_stop",
    "global_prefix",
    "num_train_trials",
    "max_train_instances",
    "max_eval_instances",
    "num_outputs",
    "num_trials",
    "model",
    "model_deployment",
    "data_augmentation",
    "tokenizer",
    "num_prompt_tokens",
    "num_output_tokens",
    "chatml",
    "eval_split",
    "output_format_instructions",
    "temperature",
    "increase_temperature",
    "increase_max_tokens",
    "process_output",
)


class ParsedDescription(BaseModel):
    """HELM's `ObjectSpec(class_name=<run-spec function name>, args)` for a description."""

    model_config = ConfigDict(frozen=True)

    name: str
    args: dict[str, Any]


def convert_value(value: str) -> Any:
    """`parse_arg`'s coercion: int(), then float(), else the string."""
    try:
        return int(value)
    except ValueError:
        pass
    try:
        return float(value)
    except ValueError:
        return value


def parse_description(description: str, where: str | None = None) -> ParsedDescription:
    """Parse `name:k=v,k=v`; errors are MedhelmError prefixed with `where` (e.g. "file:line")."""
    prefix = f"{where}: " if where else ""
    if ":" not in description:
        return ParsedDescription(name=description, args={})
    name, args_str = description.split(":", 1)
    args: dict[str, Any] = {}
    for arg in args_str.split(","):
        if "=" not in arg:
            raise MedhelmError(
                f"{prefix}bad run-entry description {description!r}: expected <key>=<value>, got {arg!r}"
            )
        key, value = arg.split("=", 1)
        args[key] = convert_value(value)
    return ParsedDescription(name=name, args=args)


def split_expander_args(args: dict[str, Any]) -> tuple[list[tuple[str, Any]], dict[str, Any]]:
    """(run-expander (key, value) pairs in description order, run-spec function kwargs)."""
    expanders = [(k, v) for k, v in args.items() if k in HELM_RUN_EXPANDER_NAMES]
    function_args = {k: v for k, v in args.items() if k not in HELM_RUN_EXPANDER_NAMES}
    return expanders, function_args
