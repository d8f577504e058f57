"""Run entries -> RunSpecs, as `helm-run` does it (HELM 0.5.16).

Pipeline, with the HELM source it mirrors:

1. `benchmark/run.py` `helm_run`: without `--models-to-run`, refuse entries whose `model=` is a
   wildcard group (`all`, `text`, ...) and refuse confs where no entry has `model=`; with it,
   every name must be a known model or model deployment (`check_models_to_run`).
2. `run.py` `run_entries_to_run_specs`, per entry in order:
   * skip it if `priority` is given and `entry.priority > priority` (entries without a priority
     always run);
   * parse the description (`description.py`); with `--models-to-run`, when the entry's `model`
     arg has no "/" (absent, or a group such as `all`), make one copy of the entry per model to
     run, with `model=<that model>` (kept in place if present, else added LAST);
   * `run_spec_factory.py` `construct_run_specs`: look up the run-spec function by the
     description's name; peel off the run-expander args in description order; add
     `model=all` at the end when there is no `model` expander; call the function with the other
     args; apply the expanders in order (each may multiply the run specs); then `alter_run_spec`;
   * drop run specs whose `adapter_spec.model` and `adapter_spec.model_deployment` are both not
     in `--models-to-run`, and those with no group in `--groups-to-run`;
   * `adapter_spec.max_eval_instances = --max-eval-instances` only where it is None;
     `num_train_trials = 1` where `max_train_instances == 0`, else `--num-train-trials` if given;
   * entry `groups`: name += `,groups=<sorted groups joined by "-">` (nothing for an empty list)
     and RunSpec.groups += entry groups.
3. `run_spec.py` `RunSpec.__post_init__`: every "/" in the name becomes "_" (after every change).

Run names are built by the expanders: most append `":"` if the name has no ":" yet, else
`","`, then `key=value` ("/" -> "_"); `instructions`, `prompt`, `newline`, `stop`,
`global_prefix` always append with ","; `temperature`, `increase_*`, `add_to_stop`,
`format_prompt`, `follow_format_instructions` do not change the name. `ModelRunExpander` appends
`model=<last two "/"-parts of the value>` and sets `adapter_spec.model` to those two parts, and
`model_deployment` to the full value only when it has more than two parts.

`alter_run_spec` (run_spec_factory.py): fill `model` from the deployment (its `model_name`) or
`model_deployment` from the model (the registry's default deployment); check the deployment
exists and serves that model; then the model-metadata-tag changes. All of HELM's are reproduced
(NO_NEWLINES -> stop=hash, NLG_PREFIX -> global_prefix=nlg, CHATML, Claude 1/2 prompts, Claude 3
(drop whitespace-only stop sequences), Gemini Pro Vision v1 max_tokens 1 -> 2, IDEFICS instruct,
LLaVA, OpenFlamingo, BUGGY_TEMP_0 (temperature 0 -> 1e-4), google/medlm-large -> stop=none).
For the MedHELM models only ANTHROPIC_CLAUDE_3_MODEL_TAG matters (claude-3-5/3-7 sonnet): their
multiple-choice run specs (stop sequence "\n") get `stop_sequences=[]`. The tags come from the
built-in `medhelm_core/resources/helm_registry/model_metadata.yaml` (HELM's metadata for the models of the MedHELM
confs) and the user's `model_metadata.yaml`; an unknown model gets HELM's placeholder tags, which
trigger none of these.

Unsupported HELM expanders (`data_augmentation`, `tokenizer`, `output_format_instructions`,
`process_output`, `chatml` as a description key) raise a MedhelmError instead of silently
passing the key to the run-spec function.
"""
from __future__ import annotations

import copy
import inspect
import re
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, NamedTuple, Optional, Sequence

from medhelm_core.helm_config.deployments import DEFAULT_LOCAL_PATH, ModelRegistry, load_model_registry
from medhelm_core.helm_config.description import parse_description, split_expander_args
from medhelm_core.helm_config.entry_files import read_run_entries
from medhelm_core.helm_config.run_entries import RunEntry
from medhelm_core.errors import MedhelmError

RunSpecDict = dict[str, Any]

ADAPT_GENERATION = "generation"
ADAPT_MULTIPLE_CHOICE_JOINT = "multiple_choice_joint"
ADAPT_MULTIPLE_CHOICE_JOINT_CHAIN_OF_THOUGHT = "multiple_choice_joint_chain_of_thought"
TEST_SPLIT, VALID_SPLIT = "test", "valid"

# model_metadata_registry.py tags
NO_NEWLINES_TAG = "NO_NEWLINES_TAG"
NLG_PREFIX_TAG = "NLG_PREFIX_TAG"
CHATML_MODEL_TAG = "CHATML_MODEL_TAG"
ANTHROPIC_CLAUDE_1_MODEL_TAG = "ANTHROPIC_CLAUDE_1_MODEL_TAG"
ANTHROPIC_CLAUDE_2_MODEL_TAG = "ANTHROPIC_CLAUDE_2_MODEL_TAG"
ANTHROPIC_CLAUDE_3_MODEL_TAG = "ANTHROPIC_CLAUDE_3_MODEL_TAG"
VISION_LANGUAGE_MODEL_TAG = "VISION_LANGUAGE_MODEL_TAG"
GOOGLE_GEMINI_PRO_VISION_V1_TAG = "GOOGLE_GEMINI_PRO_VISION_V1_TAG"
IDEFICS_MODEL_TAG = "IDEFICS_MODEL_TAG"
IDEFICS_INSTRUCT_MODEL_TAG = "IDEFICS_INSTRUCT_MODEL_TAG"
LLAVA_MODEL_TAG = "LLAVA_MODEL_TAG"
OPEN_FLAMINGO_MODEL_TAG = "OPEN_FLAMINGO_MODEL_TAG"
BUGGY_TEMP_0_TAG = "BUGGY_TEMP_0_TAG"
INSTRUCTION_FOLLOWING_MODEL_TAG = "INSTRUCTION_FOLLOWING_MODEL_TAG"
TEXT_MODEL_TAG = "TEXT_MODEL_TAG"
CODE_MODEL_TAG = "CODE_MODEL_TAG"
FULL_FUNCTIONALITY_TEXT_MODEL_TAG = "FULL_FUNCTIONALITY_TEXT_MODEL_TAG"
LIMITED_FUNCTIONALITY_TEXT_MODEL_TAG = "LIMITED_FUNCTIONALITY_TEXT_MODEL_TAG"
ABLATION_MODEL_TAG = "ABLATION_MODEL_TAG"
TEXT_TO_IMAGE_MODEL_TAG = "TEXT_TO_IMAGE_MODEL_TAG"
AUDIO_LANGUAGE_MODEL_TAG = "AUDIO_LANGUAGE_MODEL_TAG"
DEPRECATED_MODEL_TAG = "DEPRECATED_MODEL_TAG"
UNSUPPORTED_MODEL_TAG = "UNSUPPORTED_MODEL_TAG"

# run.py helm_run: wildcard model groups that need --models-to-run
_MODEL_WILDCARD = re.compile(
    r"\bmodel=(?:all|text_code|text|code|instruction_following|full_functionality_text"
    r"|limited_functionality_text)\b"
)
_MODEL_ARG = re.compile(r"\bmodel=\b")

IN_CONTEXT_LEARNING_INSTRUCTIONS_PREFIX = (
    "Here are some input-output examples. "
    "Read the examples carefully to figure out the mapping. "
    "The output of the last example is not given, "
    "and your job is to figure out what it is."
)
IN_CONTEXT_LEARNING_INSTRUCTIONS_SUFFIX = (
    "Please provide the output to this last example. It is critical to follow the format of the preceding outputs!"
)
_HUMAN_PROMPT = "\n\nHuman:"
_AI_PROMPT = "\n\nAssistant:"


class ExpandedRun(NamedTuple):
    entry: RunEntry
    run_spec: RunSpecDict

    @property
    def name(self) -> str:
        return self.run_spec["name"]


# --------------------------------------------------------------------------------------------
# helpers
# --------------------------------------------------------------------------------------------


def _sanitize(value: Any) -> str:
    return str(value).replace("/", "_")


def _sep(name: str) -> str:
    return "," if ":" in name else ":"


def _replace(run_spec: RunSpecDict, name: Optional[str] = None, **adapter_fields: Any) -> RunSpecDict:
    """dataclasses.replace(run_spec, name=..., adapter_spec=replace(adapter_spec, ...))."""
    out = copy.deepcopy(run_spec)
    if name is not None:
        out["name"] = name
    if adapter_fields:
        out["adapter_spec"] = {**out.get("adapter_spec", {}), **adapter_fields}
    out["name"] = out["name"].replace("/", "_")  # RunSpec.__post_init__
    return out


def _adapter(run_spec: RunSpecDict) -> dict[str, Any]:
    return run_spec.get("adapter_spec", {})


class Expander:
    """A HELM RunExpander: run spec -> list of run specs."""

    name = ""

    def expand(self, run_spec: RunSpecDict) -> list[RunSpecDict]:
        raise NotImplementedError


class ReplaceValueExpander(Expander):
    """ReplaceValueRunExpander: set `adapter_spec.<name>`; name += `<sep><name>=<value>`."""

    def __init__(self, name: str, value: Any, values_dict: Mapping[str, list[Any]]):
        self.name = name
        self.values = list(values_dict[value]) if value in values_dict else [value]

    def expand(self, run_spec):
        return [
            _replace(run_spec, name=f"{run_spec['name']}{_sep(run_spec['name'])}{self.name}={_sanitize(v)}",
                     **{self.name: v})
            for v in self.values
        ]


_REPLACE_VALUE_DICTS: dict[str, dict[str, list[Any]]] = {
    "num_train_trials": {"1": [1], "2": [2], "3": [3], "4": [4], "5": [5]},
    "max_train_instances": {
        "zero": [0], "one": [1], "all": [0, 1, 2, 4, 8, 16],
        "big_bench_few_shot_setting": [0, 1, 2, 3], "vhelm": [0, 1, 2, 4, 8], "melt": [0, 1, 5],
    },
    "max_eval_instances": {"default": [1_000], "heim_default": [100], "heim_fid": [30_000], "heim_art_styles": [17]},
    "num_outputs": {"default": [1], "copyright_sweep": [1, 10]},
    "num_trials": {"heim_efficiency": [5]},
    "model_deployment": {},
}


class NumOutputTokensExpander(Expander):
    """`num_output_tokens=N`: name += `<sep>num_output_tokens=N`, sets adapter_spec.max_tokens."""

    name = "num_output_tokens"
    values_dict = {"default_sweep": [1, 2, 4, 8, 16, 32, 64]}

    def __init__(self, value: Any):
        self.values = list(self.values_dict[value]) if value in self.values_dict else [value]

    def expand(self, run_spec):
        return [
            _replace(run_spec, name=f"{run_spec['name']}{_sep(run_spec['name'])}{self.name}={v}", max_tokens=v)
            for v in self.values
        ]


class NumPromptTokensExpander(Expander):
    """ScenarioSpecRunExpander `num_prompt_tokens`: sets scenario_spec.args[...]."""

    name = "num_prompt_tokens"
    values_dict = {"default_sweep": [1, 256, 512, 1024, 1536]}

    def __init__(self, value: Any):
        self.values = list(self.values_dict[value]) if value in self.values_dict else [value]

    def expand(self, run_spec):
        out = []
        for v in self.values:
            rs = _replace(run_spec, name=f"{run_spec['name']}{_sep(run_spec['name'])}{self.name}={_sanitize(v)}")
            scenario = dict(rs.get("scenario_spec") or {})
            scenario["args"] = {**scenario.get("args", {}), self.name: v}
            rs["scenario_spec"] = scenario
            out.append(rs)
        return out


class ModelExpander(Expander):
    """ModelRunExpander."""

    name = "model"

    def __init__(self, value: Any, registry: ModelRegistry):
        self.value = value
        self.registry = registry

    def model_groups(self) -> dict[str, list[str]]:
        """`get_model_group_to_model_names`, over our registry's metadata."""
        r = self.registry
        groups: dict[str, list[str]] = {
            "full_functionality_text": r.model_names_with_tag(FULL_FUNCTIONALITY_TEXT_MODEL_TAG),
            "ai21/j1-jumbo": ["ai21/j1-jumbo"],
            "openai/curie": ["openai/curie"],
            "all": r.all_models(),
            "text_code": r.model_names_with_tag(TEXT_MODEL_TAG) + r.model_names_with_tag(CODE_MODEL_TAG),
            "text": r.model_names_with_tag(TEXT_MODEL_TAG),
            "code": r.model_names_with_tag(CODE_MODEL_TAG),
            "instruction_following": r.model_names_with_tag(INSTRUCTION_FOLLOWING_MODEL_TAG),
            "limited_functionality_text": r.model_names_with_tag(LIMITED_FUNCTIONALITY_TEXT_MODEL_TAG),
            "summarization_zs": ["openai/davinci", "openai/curie", "openai/text-davinci-002", "openai/text-curie-001"],
            "biomedical": ["openai/text-davinci-003"],
            "interactive_qa": ["openai/text-davinci-001", "openai/davinci", "ai21/j1-jumbo", "openai/text-babbage-001"],
            "opinions_qa_openai": ["openai/ada", "openai/davinci", "openai/text-ada-001", "openai/text-davinci-001",
                                   "openai/text-davinci-002", "openai/text-davinci-003"],
            "opinions_qa_ai21": ["ai21/j1-grande", "ai21/j1-jumbo", "ai21/j1-grande-v2-beta"],
            "text_to_image": r.model_names_with_tag(TEXT_TO_IMAGE_MODEL_TAG),
            "vlm": r.model_names_with_tag(VISION_LANGUAGE_MODEL_TAG),
            "audiolm": r.model_names_with_tag(AUDIO_LANGUAGE_MODEL_TAG),
        }
        ablation = set(r.model_names_with_tag(ABLATION_MODEL_TAG))
        ablation_groups = {"ablation_" + k: [m for m in v if m in ablation] for k, v in groups.items()}
        for k, v in ablation_groups.items():
            groups["ablation" if k == "ablation_all" else k] = v
        excluded = set(r.model_names_with_tag(DEPRECATED_MODEL_TAG)) | set(r.model_names_with_tag(UNSUPPORTED_MODEL_TAG))
        return {k: [m for m in v if m not in excluded] for k, v in groups.items()}

    def expand(self, run_spec):
        names = self.model_groups().get(self.value, [self.value]) if isinstance(self.value, str) else [self.value]
        out = []
        for value in names:
            parts = str(value).split("/")
            model_name = "/".join(parts[-2:])
            fields: dict[str, Any] = {"model": model_name}
            if len(parts) > 2:
                fields["model_deployment"] = str(value)
            name = f"{run_spec['name']}{_sep(run_spec['name'])}model={_sanitize(model_name)}"
            out.append(_replace(run_spec, name=name, **fields))
        return out


class EvalSplitExpander(Expander):
    name = "eval_split"

    def __init__(self, value: Any):
        if value != TEST_SPLIT and value != VALID_SPLIT:
            raise ValueError(f'Split must be "{TEST_SPLIT}" or "{VALID_SPLIT}", but got "{value}"')
        self.split = value

    def expand(self, run_spec):
        name = f"{run_spec['name']}{_sep(run_spec['name'])}eval_split={self.split}"
        return [_replace(run_spec, name=name, eval_splits=[self.split])]


class TemperatureExpander(Expander):
    """`temperature=x`: sets adapter_spec.temperature; the name does not change."""

    name = "temperature"

    def __init__(self, value: Any):
        self.value = value

    def expand(self, run_spec):
        return [_replace(run_spec, temperature=self.value)]


class IncreaseTemperatureExpander(Expander):
    name = "increase_temperature"

    def __init__(self, value: Any):
        self.value = value

    def expand(self, run_spec):
        return [_replace(run_spec, temperature=_adapter(run_spec)["temperature"] + self.value)]


class IncreaseMaxTokensExpander(Expander):
    name = "increase_max_tokens"

    def __init__(self, value: Any):
        self.value = value

    def expand(self, run_spec):
        return [_replace(run_spec, max_tokens=_adapter(run_spec)["max_tokens"] + self.value)]


class InstructionsExpander(Expander):
    name = "instructions"

    def __init__(self, value: Any):
        self.value = value

    def expand(self, run_spec):
        adapter = _adapter(run_spec)
        if self.value == "none":
            instructions = ""
        elif self.value == "expert":
            instructions = ("I am an expert AI assistant who is here to help you with the following. "
                            + adapter.get("instructions", ""))
        else:
            raise ValueError(f"Unknown value: {self.value}")
        return [_replace(run_spec, name=f"{run_spec['name']},{self.name}={self.value}", instructions=instructions)]


class PromptExpander(Expander):
    name = "prompt"
    _VALUES: dict[str, dict[str, Any]] = {
        "human_assistant": dict(input_prefix='Human: What is the answer to "', input_suffix='"?\n',
                                output_prefix='Assistant: The answer is "', output_suffix='".\n',
                                stop_sequences=['".']),
        "question_answer": dict(input_prefix="Question: ", output_prefix="Answer: "),
        "qa": dict(input_prefix="Q: ", output_prefix="A: "),
        "input_output_html": dict(input_prefix="<input>", input_suffix="</input>\n",
                                  output_prefix="<output>", output_suffix="</output>\n"),
        "input_output": dict(input_prefix="Input: ", output_prefix="Output: "),
        "i_o": dict(input_prefix="I: ", output_prefix="O: "),
    }

    def __init__(self, value: Any):
        self.value = value

    def expand(self, run_spec):
        if self.value not in self._VALUES:
            raise ValueError(f"Unknown value: {self.value}")
        fields = copy.deepcopy(self._VALUES[self.value])
        return [_replace(run_spec, name=f"{run_spec['name']},{self.name}={self.value}", **fields)]


class NewlineExpander(Expander):
    name = "newline"

    def __init__(self, value: Any):
        self.value = value

    def expand(self, run_spec):
        targets = {"semicolon": ";\n", "br": "<br>\n"}
        if self.value not in targets:
            raise ValueError(f"Unknown value: {self.value}")
        subs = [{"source": "\n", "target": targets[self.value]}]
        return [_replace(run_spec, name=f"{run_spec['name']},{self.name}={self.value}", substitutions=subs)]


class StopExpander(Expander):
    name = "stop"

    def __init__(self, value: Any):
        self.value = value

    def expand(self, run_spec):
        name = f"{run_spec['name']},{self.name}={self.value}"
        if self.value == "none":
            return [_replace(run_spec, name=name, stop_sequences=[])]
        stops = {"hash": "###", "semicolon": ";", "br": "<br>"}
        if self.value not in stops:
            raise ValueError(f"Unknown value: {self.value}")
        stop = stops[self.value]
        return [_replace(run_spec, name=name, instance_prefix=f"{stop}\n\n", stop_sequences=[stop])]


class AddToStopExpander(Expander):
    name = "add_to_stop"

    def __init__(self, value: Any):
        self.value = value

    def expand(self, run_spec):
        stop = "\n" if self.value == "newline" else self.value
        return [_replace(run_spec, stop_sequences=list(_adapter(run_spec).get("stop_sequences", [])) + [stop])]


class GlobalPrefixExpander(Expander):
    name = "global_prefix"

    def __init__(self, value: Any):
        self.value = value

    def expand(self, run_spec):
        if self.value != "nlg":
            raise ValueError(f"Unknown value: {self.value}")
        return [_replace(run_spec, name=f"{run_spec['name']},{self.name}={self.value}", global_prefix="[NLG]")]


class FormatPromptExpander(Expander):
    """`format_prompt=x`: HELM passes the value as `prefix` (input_prefix=x, output_prefix="")."""

    name = "format_prompt"

    def __init__(self, prefix: Any = "", suffix: Any = ""):
        self.prefix, self.suffix = prefix, suffix

    def expand(self, run_spec):
        return [_replace(run_spec, input_prefix=self.prefix, output_prefix=self.suffix)]


class FollowFormatInstructionsExpander(Expander):
    name = "follow_format_instructions"

    def __init__(self, value: Any, registry: ModelRegistry):
        if value != "all" and value != "instruct":
            raise ValueError("Value of add_follow_the_format_instructions run expander must be 'all' or 'instruct'")
        self.value = value
        self.registry = registry

    def expand(self, run_spec):
        adapter = _adapter(run_spec)
        if adapter.get("method") != ADAPT_GENERATION:
            raise ValueError("follow_format_instructions run expander only supports the generation adaptation method")
        if self.value == "instruct":
            metadata = self.registry.get_model_metadata(adapter.get("model"))
            if metadata is None:
                raise ValueError(f"No model metadata for model name: {adapter.get('model')}")
            if INSTRUCTION_FOLLOWING_MODEL_TAG not in metadata.tags:
                return [copy.deepcopy(run_spec)]
        return [_replace(
            run_spec,
            global_prefix=IN_CONTEXT_LEARNING_INSTRUCTIONS_PREFIX + "\n\n",
            global_suffix="\n\n" + IN_CONTEXT_LEARNING_INSTRUCTIONS_SUFFIX + "\n"
            + adapter.get("output_prefix", "").strip(),
        )]


_UNSUPPORTED_EXPANDERS = {"data_augmentation", "tokenizer", "output_format_instructions", "process_output", "chatml"}


def make_expander(key: str, value: Any, registry: ModelRegistry) -> Expander:
    """`RUN_EXPANDERS[key](value)`."""
    if key in _REPLACE_VALUE_DICTS:
        return ReplaceValueExpander(key, value, _REPLACE_VALUE_DICTS[key])
    simple: dict[str, Callable[[Any], Expander]] = {
        "num_output_tokens": NumOutputTokensExpander,
        "num_prompt_tokens": NumPromptTokensExpander,
        "eval_split": EvalSplitExpander,
        "temperature": TemperatureExpander,
        "increase_temperature": IncreaseTemperatureExpander,
        "increase_max_tokens": IncreaseMaxTokensExpander,
        "instructions": InstructionsExpander,
        "prompt": PromptExpander,
        "newline": NewlineExpander,
        "stop": StopExpander,
        "add_to_stop": AddToStopExpander,
        "global_prefix": GlobalPrefixExpander,
        "format_prompt": FormatPromptExpander,
    }
    if key in simple:
        return simple[key](value)
    if key == "model":
        return ModelExpander(value, registry)
    if key == "follow_format_instructions":
        return FollowFormatInstructionsExpander(value, registry)
    if key in _UNSUPPORTED_EXPANDERS:
        raise MedhelmError(f"HELM run expander {key!r} is not supported by medhelm")
    raise MedhelmError(f"unknown run expander {key!r}")


# --------------------------------------------------------------------------------------------
# alter_run_spec: model-dependent changes (run_spec_factory.py)
# --------------------------------------------------------------------------------------------


def _chatml(run_spec: RunSpecDict) -> RunSpecDict:
    adapter = _adapter(run_spec)
    scenario_name = run_spec["name"].split(":")[0]
    output_prefix = adapter.get("output_prefix", "")
    if scenario_name in ("msmarco",):
        lines = output_prefix.split("\n")
        new_output_prefix = lines[0] + "<|im_end|>\n<|im_start|>assistant\n" + lines[1]
    elif scenario_name in ("summarization_cnndm", "summarization_xsum"):
        new_output_prefix = output_prefix + "<|im_end|>\n<|im_start|>assistant\n"
    else:
        new_output_prefix = "<|im_end|>\n<|im_start|>assistant\n" + output_prefix
    instructions = adapter.get("instructions", "")
    return _replace(
        run_spec,
        instructions=(f"<|im_start|>system\n{instructions}<|im_end|>\n<|im_start|>user\n"
                      if instructions != "" else "<|im_start|>user\n"),
        instance_prefix="",
        output_prefix=new_output_prefix,
        output_suffix="<|im_end|>\n<|im_start|>user\n",
        stop_sequences=list(adapter.get("stop_sequences", [])) + ["<|im_end|>"],
    )


def alter_run_spec(run_spec: RunSpecDict, registry: ModelRegistry) -> RunSpecDict:
    adapter = _adapter(run_spec)
    model, deployment_name = adapter.get("model"), adapter.get("model_deployment")
    if not model and not deployment_name:
        raise MedhelmError("At least one of model_deployment and model must be specified")
    if not model:
        model = registry.get_deployment(deployment_name).model_name or deployment_name
        run_spec = _replace(run_spec, model=model)
    elif not deployment_name:
        deployment_name = registry.default_deployment_for_model(model)
        if not deployment_name:
            searched = ", ".join(registry.deployment_files) or "no model_deployments.yaml"
            raise MedhelmError(
                f"Unknown model or no default model deployment found for model {model!r} (searched: {searched})"
            )
        run_spec = _replace(run_spec, model_deployment=deployment_name)

    metadata = registry.get_model_metadata(model)
    tags = metadata.tags if metadata is not None else [TEXT_MODEL_TAG, FULL_FUNCTIONALITY_TEXT_MODEL_TAG]
    deployment = registry.get_deployment(deployment_name)
    if model != deployment.model_name:
        raise MedhelmError(
            f"Invalid RunSpec: selected model deployment '{deployment_name}' for model '{model}' "
            f"but the model deployment is for a different model '{deployment.model_name}'"
        )
    method = _adapter(run_spec).get("method")
    if NO_NEWLINES_TAG in tags and method in (ADAPT_GENERATION, ADAPT_MULTIPLE_CHOICE_JOINT):
        run_spec = StopExpander("hash").expand(run_spec)[0]
    if NLG_PREFIX_TAG in tags:
        run_spec = GlobalPrefixExpander("nlg").expand(run_spec)[0]
    if CHATML_MODEL_TAG in tags:
        run_spec = _chatml(run_spec)
    if ANTHROPIC_CLAUDE_1_MODEL_TAG in tags or ANTHROPIC_CLAUDE_2_MODEL_TAG in tags:
        a = _adapter(run_spec)
        run_spec = _replace(
            run_spec,
            global_prefix=_HUMAN_PROMPT + " " + IN_CONTEXT_LEARNING_INSTRUCTIONS_PREFIX + "\n\n",
            global_suffix="\n\n" + IN_CONTEXT_LEARNING_INSTRUCTIONS_SUFFIX + _AI_PROMPT + " "
            + a.get("output_prefix", "").strip(),
        )
    if ANTHROPIC_CLAUDE_3_MODEL_TAG in tags:
        stops = [s for s in _adapter(run_spec).get("stop_sequences", []) if s.strip()]
        run_spec = _replace(run_spec, stop_sequences=stops)
    if (VISION_LANGUAGE_MODEL_TAG in tags and GOOGLE_GEMINI_PRO_VISION_V1_TAG in tags
            and _adapter(run_spec).get("max_tokens") == 1):
        run_spec = IncreaseMaxTokensExpander(1).expand(run_spec)[0]
    if IDEFICS_MODEL_TAG in tags and IDEFICS_INSTRUCT_MODEL_TAG in tags:
        run_spec = _replace(run_spec, input_prefix="User: ", input_suffix="<end_of_utterance>",
                            output_prefix="\nAssistant: ", output_suffix="<end_of_utterance>",
                            stop_sequences=["<end_of_utterance>"])
    if LLAVA_MODEL_TAG in tags:
        run_spec = _replace(run_spec, input_prefix="USER: <image>", input_suffix="",
                            output_prefix="\nASSISTANT: ", output_suffix="")
    if OPEN_FLAMINGO_MODEL_TAG in tags:
        run_spec = _replace(run_spec, input_prefix="<|endofchunk|>" + _adapter(run_spec).get("input_prefix", ""))
    if BUGGY_TEMP_0_TAG in tags and _adapter(run_spec).get("temperature") == 0:
        run_spec = IncreaseTemperatureExpander(1e-4).expand(run_spec)[0]
    if _adapter(run_spec).get("model") == "google/medlm-large":
        run_spec = StopExpander("none").expand(run_spec)[0]
    return run_spec


# --------------------------------------------------------------------------------------------
# construct_run_specs / run_entries_to_run_specs
# --------------------------------------------------------------------------------------------



def _call_run_spec_function(fn: Callable[..., dict], name: str, args: dict[str, Any]) -> RunSpecDict:
    try:
        inspect.signature(fn).bind(**args)
    except TypeError as exc:
        raise MedhelmError(f"run-spec function {name!r} cannot take arguments {sorted(args)}: {exc}") from None
    except ValueError:  # no signature available (builtins): let the call decide
        pass
    result = fn(**args)
    if not isinstance(result, dict) or not isinstance(result.get("name"), str):
        raise MedhelmError(f"run-spec function {name!r} did not return a RunSpec dict with a 'name'")
    result = copy.deepcopy(result)
    result["name"] = result["name"].replace("/", "_")
    result.setdefault("adapter_spec", {})
    result.setdefault("groups", [])
    return result


def construct_run_specs(name: str, args: dict[str, Any], registry: ModelRegistry,
                        run_spec_functions: Mapping[str, Callable[..., dict]]) -> list[RunSpecDict]:
    """`run_spec_factory.construct_run_specs` for a parsed description."""
    fn = run_spec_functions.get(name)
    if fn is None:
        why = getattr(run_spec_functions, "why_missing", lambda _: None)(name)
        raise MedhelmError(f"Unknown run spec name: {name!r}" + (f" ({why})" if why else ""))
    expander_args, function_args = split_expander_args(args)
    try:
        expanders = [make_expander(k, v, registry) for k, v in expander_args]
    except (ValueError, TypeError) as exc:
        raise MedhelmError(f"bad run expander argument: {exc}") from None
    if not any(isinstance(e, ModelExpander) for e in expanders):
        expanders.append(ModelExpander("all", registry))

    run_specs = [_call_run_spec_function(fn, name, function_args)]
    for expander in expanders:
        try:
            run_specs = [child for parent in run_specs for child in expander.expand(parent)]
        except (ValueError, TypeError, KeyError) as exc:
            raise MedhelmError(f"run expander {expander.name!r}: {type(exc).__name__}: {exc}") from None
    return [alter_run_spec(rs, registry) for rs in run_specs]


def _with_location(exc: MedhelmError, entry: RunEntry) -> MedhelmError:
    message = str(exc)
    loc = entry.location
    if message.startswith(loc):
        return exc
    if entry.source is None or entry.line is None:  # the location names the description already
        return MedhelmError(f"{loc}: {message}")
    return MedhelmError(f"{loc}: {message} (description {entry.description!r})")


def run_entries_to_run_specs(
    entries: Sequence[RunEntry],
    max_eval_instances: Optional[int] = None,
    num_train_trials: Optional[int] = None,
    models_to_run: Optional[Sequence[str]] = None,
    priority: Optional[int] = None,
    groups_to_run: Optional[Sequence[str]] = None,
    registry: Optional[ModelRegistry] = None,
    *,
    run_spec_functions: Mapping[str, Callable[..., dict]],
) -> list[ExpandedRun]:
    """HELM's `run_entries_to_run_specs`; returns (entry, RunSpec dict) in helm-run order.

    `registry` defaults to the built-in configs plus `./prod_env` (helm-run's default
    `--local-path`); `run_spec_functions` are the benchmarks' (a `medhelm_core.catalog.Catalog`'s:
    the catalog sits above this module, so the caller hands them in).
    Run specs are neither sorted nor de-duplicated (HELM's Runner runs them in this order, and a
    repeated name simply writes the same run directory again).
    """
    if registry is None:
        registry = load_model_registry(DEFAULT_LOCAL_PATH)
    functions = run_spec_functions
    models = list(models_to_run) if models_to_run else None
    out: list[ExpandedRun] = []
    for entry in entries:
        if priority is not None and entry.priority is not None and entry.priority > priority:
            continue
        try:
            parsed = parse_description(entry.description)
            if models and "/" not in str(parsed.args.get("model", "")):
                variants = [{**parsed.args, "model": m} for m in models]
            else:
                variants = [parsed.args]
            run_specs = [rs for args in variants
                         for rs in construct_run_specs(parsed.name, args, registry, functions)]
        except MedhelmError as exc:
            raise _with_location(exc, entry) from None

        for rs in run_specs:
            adapter = rs["adapter_spec"]
            if models and adapter.get("model") not in models and adapter.get("model_deployment") not in models:
                continue
            if groups_to_run and not any(g in groups_to_run for g in rs.get("groups", [])):
                continue
            if max_eval_instances is not None and adapter.get("max_eval_instances") is None:
                adapter["max_eval_instances"] = max_eval_instances
            if adapter.get("max_train_instances") == 0:
                adapter["num_train_trials"] = 1
            elif num_train_trials is not None:
                adapter["num_train_trials"] = num_train_trials
            if entry.groups is not None:
                suffix = "" if len(entry.groups) == 0 else f",groups={'-'.join(sorted(entry.groups))}"
                rs["name"] = (rs["name"] + suffix).replace("/", "_")
                rs["groups"] = list(rs.get("groups", [])) + list(entry.groups)
            out.append(ExpandedRun(entry, rs))
    return out


def check_models_to_run(entries: Sequence[RunEntry], models_to_run: Optional[Sequence[str]],
                        registry: ModelRegistry) -> None:
    """helm_run's checks on `--models-to-run` before expansion (run.py)."""
    if models_to_run:
        known = set(registry.all_models())
        for model in models_to_run:
            if model not in known and model not in registry.deployments:
                raise MedhelmError(f"Unknown model '{model}' passed to --models-to-run")
        return
    for entry in entries:
        if _MODEL_WILDCARD.search(entry.description):
            raise MedhelmError(
                f"{entry.location}: --models-to-run must be set (because the `model=` run expander "
                "expands to multiple models)"
            )
    if entries and not any(_MODEL_ARG.search(e.description) for e in entries):
        raise MedhelmError("--models-to-run must be set (because the `model=` run expander is omitted)")


def expand_confs(
    conf_paths: Iterable[str | Path] = (),
    max_eval_instances: Optional[int] = None,
    num_train_trials: Optional[int] = None,
    models_to_run: Optional[Sequence[str]] = None,
    priority: Optional[int] = None,
    groups_to_run: Optional[Sequence[str]] = None,
    run_entries: Sequence[str] = (),
    local_path: str | Path | None = DEFAULT_LOCAL_PATH,
    registry: Optional[ModelRegistry] = None,
    *,
    run_spec_functions: Mapping[str, Callable[..., dict]],
) -> list[ExpandedRun]:
    """helm-run up to the run specs: `-c conf_paths`, `-r run_entries` (priority 1), checks, expansion."""
    entries = read_run_entries(conf_paths)
    entries.extend(RunEntry(description=d, priority=1, groups=None) for d in run_entries)
    if registry is None:
        registry = load_model_registry(local_path)
    check_models_to_run(entries, models_to_run, registry)
    return run_entries_to_run_specs(
        entries, max_eval_instances=max_eval_instances, num_train_trials=num_train_trials,
        models_to_run=models_to_run, priority=priority, groups_to_run=groups_to_run,
        registry=registry, run_spec_functions=run_spec_functions,
    )


def dry_run_names(conf_paths: Iterable[str | Path] = (), **kwargs: Any) -> list[str]:
    """Run directory names helm-run would create, in its order (same arguments as `expand_confs`)."""
    return [run.name for run in expand_confs(conf_paths, **kwargs)]
