"""Layer 6, the scores: HELM's metrics on a run's request states (per-instance and run stats, the
corrected jury score beside HELM's), and the run's HELM files written from DuckDB."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from medhelm_core.helm_files import run_dir, write_run_files
from medhelm_core.jury.metric import jury_score, jury_score_corrected
from medhelm_core.metrics.evaluate import evaluate_run
from medhelm_core.run.annotations import load_request_states
from medhelm_core.run.entries import load_run_spec
from medhelm_core.run.workspace import RunRef, Workspace, in_data_scope
from medhelm_core.store import insert_rows


STAT_COLUMNS = ["ordinal", "name", "split", "sub_split", "perturbation", "count", "sum", "sum_squared", "min",
                "max", "mean", "variance", "stddev"]
INSTANCE_STAT_COLUMNS = ["suite", "run_name", "instance_id", "train_trial_index"] + STAT_COLUMNS
RUN_STAT_COLUMNS = ["suite", "run_name"] + STAT_COLUMNS[:5] + ["perturbation_name", "computed_on"] + STAT_COLUMNS[5:]


def _stat_row(prefix: tuple, ordinal: int, stat: dict) -> tuple:
    name = stat["name"]
    return prefix + (ordinal, name["name"], name.get("split"), name.get("sub_split"),
                     json.dumps(name["perturbation"]) if name.get("perturbation") else None,
                     stat["count"], stat["sum"], stat["sum_squared"], stat.get("min"), stat.get("max"),
                     stat.get("mean"), stat.get("variance"), stat.get("stddev"))


def compute_stats(ws: Workspace, run: RunRef) -> dict:
    spec, states, tokenizer_name = scoring_inputs(ws, run)
    per_instance, stats = evaluate_run(spec, states, ws.tokenizer(tokenizer_name), ws.catalog.metrics)
    return store_stats(ws, run, spec, states, per_instance, stats)


def scoring_inputs(ws: Workspace, run: RunRef) -> tuple[dict, list[dict], str | None]:
    """What a run's metrics read: its run spec, its request states, its deployment's tokenizer name."""
    spec = load_run_spec(ws, run)
    states = load_request_states(ws, run)
    return spec, states, ws.deployment(spec["adapter_spec"]["model_deployment"]).tokenizer_name


def store_stats(ws: Workspace, run: RunRef, spec: dict, states: list[dict], per_instance: list[dict],
                stats: list[dict]) -> dict:
    """A run's evaluated stats into the store (instance_stats, run_stats, jury_scores, runs)."""
    inst_rows = []
    for entry in per_instance:
        prefix = (run.suite, run.run_name, entry["instance_id"], entry["train_trial_index"])
        inst_rows += [_stat_row(prefix, i, s) for i, s in enumerate(entry["stats"])]
    stat_rows = []
    for i, s in enumerate(stats):
        row = _stat_row((run.suite, run.run_name), i, s)
        pert = s["name"].get("perturbation") or {}
        # run_stats columns: suite, run_name, ordinal, name, split, sub_split, perturbation,
        # perturbation_name, computed_on, count, sum, sum_squared, min, max, mean, variance, stddev
        stat_rows.append(row[:7] + (pert.get("name"), pert.get("computed_on")) + row[7:])
    jury_rows = _jury_score_rows(run, spec, states, ws.switches.jury_score_type)
    path = str(run_dir(ws.output_path, run.suite, run.run_name))
    with ws.store.transaction() as conn:
        meta = conn.execute(
            "SELECT d.scenario_metadata FROM run_entries r JOIN datasets d USING (scenario_key)"
            " WHERE r.suite = ? AND r.run_name = ?", [run.suite, run.run_name]).fetchone()
        for table in ("instance_stats", "run_stats", "jury_scores", "runs"):
            conn.execute(f"DELETE FROM {table} WHERE suite = ? AND run_name = ?", [run.suite, run.run_name])
        insert_rows(conn, "instance_stats", INSTANCE_STAT_COLUMNS, inst_rows)
        insert_rows(conn, "run_stats", RUN_STAT_COLUMNS, stat_rows)
        insert_rows(conn, "jury_scores", ["suite", "run_name", "instance_id", "metric", "helm_value",
                                          "corrected_value", "judges_ok", "judges_total"], jury_rows)
        conn.execute("INSERT INTO runs (suite, run_name, run_spec, scenario_metadata, run_path, edition)"
                     " VALUES (?, ?, ?, ?, ?, ?)", [run.suite, run.run_name, json.dumps(spec, ensure_ascii=False),
                                                    meta[0] if meta else None, path, ws.edition])
    return {"per_instance_rows": len(inst_rows), "run_stats": len(stat_rows), "instances": len(per_instance),
            "per_instance_stats": per_instance, "stats": stats, "request_states": states, "run_spec": spec}


def _jury_score_rows(run: RunRef, spec: dict, states: list[dict], score_type: str) -> list[tuple]:
    """HELM's jury value beside the corrected one (None when no judge scored)."""
    rows = []
    for mspec in spec.get("metric_specs", []):
        if not mspec["class_name"].endswith("LLMJuryMetric"):
            continue
        args = mspec["args"]
        judges = list((args.get("annotator_models") or {}).keys())
        for st in states:
            annotation = (st.get("annotations") or {}).get(args["scenario_name"])
            if annotation is None:
                continue
            ok = sum(1 for j in judges if isinstance(annotation.get(j), dict))
            rows.append((run.suite, run.run_name, st["instance"]["id"], args["metric_name"],
                         jury_score(annotation, judges, args.get("default_score", 0.0), score_type),
                         jury_score_corrected(annotation, judges, score_type), ok, len(judges)))
    return rows


@in_data_scope
def write_files(ws: Workspace, run: RunRef, computed: dict | None = None) -> Path:
    """Write the run's HELM files from DuckDB."""
    computed = computed or stored_run_outputs(ws, run)
    spec = computed["run_spec"]
    directory = run_dir(ws.output_path, run.suite, run.run_name)
    scenario = scenario_file(ws, spec)
    write_run_files(directory, spec, scenario, computed["request_states"],
                    spec.get("annotators"), computed["stats"], computed["per_instance_stats"])  # None: no annotator_specs
    return directory


def scenario_file(ws: Workspace, spec: dict) -> dict:
    """What the run's scenario.json holds."""
    defn = ws.catalog.scenario(spec["scenario_spec"]["class_name"])
    scenario = defn.metadata(spec["scenario_spec"]["args"])
    return {**scenario, "definition_path": ws.switches.definition_path(scenario["definition_path"])}


def stored_run_outputs(ws: Workspace, run: RunRef) -> dict:
    """The run spec, request states, stats and per-instance stats as stored (no recomputation)."""
    spec = load_run_spec(ws, run)
    states = load_request_states(ws, run)
    with ws.store.connect() as conn:
        stats = stats_from_rows(conn.execute(
            "SELECT name, split, sub_split, perturbation, count, sum, sum_squared, min, max, mean, variance, stddev"
            " FROM run_stats WHERE suite = ? AND run_name = ? ORDER BY ordinal", [run.suite, run.run_name]).fetchall())
        rows = conn.execute(
            "SELECT instance_id, train_trial_index, name, split, sub_split, perturbation, count, sum, sum_squared,"
            " min, max, mean, variance, stddev FROM instance_stats WHERE suite = ? AND run_name = ?"
            " ORDER BY rowid", [run.suite, run.run_name]).fetchall()
    per_instance: list[dict] = []
    index: dict[tuple, dict] = {}
    ids = {str(st["instance"]["id"]): st["instance"]["id"] for st in states}  # int ids (medcalc) stay ints
    for r in rows:
        key = (r[0], r[1])
        if key not in index:
            index[key] = {"instance_id": ids.get(r[0], r[0]), "train_trial_index": r[1], "stats": []}
            per_instance.append(index[key])
        index[key]["stats"] += stats_from_rows([r[2:]])
    return {"run_spec": spec, "request_states": states, "stats": stats, "per_instance_stats": per_instance}


def stats_from_rows(rows: list[tuple]) -> list[dict]:
    """(name, split, sub_split, perturbation, count, sum, sum_squared, min, max, mean, variance, stddev)
    rows → HELM Stat dicts (count-0 stats carry no min/max/mean/variance/stddev, as HELM writes them)."""
    out = []
    for name, split, sub_split, pert, count, total, sq, lo, hi, mean, var, sd in rows:
        metric: dict[str, Any] = {"name": name, "split": split}
        if sub_split is not None:
            metric["sub_split"] = sub_split
        if pert is not None:
            metric["perturbation"] = json.loads(pert)
        stat: dict[str, Any] = {"name": metric, "count": count, "sum": total, "sum_squared": sq}
        for key, value in (("min", lo), ("max", hi), ("mean", mean), ("variance", var), ("stddev", sd)):
            if value is not None:
                stat[key] = value
        out.append(stat)
    return out


# credentials.conf values that are a shipped example's placeholder, not a key (examples/prod_env_public_apis).
