"""Instances → requests, as HELM's runner and in-context-learning adapters do.

* `assign_instance_ids` / `downsample_eval_instances`: `scenario.with_instance_ids` and
  `runner.downsample_eval_instances` (seed-0 legacy-NumPy permutation over valid+test).
* `render_prompt`: the generation and multiple_choice_joint prompt layouts, byte for byte.
* `chat_request`: HELM's ChatAdapter (`method: chat`): the instance's `input.messages` sent as the
  request's `messages`, with an empty prompt (no instructions, prefixes or in-context examples).
* `build_request_states`: one RequestState dict per (train trial, eval instance), in HELM's order.
"""
from __future__ import annotations

import random
import re
from collections import defaultdict
from itertools import cycle
from typing import Any, Callable

import numpy as np

from medhelm_core.helm_types import (
    ADAPT_CHAT,
    ADAPT_GENERATION,
    ADAPT_MULTIPLE_CHOICE_JOINT,
    CORRECT_TAG,
    EVAL_SPLITS,
    TRAIN_SPLIT,
)
from medhelm_core.errors import MedhelmError


def assign_instance_ids(instances: list[dict]) -> list[dict]:
    """If any instance lacks an id, every instance becomes `id<position>` (train and eval alike)."""
    if all(inst.get("id") is not None for inst in instances):
        return instances
    out = []
    for i, inst in enumerate(instances):
        new = {k: v for k, v in inst.items() if k != "id"}
        # Keep HELM's field order: input, references, split, sub_split, id, ...
        ordered: dict[str, Any] = {}
        for key in ("input", "references", "split", "sub_split"):
            if key in new:
                ordered[key] = new.pop(key)
        ordered["id"] = f"id{i}"
        ordered.update(new)
        out.append(ordered)
    return out


def downsample_eval_instances(instances: list[dict], max_eval_instances: int | None,
                              eval_splits: list[str] | None) -> list[dict]:
    """Train instances are all kept; eval instances are sampled with HELM's seed-0 draw."""
    if max_eval_instances is None:
        return instances
    splits = eval_splits or list(EVAL_SPLITS)
    train = [i for i in instances if i["split"] == TRAIN_SPLIT]
    evals = [i for i in instances if i["split"] in splits]
    if len(evals) > max_eval_instances:
        # np.random.seed(0); np.random.choice(evals, n, replace=False) == permutation prefix.
        order = np.random.RandomState(0).permutation(len(evals))[:max_eval_instances]
        evals = [evals[int(k)] for k in order]
    return train + evals


def first_correct_reference(inst: dict) -> dict | None:
    for ref in inst.get("references", []):
        if CORRECT_TAG in ref.get("tags", []):
            return ref
    return None


def sample_train_examples(train: list[dict], seed: int, max_train_instances: int,
                          sample_train: bool = True) -> list[dict]:
    """HELM's class-balanced in-context example sampling (`sample_examples`)."""
    rng = random.Random(seed)
    n = min(len(train), max_train_instances)
    if not sample_train:
        return train[n * seed: n * (seed + 1)]
    unlabeled: list[dict] = []
    by_label: dict[str, list[dict]] = defaultdict(list)
    for inst in train:
        ref = first_correct_reference(inst)
        if ref:
            by_label[ref["output"]["text"]].append(inst)
        else:
            unlabeled.append(inst)
    by_count: dict[int, list[str]] = defaultdict(list)
    for label, members in sorted(by_label.items()):
        by_count[len(members)].append(label)
    ordered_labels: list[str] = []
    for count in sorted(by_count, reverse=True):
        labels = by_count[count]
        rng.shuffle(labels)
        ordered_labels.extend(labels)
    examples: list[dict] = []
    labels_cycle = cycle(ordered_labels)
    while n > 0:
        label = next(labels_cycle, None)
        if not label:
            break
        pool = by_label[label]
        if not pool:
            continue
        examples.append(pool.pop(rng.randrange(len(pool))))
        n -= 1
    examples += rng.sample(unlabeled, n)
    return examples


def _letter_prefix(reference_prefix: str, index: int, characters: list[str] | None) -> str:
    """'A. ' -> 'B. ' for index 1: the first alphanumeric character is replaced."""
    letter = characters[index] if characters else chr(ord("A") + index)
    for i, ch in enumerate(reference_prefix):
        if ch.isalnum():
            return reference_prefix[:i] + letter + reference_prefix[i + 1:]
    return reference_prefix


def _example_block(spec: dict, inst: dict, include_output: bool) -> str:
    text = inst["input"].get("text") or ""
    if spec["method"] == ADAPT_GENERATION:
        block = spec["input_prefix"] + text + spec["input_suffix"]
        if include_output:
            ref = first_correct_reference(inst)
            gold = ref["output"]["text"] if ref else "n/a"
            return block + spec["output_prefix"] + gold + spec["output_suffix"]
        return block + spec["output_prefix"].rstrip()
    if spec["method"] == ADAPT_MULTIPLE_CHOICE_JOINT:
        block = spec["input_prefix"] + text + spec["input_suffix"]
        chars = spec.get("reference_prefix_characters")
        correct_letters = []
        for i, ref in enumerate(inst["references"]):
            prefix = _letter_prefix(spec["reference_prefix"], i, chars)
            block += prefix + ref["output"]["text"] + spec["reference_suffix"]
            if CORRECT_TAG in ref.get("tags", []):
                correct_letters.append(prefix.strip()[:1] if not chars else chars[i])
        if include_output:
            if spec.get("multi_label"):
                gold = ", ".join(correct_letters) or "n/a"
            else:
                gold = correct_letters[0] if correct_letters else "n/a"
            return block + spec["output_prefix"] + gold + spec["output_suffix"]
        return block + spec["output_prefix"].rstrip()
    raise MedhelmError(f"adaptation method {spec['method']!r} is not supported")


def render_prompt(spec: dict, train_examples: list[dict], eval_instance: dict) -> str:
    blocks = [spec["instructions"]] if spec["instructions"] else []
    blocks += [_example_block(spec, t, include_output=True) for t in train_examples]
    blocks.append(_example_block(spec, eval_instance, include_output=False))
    text = spec["instance_prefix"].join(blocks)
    if spec["global_prefix"]:
        text = spec["global_prefix"] + text
    if spec["global_suffix"]:
        text = text + spec["global_suffix"]
    for sub in spec.get("substitutions") or []:
        text = re.sub(sub["source"], sub["target"], text)
    return text


def output_mapping(spec: dict, inst: dict) -> dict[str, str]:
    chars = spec.get("reference_prefix_characters")
    mapping = {}
    for i, ref in enumerate(inst["references"]):
        letter = chars[i] if chars else chr(ord("A") + i)
        mapping[letter] = ref["output"]["text"]
    return mapping


def make_request(spec: dict, prompt: str) -> dict:
    """HELM's Request in its JSON shape (None fields omitted)."""
    mc = spec["method"] == ADAPT_MULTIPLE_CHOICE_JOINT
    request: dict[str, Any] = {
        "model_deployment": spec["model_deployment"],
        "model": spec["model"],
        "embedding": False,
        "prompt": prompt,
        "temperature": spec["temperature"],
        "num_completions": 1 if mc else spec["num_outputs"],
        "top_k_per_token": spec["num_outputs"] if mc else 1,
        "max_tokens": spec["max_tokens"],
        "stop_sequences": [] if mc else list(spec["stop_sequences"]),
        "echo_prompt": False,
        "top_p": 1,
        "presence_penalty": 0,
        "frequency_penalty": 0,
    }
    if spec.get("random") is not None:
        request["random"] = spec["random"]
    return request


def chat_request(spec: dict, inst: dict) -> dict:
    """HELM's ChatAdapter request: `Request(model, model_deployment, messages=input.messages,
    num_completions, temperature, max_tokens, stop_sequences, random, image_generation_parameters)`,
    so `prompt` keeps its default "" and `messages` comes last of the fields it sets (HELM's field
    order). The adapter spec's instructions and prefixes are not used; HELM refuses an instance
    without messages."""
    messages = (inst.get("input") or {}).get("messages")
    if messages is None:
        raise MedhelmError(f"instance {inst.get('id')!r}: ChatAdapter requires input.messages of instances "
                           "to be non-empty")
    request = make_request(spec, "")  # the generation fields, in HELM's order (random included)
    request["messages"] = messages
    if spec.get("image_generation_parameters") is not None:
        request["image_generation_parameters"] = spec["image_generation_parameters"]
    return request


PromptFitter = Callable[[str, int], tuple[str, bool]]


def build_request_states(spec: dict, instances: list[dict],
                         fit_prompt: PromptFitter | None = None) -> list[dict]:
    """Request states for the (already sampled) instances, in HELM's adapter order.

    `fit_prompt(prompt, max_tokens) -> (prompt, truncated)` is the deployment's context-window
    fitting (HELM's `truncate_from_right`); None means the prompt always fits. A chat request
    (ADAPT_CHAT) is never fitted: HELM's ChatAdapter neither uses the in-context examples it is
    given nor truncates.
    """
    if spec["method"] not in (ADAPT_GENERATION, ADAPT_MULTIPLE_CHOICE_JOINT, ADAPT_CHAT):
        raise MedhelmError(f"adaptation method {spec['method']!r} is not supported")
    train = [i for i in instances if i["split"] == TRAIN_SPLIT]
    evals = [i for i in instances if i["split"] in EVAL_SPLITS]
    states: list[dict] = []
    for trial in range(spec["num_train_trials"]):
        examples = sample_train_examples(list(train), trial, spec["max_train_instances"],
                                         spec.get("sample_train", True))
        for inst in evals:
            if spec["method"] == ADAPT_CHAT:
                states.append({"instance": inst, "train_trial_index": trial, "request": chat_request(spec, inst),
                               "num_train_instances": 0, "prompt_truncated": False, "num_conditioning_tokens": 0})
                continue
            # Drop in-context examples from the end until the prompt fits (HELM's _make_prompt_fit).
            shots = list(examples)
            prompt = render_prompt(spec, shots, inst)
            truncated = False
            if fit_prompt is not None:
                while shots:
                    fitted, cut = fit_prompt(prompt, spec["max_tokens"])
                    if not cut:
                        break
                    shots.pop()
                    prompt = render_prompt(spec, shots, inst)
                prompt, truncated = fit_prompt(prompt, spec["max_tokens"])
            state: dict[str, Any] = {"instance": inst, "train_trial_index": trial}
            if spec["method"] == ADAPT_MULTIPLE_CHOICE_JOINT:
                state["output_mapping"] = output_mapping(spec, inst)
            state["request"] = make_request(spec, prompt)
            state["num_train_instances"] = len(shots)
            state["prompt_truncated"] = truncated
            state["num_conditioning_tokens"] = 0
            states.append(state)
    return states
