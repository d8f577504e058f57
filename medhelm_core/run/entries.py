"""Layer 1, the run entries: what a suite asks for (run entry + run spec per run) and the scenario
specs (dataset partitions, per tier) those runs need."""
from __future__ import annotations

import json
from typing import Any

from medhelm_core.catalog import Catalog
from medhelm_core.helm_config.expand import expand_confs
from medhelm_core.editions import DEFAULT_EDITION
from medhelm_core.errors import MedhelmError
from medhelm_core.jury.presets import using_judges
from medhelm_core.options import check_run_selection
from medhelm_core.run.grid import Cell, cell_of, check_cells_unique
from medhelm_core.run.workspace import RunRef, Workspace
from medhelm_core.runspecs.metric_bundles import with_metric_device
from medhelm_core.selections import RunSelection
from medhelm_core.store import upsert


def expand_selection(ws: Workspace, selection: RunSelection) -> list[tuple[Any, dict]]:
    """(run entry, run spec) pairs of a selection: its confs expanded as helm-run does, with the
    workspace's deployments and benchmark catalog."""
    check_run_selection(selection)
    if not selection.conf_paths and not selection.run_entries:
        raise MedhelmError("nothing to run: give --conf-paths FILE ... and/or --run-entries DESCRIPTION ...")
    with using_judges(getattr(selection, "judges", None)):  # --judges: the default judges file
        entries = expand_confs(selection.conf_paths, run_entries=selection.run_entries or (),
                               max_eval_instances=selection.max_eval_instances,
                               num_train_trials=selection.num_train_trials, priority=selection.priority,
                               models_to_run=selection.models_to_run, local_path=ws.local_path,
                               run_spec_functions=ws.catalog.run_spec_functions)
    return [(entry, with_metric_device(spec, selection.metric_device)) for entry, spec in entries]


def take_expanded(controls, selection: RunSelection) -> tuple[list[tuple[Any, dict]], bool] | None:
    """(entries, registered already) the invocation expanded for exactly this selection
    (`RunControls.expanded`: medhelm-run hands them to the register_suite job it launches), else None."""
    expanded = getattr(controls, "expanded", None)
    if expanded is None:
        return None
    config, entries, registered = expanded
    if config != RunSelection.model_validate(selection.model_dump()).model_dump():
        return None
    return entries, registered


def spec_judges(ws: Workspace, spec: dict, where: str) -> list[tuple[str, str]]:
    """(judge deployment, jury name) of every judge a run spec's annotators ask (`where` names the
    run in an annotator's error)."""
    judges: list[tuple[str, str]] = []
    for aspec in spec.get("annotators") or []:
        annotator = ws.catalog.annotator(aspec, where)
        judges += [(j["model_deployment"], getattr(annotator, "name", aspec["class_name"]))
                   for j in (getattr(annotator, "judges", None) or {}).values()]
    return judges


def tier_of(run_spec: dict, catalog: Catalog) -> str:
    cls = run_spec["scenario_spec"]["class_name"]
    tier = catalog.tier_of(cls)
    if tier is None:
        raise MedhelmError(f"{run_spec['name']}: no scenario implementation for {cls}")
    return tier


TIERS = ("public", "gated", "private")


def scenario_partition_key(scenario_spec: dict, edition: str | None = None) -> str:
    """A readable, stable name for one scenario spec: `<Class>:<arg>=<value>,...` (args sorted),
    then `@<edition>` when the edition is not the default (an edition may read other data)."""
    short = scenario_spec["class_name"].rsplit(".", 1)[-1]
    args = scenario_spec.get("args") or {}
    key = short + ":" + ",".join(f"{k}={args[k]}" for k in sorted(args))
    return key if edition in (None, DEFAULT_EDITION) else f"{key}@{edition}"


def check_one_edition(ws: Workspace, suite: str, run_names: list[str]) -> None:
    """A suite reproduces one edition: stop, naming the runs, when some of it was made under another."""
    with ws.store.connect() as conn:
        other = conn.execute(
            "SELECT coalesce(edition, ?), list(run_name ORDER BY run_name) FROM run_entries"
            " WHERE suite = ? AND coalesce(edition, ?) <> ? GROUP BY ALL ORDER BY 1",
            [DEFAULT_EDITION, suite, DEFAULT_EDITION, ws.edition]).fetchall()
    if other:
        edition, names = other[0]
        shown = ", ".join(names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "")
        raise MedhelmError(f"suite {suite!r} would mix editions: {shown} ran under {edition}, this is "
                           f"{ws.edition} (use another --suite, or --edition {edition})")


def register_runs(ws: Workspace, suite: str, entries: list[tuple[Any, dict]]) -> list[RunRef]:
    """Record what the suite asks for: (run entry, run spec) pairs from the confs, under the
    workspace's edition, and the scenario specs (dataset partitions) they need."""
    check_one_edition(ws, suite, [spec["name"] for _, spec in entries])
    check_cells_unique(suite, [*_registered_deployments(ws, suite), *(
        (spec["name"], _deployment_of(spec)) for _, spec in entries)])
    rows, scenario_rows = [], {}
    for entry, spec in entries:
        adapter = spec["adapter_spec"]
        tier = tier_of(spec, ws.catalog)
        rows.append((suite, spec["name"], entry.description, entry.priority, entry.location, tier,
                     adapter.get("model"), adapter.get("model_deployment"), json.dumps(spec, ensure_ascii=False),
                     ws.edition, _deployment_json(ws, adapter.get("model_deployment"))))
        sspec = spec["scenario_spec"]
        scenario_rows[scenario_partition_key(sspec, ws.edition)] = (tier, json.dumps(sspec, ensure_ascii=False))
    with ws.store.transaction() as conn:
        upsert(conn, "run_entries", ["suite", "run_name"],
               ["suite", "run_name", "description", "priority", "conf_path", "tier", "model", "model_deployment",
                "run_spec", "edition", "deployment"], rows)
        upsert(conn, "scenario_specs", ["partition_key"], ["partition_key", "tier", "scenario_spec", "edition"],
               [(k, t, sp, ws.edition) for k, (t, sp) in scenario_rows.items()])
    return [RunRef(suite, spec["name"]) for _, spec in entries]


def _deployment_of(run_spec: dict) -> str:
    adapter = run_spec["adapter_spec"]
    return adapter.get("model_deployment") or adapter.get("model")


def _registered_deployments(ws: Workspace, suite: str) -> list[tuple[str, str]]:
    if not ws.store.exists():
        return []
    with ws.store.connect() as conn:
        return conn.execute("SELECT run_name, coalesce(model_deployment, model) FROM run_entries WHERE suite = ?",
                            [suite]).fetchall()


def cells_of(suite: str, entries: list[tuple[Any, dict]]) -> list[Cell]:
    """Each run's cell in the benchmark × model grid (`grid.py`), in the entries' order."""
    return [cell_of(suite, spec["name"], _deployment_of(spec)) for _, spec in entries]


def _deployment_json(ws: Workspace, name: str | None) -> str | None:
    """What later readers need of the run's deployment (its client class and tokenizer), nothing else:
    a deployment's arguments may hold credentials."""
    try:
        dep = ws.deployment(name) if name else None
    except MedhelmError:
        return None  # validated before any call (run/preflight.py); registering does not need it
    if dep is None:
        return None
    return json.dumps({"client_spec": {"class_name": dep.client_spec.class_name}, "tokenizer_name": dep.tokenizer_name})


def editions_of(ws: Workspace, runs: list[RunRef]) -> dict[RunRef, str]:
    """The edition each registered run was registered under."""
    with ws.store.connect() as conn:
        rows = conn.execute(
            "SELECT suite, run_name, coalesce(edition, ?) FROM run_entries"
            " WHERE suite || '/' || run_name IN (SELECT unnest(?::VARCHAR[]))",
            [DEFAULT_EDITION, [r.key for r in runs]]).fetchall()
    return {RunRef(s, n): e for s, n, e in rows}


def run_workspace(ws: Workspace, run: RunRef) -> Workspace:
    """`ws` under the edition `run` was registered with."""
    return ws.for_edition(editions_of(ws, [run]).get(run))


def scenario_partitions(entries: list[tuple[Any, dict]], catalog: Catalog) -> dict[str, list[str]]:
    """Dataset partitions per tier for these run specs (under the catalog's edition), in first-use order."""
    out: dict[str, list[str]] = {t: [] for t in TIERS}
    for _, spec in entries:
        key = scenario_partition_key(spec["scenario_spec"], catalog.edition)
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
