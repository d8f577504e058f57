"""`health_admin_bench` (medhelm 0.8.0 `get_health_admin_bench_spec`): one request per task, sent to the
`hab/harness` deployment, whose client runs a Playwright episode; the judge is the first judge of
judges.yaml unless the entry names one. The agent's knobs travel as JSON in `instructions`."""
from __future__ import annotations

import json
from typing import Any

from medhelm_core.catalog import Benchmark
from medhelm_core.errors import MedhelmError
from medhelm_core.helm_types import adapter_spec, metric_spec, run_spec as make_run_spec, scenario_spec
from medhelm_core.jury.judges import annotator_models_from_config
from medhelm_core.runspecs.metric_bundles import basic_metric_specs


def _judge_knobs(jury_config_path: str | None, judge_model: str, judge_model_deployment: str) -> dict[str, str]:
    if not judge_model or not judge_model_deployment:
        first = next(iter(annotator_models_from_config(jury_config_path, entry="health_admin_bench").values()))
        judge_model = judge_model or first["model_name"]
        judge_model_deployment = judge_model_deployment or first["model_deployment"]
    knobs = {"judge_model": judge_model, "judge_model_deployment": judge_model_deployment}
    if jury_config_path:
        knobs["jury_config_path"] = jury_config_path
    return knobs


def run_spec(bench: Benchmark, **args: Any) -> dict[str, Any]:
    text = bench.text["run_spec"]
    unknown = sorted(set(args) - set(text["defaults"]))
    if unknown:
        raise MedhelmError(f"health_admin_bench: unknown argument {unknown[0]!r}")
    a = {**text["defaults"], **args}
    sargs = {"task_set": a["task_set"], "difficulty": a["difficulty"], "version": a["version"]}
    if a["hab_root"]:
        sargs["hab_root"] = a["hab_root"]
    if a["task_ids"]:
        sargs["task_ids"] = a["task_ids"]
    knobs: dict[str, Any] = {k: a[k] for k in ("prompt_mode", "observation_mode", "action_space", "env_base_url",
                                               "hab_root")}
    knobs.update(_judge_knobs(a["jury_config_path"], a["judge_model"], a["judge_model_deployment"]))
    if a["max_steps"]:
        knobs["max_steps"] = int(a["max_steps"])
    if str(a["is_gui"]).strip().lower() in ("1", "true", "yes", "on"):
        knobs["is_gui"] = True
    adapter = adapter_spec(method=text["adapter_method"], instructions=json.dumps(knobs), input_prefix="",
                           input_suffix="", output_prefix="", output_suffix="", instance_prefix="",
                           max_train_instances=0, num_outputs=1, max_tokens=1, temperature=0.0, stop_sequences=[])
    return make_run_spec(name=text["name"], scenario=scenario_spec(text["scenario_class"], sargs), adapter=adapter,
                         metric_specs=[metric_spec(text["metric_class"], {})] + basic_metric_specs([]),
                         groups=text["groups"])
