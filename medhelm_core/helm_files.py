"""HELM's per-run files, written from our tables: what `helm-run` and `helm-summarize` write into
`benchmark_output/runs/<suite>/<run_name>/`, in HELM's JSON shapes (indent=2, None omitted), so
HELM's own tools read our runs and ours can be diffed against HELM's.
"""
from __future__ import annotations

import json
import os
import threading
from pathlib import Path
from typing import Any, Iterable

from medhelm_core.helm_types import drop_nones


def dump(obj: Any) -> str:
    return json.dumps(drop_nones(obj), indent=2, ensure_ascii=False)


def write_json(path: Path, obj: Any) -> None:
    """Write atomically: a reader never sees half a file, and two writers of one file (processes
    sharing an output path and a store) never write into each other's temporary file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f"{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    tmp.write_text(dump(obj), encoding="utf-8")
    os.replace(tmp, path)


def run_dir(output_path: str | Path, suite: str, run_name: str) -> Path:
    return Path(output_path) / "runs" / suite / run_name


def write_run_files(directory: Path, run_spec: dict, scenario: dict, request_states: list[dict],
                    annotator_specs: list[dict], stats: list[dict], per_instance_stats: list[dict]) -> None:
    """`helm-run`'s five files (runner.py writes them at the very end of a run)."""
    write_json(directory / "run_spec.json", run_spec)
    write_json(directory / "scenario.json", scenario)
    write_json(directory / "scenario_state.json", {
        "adapter_spec": run_spec["adapter_spec"],
        "request_states": request_states,
        "annotator_specs": annotator_specs,
    })
    write_json(directory / "stats.json", stats)
    write_json(directory / "per_instance_stats.json", per_instance_stats)


def display_metric_names(groups: Iterable[str], schema: dict) -> set[str]:
    """Metric names the frontend shows for a run: its groups' metric groups, `${main_name}` resolved."""
    metric_groups = {mg["name"]: mg for mg in schema.get("metric_groups", [])}
    run_groups = {rg["name"]: rg for rg in schema.get("run_groups", [])}
    names: set[str] = set()
    for group in groups:
        rg = run_groups.get(group)
        if rg is None:
            continue
        env = rg.get("environment") or {}
        for mg_name in rg.get("metric_groups") or []:
            mg = metric_groups.get(mg_name)
            if mg is None:
                continue
            for matcher in mg.get("metrics") or []:
                pert = matcher.get("perturbation_name")
                if pert and pert != "__all__":
                    continue
                name = matcher["name"]
                for key, value in env.items():
                    name = name.replace("${" + key + "}", str(value))
                names.add(name)
    return names


def _display_id(instance_id):
    """helm-summarize loads scenario_state.json into typed dataclasses, so an int id (MedCalc-Bench's
    `Row Number`) becomes a str in instances.json / display_*.json (per_instance_stats.json keeps it)."""
    return instance_id if instance_id is None or isinstance(instance_id, str) else str(instance_id)


def write_display_files(directory: Path, run_spec: dict, request_states: list[dict],
                        per_instance_stats: list[dict], schema: dict) -> None:
    """`helm-summarize`'s instances.json, display_predictions.json, display_requests.json."""
    wanted = display_metric_names(run_spec.get("groups", []), schema)
    stats_by_trial: dict[tuple, dict[str, float]] = {}
    for entry in per_instance_stats:
        key = (_display_id(entry["instance_id"]), json.dumps(entry.get("perturbation"), sort_keys=True),
               entry["train_trial_index"])
        values = stats_by_trial.setdefault(key, {})
        for stat in entry["stats"]:
            if stat["name"]["name"] in wanted and stat.get("mean") is not None:
                values[stat["name"]["name"]] = stat["mean"]
    pattern = run_spec["adapter_spec"].get("output_mapping_pattern")
    instances: dict[tuple, dict] = {}
    predictions, requests = [], []
    for state in request_states:
        result = state.get("result")
        if result is None:
            continue
        inst = state["instance"]
        if inst.get("id") is not None and not isinstance(inst["id"], str):
            inst = {**inst, "id": _display_id(inst["id"])}  # HELM reads ids back as str (medcalc's ints)
        pert = json.dumps(inst.get("perturbation"), sort_keys=True)
        completions = result.get("completions") or []
        predicted = completions[0]["text"] if completions else ""
        mapped = None
        if state.get("output_mapping") is not None:
            to_map = predicted.strip()
            if pattern:
                import re

                m = re.search(pattern, to_map)
                to_map = "" if not m else (m.group(1) if m.groups() else m.group(0))
            mapped = state["output_mapping"].get(to_map)
        instances[(inst["id"], pert)] = inst
        thinking = completions[0].get("thinking") if completions else None
        predictions.append({
            "instance_id": inst["id"],
            "perturbation": inst.get("perturbation"),
            "train_trial_index": state["train_trial_index"],
            "predicted_text": predicted,
            "base64_images": [],
            "mapped_output": mapped,
            "reference_index": state.get("reference_index"),
            "stats": stats_by_trial.get((inst["id"], pert, state["train_trial_index"]), {}),
            "annotations": state.get("annotations"),
            "thinking_text": thinking["text"] if thinking else None,
        })
        requests.append({"instance_id": inst["id"], "perturbation": inst.get("perturbation"),
                         "train_trial_index": state["train_trial_index"], "request": state["request"]})
    write_json(directory / "instances.json", list(instances.values()))
    write_json(directory / "display_predictions.json", predictions)
    write_json(directory / "display_requests.json", requests)
