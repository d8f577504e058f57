"""Recorded benchmark sizes: what `--estimate-cost` counts when a benchmark's data is not on this machine.

Each benchmark folder may hold `size.yaml`, measured from the real data by
`scripts/record_benchmark_sizes.py` (a test measures again and compares):

    reference_deployment: openai/gpt-4o-2024-05-13   # whose prompt fitting and tokenizer counted
    tokenizer: openai/o200k_base
    sizes:
      - args: {subset: icliniq}        # the scenario arguments this record is for ({}: any)
        eval_instances: 1000           # instances in the eval splits, before --max-eval-instances
        mean_prompt_tokens: 312.5      # per model request
        judge_calls_per_instance: 1    # per judge (HealthBench asks each judge several questions)
        mean_judge_prompt_tokens: 640.2   # per judge call, the model's answer left out

An estimate from a record is marked approximate (`~`): the instances sampled and their prompts are
the real ones only on average, and counted by the reference tokenizer.
"""
from __future__ import annotations

import statistics
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from medhelm_core import adapt, jury
from medhelm_core.errors import MedhelmError
from medhelm_core.run.requests import prompt_fitter
from medhelm_core.yamlio import safe_load

SIZE_FILE = "size.yaml"
REFERENCE_DEPLOYMENT = "openai/gpt-4o-2024-05-13"


@dataclass(frozen=True)
class RecordedSize:
    source: Path
    eval_instances: int
    mean_prompt_tokens: float
    judge_calls_per_instance: float | None = None
    mean_judge_prompt_tokens: float | None = None


def recorded_size(catalog, scenario_spec: dict) -> RecordedSize | None:
    """The record of the benchmark folder building this scenario spec whose `args` all equal the
    spec's, or None (no folder, no size.yaml, no matching record)."""
    bench = catalog.benchmark_of_scenario(scenario_spec["class_name"])
    if bench is None:
        return None
    path = bench.folder / SIZE_FILE
    if not path.is_file():
        return None
    try:
        doc = safe_load(path.read_text(encoding="utf-8")) or {}
    except yaml.YAMLError as e:
        raise MedhelmError(f"{path}: invalid YAML ({getattr(e, 'problem', e)})") from None
    args = scenario_spec.get("args") or {}
    for i, rec in enumerate(doc.get("sizes") or []):
        if all(args.get(k) == v for k, v in (rec.get("args") or {}).items()):
            try:
                return RecordedSize(path, int(rec["eval_instances"]), float(rec["mean_prompt_tokens"]),
                                    _optional(rec.get("judge_calls_per_instance")),
                                    _optional(rec.get("mean_judge_prompt_tokens")))
            except (KeyError, TypeError, ValueError) as e:
                raise MedhelmError(f"{path}: sizes.{i}: missing or invalid {e}") from None
    return None


def _optional(value: Any) -> float | None:
    return None if value is None else float(value)


def measure_size(ws, spec: dict) -> dict[str, Any]:
    """One record of `size.yaml` for a run spec, measured on its data (all eval instances) with the
    reference deployment's prompt fitting and tokenizer; the judges' prompts are built around a
    one-character answer, whose tokens are taken out."""
    adapter = {**spec["adapter_spec"], "model_deployment": REFERENCE_DEPLOYMENT, "max_eval_instances": None}
    sspec = spec["scenario_spec"]
    instances = adapt.assign_instance_ids(ws.catalog.scenario(sspec["class_name"]).load(sspec["args"]))
    sampled = adapt.downsample_eval_instances(instances, None, adapter.get("eval_splits"))
    states = adapt.build_request_states(adapter, sampled, prompt_fitter(ws, REFERENCE_DEPLOYMENT))
    tokenizer = ws.tokenizer(ws.deployment(REFERENCE_DEPLOYMENT).tokenizer_name)
    record: dict[str, Any] = {
        "args": {k: v for k, v in sorted((sspec.get("args") or {}).items()) if not _is_path_arg(k)},
        "eval_instances": len(sampled),
        "mean_prompt_tokens": _mean(tokenizer.count(_sent_text(st["request"])) for st in states),
    }
    answer_tokens = tokenizer.count("x")
    for aspec in spec.get("annotators") or []:
        j = ws.catalog.annotator(aspec, spec["name"])
        if not getattr(j, "judges", None):
            continue
        prompts: list[int] = []
        for st in states:
            calls = jury.judge_calls(j, {**st, "result": {"completions": [{"text": "x"}]}})
            first_judge = next(iter(calls.values())) if calls else []
            prompts += [tokenizer.count(c.prompt) - answer_tokens for c in first_judge]
        if states:
            record["judge_calls_per_instance"] = round(len(prompts) / len(states), 3)
            record["mean_judge_prompt_tokens"] = _mean(prompts)
        break  # MedHELM runs carry one jury
    return record


def _is_path_arg(name: str) -> bool:
    return name.endswith("_path") or name in ("data_path", "data_dir")


def _sent_text(request: dict) -> str:
    """What a request sends: its prompt, or its chat messages' contents."""
    if request.get("messages") is None:
        return request["prompt"]
    return "\n".join(str(m.get("content", "")) for m in request["messages"])


def _mean(values) -> float:
    values = list(values)
    return round(statistics.fmean(values), 1) if values else 0.0
