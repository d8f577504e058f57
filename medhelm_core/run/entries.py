"""Layer 1, the run entries: what a suite asks for (run entry + run spec per run) and the scenario
specs (dataset partitions, per tier) those runs need."""
from __future__ import annotations

import json
from typing import Any

from medhelm_core.catalog import Catalog
from medhelm_core.conf.expand import expand_confs
from medhelm_core.errors import MedhelmError
from medhelm_core.run.workspace import RunRef, Workspace
from medhelm_core.selections import RunSelection


def expand_selection(ws: Workspace, selection: RunSelection) -> list[tuple[Any, dict]]:
    """(run entry, run spec) pairs of a selection: its confs expanded as helm-run does, with the
    workspace's deployments and benchmark catalog."""
    return expand_confs(selection.conf_paths, max_eval_instances=selection.max_eval_instances,
                        num_train_trials=selection.num_train_trials, priority=selection.priority,
                        models_to_run=selection.models_to_run, local_path=ws.local_path,
                        run_spec_functions=ws.catalog.run_spec_functions)


def tier_of(run_spec: dict, catalog: Catalog) -> str:
    cls = run_spec["scenario_spec"]["class_name"]
    tier = catalog.tier_of(cls)
    if tier is None:
        raise MedhelmError(f"{run_spec['name']}: no scenario implementation for {cls}")
    return tier


TIERS = ("public", "gated", "private")


def scenario_partition_key(scenario_spec: dict) -> str:
    """A readable, stable name for one scenario spec: `<Class>:<arg>=<value>,...` (args sorted)."""
    short = scenario_spec["class_name"].rsplit(".", 1)[-1]
    args = scenario_spec.get("args") or {}
    return short + ":" + ",".join(f"{k}={args[k]}" for k in sorted(args))


def register_runs(ws: Workspace, suite: str, entries: list[tuple[Any, dict]]) -> list[RunRef]:
    """Record what the suite asks for: (run entry, run spec) pairs from the confs, and the scenario
    specs (dataset partitions) they need."""
    rows, scenario_rows = [], {}
    for entry, spec in entries:
        adapter = spec["adapter_spec"]
        tier = tier_of(spec, ws.catalog)
        rows.append((suite, spec["name"], entry.description, entry.priority, entry.location, tier,
                     adapter.get("model"), adapter.get("model_deployment"), json.dumps(spec, ensure_ascii=False)))
        sspec = spec["scenario_spec"]
        scenario_rows[scenario_partition_key(sspec)] = (tier, json.dumps(sspec, ensure_ascii=False))
    with ws.store.transaction() as conn:
        conn.executemany(
            "INSERT OR REPLACE INTO run_entries (suite, run_name, description, priority, conf_path, tier, model,"
            " model_deployment, run_spec) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)", rows)
        conn.executemany("INSERT OR REPLACE INTO scenario_specs (partition_key, tier, scenario_spec) VALUES (?, ?, ?)",
                         [(k, t, sp) for k, (t, sp) in scenario_rows.items()])
    return [RunRef(suite, spec["name"]) for _, spec in entries]


def scenario_partitions(entries: list[tuple[Any, dict]], catalog: Catalog) -> dict[str, list[str]]:
    """Dataset partitions per tier for these run specs, in first-use order."""
    out: dict[str, list[str]] = {t: [] for t in TIERS}
    for _, spec in entries:
        key = scenario_partition_key(spec["scenario_spec"])
        tier = tier_of(spec, catalog)
        if key not in out[tier]:
            out[tier].append(key)
    return out


def load_run_spec(ws: Workspace, run: RunRef) -> dict:
    with ws.store.connect() as conn:
        row = conn.execute("SELECT run_spec FROM run_entries WHERE suite = ? AND run_name = ?",
                           [run.suite, run.run_name]).fetchone()
    if row is None:
        raise MedhelmError(f"run {run.run_name!r} is not registered in suite {run.suite!r}")
    return json.loads(row[0])
