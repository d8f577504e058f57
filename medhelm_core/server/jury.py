"""The page's judge views (issue 44, item 4): for the target shown,

    build_jury       the judge ablation: each model's rank under every jury variant (`all`,
                     `without:<judge>`, `only:<judge>`), on the main leaderboard and per jury benchmark,
                     with the rank stability of each variant; and which (benchmark, model) pairs have
                     verdicts to read, and how many of their instances clinicians rated;
    build_verdicts   per instance of one model on one jury benchmark: every judge's score and
                     explanation per criterion, the jury's mean, and the clinicians' ratings of the item.

Numbers come from the analytics SQL models as kept per target (`leaderboard.jury_variant_scores`,
`jury_rank_stability`, `jury_variant_leaderboard`, `judge_scores`): the page shows what the tables
say, and computes nothing of its own but the ranks of a benchmark's models (rank() over the same
rounded scores as jury_rank_stability) and per-criterion means. Explanations are read from the
verdicts as stored: `annotations` (our own runs) or `published_annotation_entries` (a release imported
--with-completions), and `judge_verdicts` says why a judge of ours gave none. Clinicians' ratings are
`human_ratings` (`medhelm-import --human-ratings CSV`), matched as judge_agreement matches them: an
item is (dataset_name = the jury's benchmark, model_key = the run's model with '/' as '_',
instance_id). Only their numbers are served: not who rated, nor the question and answer they saw.

Explanations (and judge errors) are model output: the page writes them as text, never as HTML, and
`redact_verdicts` replaces them for runs whose tier is not shareable, as `redact_run` does.
"""
from __future__ import annotations

from typing import Any, Optional

import duckdb

from .data import REDACTED, SHAREABLE_TIERS, DataError, _columns, _kept, _loads, _rows, _tables, jsonable

DIMENSIONS = ("accuracy", "completeness", "clarity")   # the clinicians' columns (and the jury's MedHELM criteria)
NO_RATINGS = "No clinicians' ratings loaded: medhelm-import --human-ratings CSV loads them (the MedHELM authors' format)."


def model_id(run: dict) -> str:
    """The `model` a verdicts view is asked for: the run's model, else its deployment."""
    return str(run.get("model") or run.get("model_deployment") or "")


def model_key(model: str) -> str:
    """The clinicians' file's name of a model (the authors' model_key)."""
    return model.replace("/", "_")


def variant_order(judges: list[str], present: set[str]) -> list[str]:
    """`all`, then each judge left out, then each judge alone (the jury's judge order), then any other
    variant the tables hold (sorted)."""
    wanted = ["all"] + [f"without:{j}" for j in judges] + [f"only:{j}" for j in judges]
    return [v for v in wanted if v in present] + sorted(present - set(wanted))


def _ratings_table(conn: duckdb.DuckDBPyConnection) -> bool:
    """Whether `human_ratings` exists with the authors' item columns (a store made before them has not)."""
    if "human_ratings" not in _tables(conn):
        return False
    return {"dataset_name", "model_key", "instance_id", *DIMENSIONS} <= set(_columns(conn, "human_ratings"))


def _ordered_judges(found: list[list[str]]) -> list[str]:
    out: list[str] = []
    for judges in found:
        for j in judges or []:
            if j not in out:
                out.append(j)
    return out


# --------------------------------------------------------------------------- the ablation view

def build_jury(conn: duckdb.DuckDBPyConnection, snap: dict) -> dict:
    target = snap["target"]
    runs = {(r["suite"], r["run_name"]): r for r in snap["runs"]}
    names = {t: _kept(conn, None, t) for t in
             ("jury_variant_scores", "jury_rank_stability", "jury_variant_leaderboard", "judge_scores")}
    out: dict[str, Any] = {"target": target, "available": False, "jury_note": None, "judges": [], "variants": [],
                           "leaderboard": [], "benchmarks": [], "ratings": {}}
    if names["jury_variant_scores"] is None:
        out["jury_note"] = ("No judge-ablation tables in the database yet: medhelm-summarize (or medhelm-import) "
                            "builds them.")
    benches: dict[str, dict] = {}

    def bench(name: str) -> dict:
        return benches.setdefault(name, {"benchmark": name, "metrics": [], "judges": [], "variants": [],
                                         "models": {}, "stability": {}})

    def model_entry(b: dict, deployment: Optional[str], model: Optional[str]) -> dict:
        key = (deployment, model)
        if key not in b["models"]:
            b["models"][key] = {"model": model or deployment or "", "model_deployment": deployment,
                                "display_name": None, "runs": [], "n_judged": 0, "n_rated": 0, "by_variant": {}}
        return b["models"][key]

    display = {(r["model_deployment"], r["model"]): r["display_name"] for r in snap["runs"]}
    all_judges: list[list[str]] = []
    if names["jury_variant_scores"] is not None:
        jvs = names["jury_variant_scores"]
        for r in _rows(conn, f"""
                WITH s AS (SELECT benchmark, variant, model_deployment, model,
                                  round(sum(score_sum) / sum(n_instances), 12) AS value,
                                  sum(n_instances) AS n_instances, sum(n_defaulted) AS n_defaulted
                           FROM {jvs} WHERE target = ? GROUP BY ALL)
                SELECT *, rank() OVER (PARTITION BY benchmark, variant ORDER BY value DESC) AS rank
                FROM s ORDER BY benchmark, variant, model_deployment, model""", [target]):
            # the score jury_rank_stability ranks (Σ score_sum / Σ n_instances, 12 decimals); rank 1 is best
            m = model_entry(bench(r["benchmark"]), r["model_deployment"], r["model"])
            m["by_variant"][r["variant"]] = {"value": r["value"], "rank": r["rank"], "n_instances": r["n_instances"],
                                             "n_defaulted": r["n_defaulted"]}
        for r in _rows(conn, f"SELECT benchmark, list(DISTINCT metric ORDER BY metric) AS metrics, "
                             f"list(DISTINCT judges) AS judges FROM {jvs} WHERE target = ? AND variant = 'all' "
                             f"GROUP BY benchmark", [target]):
            b = bench(r["benchmark"])
            b["metrics"] = list(r["metrics"] or [])
            b["judges"] = _ordered_judges(r["judges"] or [])
            all_judges.append(b["judges"])
        out["available"] = bool(benches)
        if not benches:
            out["jury_note"] = (f"No jury-scored runs in {snap['mode']} {target}: none of its runs has an LLM jury "
                                f"metric whose verdicts are at hand (our own runs, or a release imported "
                                f"--with-completions).")
    if names["jury_rank_stability"] is not None and benches:
        for r in _rows(conn, f"SELECT benchmark, variant, n_models, kendall_tau, adjacent_swaps, top_k_overlap "
                             f"FROM {names['jury_rank_stability']} WHERE target = ?", [target]):
            if r["benchmark"] in benches:
                benches[r["benchmark"]]["stability"][r["variant"]] = {
                    "n_models": r["n_models"], "kendall_tau": r["kendall_tau"],
                    "adjacent_swaps": r["adjacent_swaps"], "top_k_overlap": list(r["top_k_overlap"] or [])}

    # which (benchmark, model) pairs have verdicts to read, and how many of their instances clinicians rated
    if names["judge_scores"] is not None:
        js = names["judge_scores"]
        judged = _rows(conn, f"SELECT benchmark, suite, run_name, count(DISTINCT instance_id) AS n FROM {js} "
                             f"WHERE target = ? GROUP BY ALL ORDER BY ALL", [target])
        rated: dict[tuple, int] = {}
        if _ratings_table(conn) and judged:
            for r in _rows(conn, f"""
                    SELECT j.benchmark, j.suite, j.run_name, h.model_key, count(*) AS n
                    FROM (SELECT DISTINCT benchmark, suite, run_name, instance_id FROM {js} WHERE target = ?) j
                    JOIN (SELECT DISTINCT dataset_name, model_key, instance_id FROM human_ratings) h
                      ON h.dataset_name = j.benchmark AND h.instance_id = j.instance_id
                    GROUP BY ALL""", [target]):
                rated[(r["benchmark"], r["suite"], r["run_name"], r["model_key"])] = r["n"]
        for r in judged:
            run = runs.get((r["suite"], r["run_name"]))
            if run is None:
                continue
            m = model_entry(bench(r["benchmark"]), run["model_deployment"], run["model"])
            m["runs"].append(r["run_name"])
            m["n_judged"] += r["n"]
            m["n_rated"] += rated.get((r["benchmark"], r["suite"], r["run_name"], model_key(model_id(run))), 0)

    out["ratings"] = _ratings_summary(conn, target, sum(m["n_rated"] for b in benches.values()
                                                        for m in b["models"].values()))
    out["judges"] = _ordered_judges(all_judges)
    present = {v for b in benches.values() for m in b["models"].values() for v in m["by_variant"]}
    out["variants"] = variant_order(out["judges"], present)
    for b in benches.values():
        mine = {v for m in b["models"].values() for v in m["by_variant"]}
        b["variants"] = variant_order(b["judges"], mine)
        models = []
        for (deployment, model), m in b["models"].items():
            m["display_name"] = display.get((deployment, model)) or m["model"]
            models.append(m)
        b["models"] = models
    out["benchmarks"] = [benches[k] for k in sorted(benches)]

    if names["jury_variant_leaderboard"] is not None:
        rows: dict[int, dict] = {}
        for r in _rows(conn, f"SELECT variant, row_pos, model_deployment, model, model_name, mean_win_rate, rank, "
                             f"rank_all, jury_columns FROM {names['jury_variant_leaderboard']} WHERE target = ? "
                             f"ORDER BY row_pos, variant", [target]):
            row = rows.setdefault(r["row_pos"], {"row_pos": r["row_pos"], "model_name": r["model_name"],
                                                 "model": r["model"], "model_deployment": r["model_deployment"],
                                                 "rank_all": r["rank_all"], "by_variant": {}})
            row["by_variant"][r["variant"]] = {"rank": r["rank"], "mean_win_rate": r["mean_win_rate"],
                                               "jury_columns": r["jury_columns"]}
        out["leaderboard"] = [rows[k] for k in sorted(rows)]
    return jsonable(out)


def _ratings_summary(conn: duckdb.DuckDBPyConnection, target: str, rated_items: int) -> dict:
    loaded = items = 0
    if _ratings_table(conn):
        loaded, items = conn.execute("SELECT count(*), count(DISTINCT (dataset_name, model_key, instance_id)) "
                                     "FROM human_ratings WHERE dataset_name IS NOT NULL").fetchone()
    if not loaded:
        note = NO_RATINGS
    elif not rated_items:
        note = (f"{loaded} clinicians' ratings loaded ({items} items), none of an instance judged in {target} "
                f"(an item is dataset_name = the jury's benchmark, model_key = the model with '/' as '_', instance_id).")
    else:
        note = None
    return {"loaded": loaded, "items": items, "rated_items": rated_items, "note": note}


# --------------------------------------------------------------------------- the verdicts of one model

def build_verdicts(conn: duckdb.DuckDBPyConnection, snap: dict, benchmark: str, model: str) -> dict:
    target = snap["target"]
    runs = {(r["suite"], r["run_name"]): r for r in snap["runs"] if model_id(r) == model}
    if not runs:
        raise DataError(f"no runs of model {model!r} in {snap['mode']} {target}")
    js = _kept(conn, None, "judge_scores")
    if js is None:
        raise DataError("no judge_scores table in the database yet: medhelm-summarize (or medhelm-import) builds it")
    names = sorted({r for _, r in runs})
    scores = [r for r in _rows(conn, f"SELECT suite, run_name, instance_id, judge, criterion, score, failed "
                                     f"FROM {js} WHERE target = ? AND benchmark = ? AND run_name IN (SELECT unnest(?))",
                               [target, benchmark, names])
              if (r["suite"], r["run_name"]) in runs]
    if not scores:
        raise DataError(f"no judge verdicts of {model} on {benchmark!r} in {snap['mode']} {target}")
    tables = _tables(conn)

    # explanations, per (suite, run, instance, judge): {criterion: explanation}, and each item's position
    explained: dict[tuple, dict[str, Any]] = {}
    position: dict[tuple, int] = {}
    judge_seen: list[str] = []

    def take(suite, run_name, pos, instance_id, judge, verdict) -> None:
        if (suite, run_name) not in runs:
            return
        item = (suite, run_name, instance_id)
        if item in position and pos > position[item]:
            return   # a later trial of the instance: the first one's explanations
        position[item] = pos
        if judge not in judge_seen:
            judge_seen.append(judge)
        verdict = _loads(verdict)
        if isinstance(verdict, dict):
            explained[item + (judge,)] = {
                str(c): (None if not isinstance(v, dict) or v.get("explanation") is None
                         else v["explanation"] if isinstance(v["explanation"], str) else str(v["explanation"]))
                for c, v in verdict.items()}

    if "annotations" in tables:
        for r in _rows(conn, "SELECT suite, run_name, position, instance_id, annotation FROM annotations "
                             "WHERE annotator = ? AND run_name IN (SELECT unnest(?)) ORDER BY position",
                       [benchmark, names]):
            ann = _loads(r["annotation"])
            for judge, verdict in (ann.items() if isinstance(ann, dict) else []):
                if judge != "prompt_text":
                    take(r["suite"], r["run_name"], r["position"], r["instance_id"], judge, verdict)
    if "published_annotation_entries" in tables:
        for r in _rows(conn, "SELECT suite, run_name, position, instance_id, entry, value "
                             "FROM published_annotation_entries WHERE annotator = ? AND run_name IN (SELECT unnest(?)) "
                             "ORDER BY position", [benchmark, names]):
            take(r["suite"], r["run_name"], r["position"], r["instance_id"], r["entry"], r["value"])
    # why a judge of ours gave no verdict (judge_verdicts' status and error; `summary` rows are not calls)
    status: dict[tuple, tuple] = {}
    if "judge_verdicts" in tables:
        for r in _rows(conn, "SELECT suite, run_name, instance_id, judge, status, error FROM judge_verdicts "
                             "WHERE (annotator = ? OR starts_with(annotator, ? || '/')) AND run_name IN (SELECT unnest(?)) "
                             "AND status <> 'summary' ORDER BY position, annotator", [benchmark, benchmark, names]):
            key = (r["suite"], r["run_name"], r["instance_id"], r["judge"])
            if key not in status or (status[key][0] == "ok" and r["status"] != "ok"):
                status[key] = (r["status"], r["error"])

    jury_judges = []
    jvs = _kept(conn, None, "jury_variant_scores")
    if jvs is not None:
        jury_judges = _ordered_judges([r[0] for r in conn.execute(
            f"SELECT DISTINCT judges FROM {jvs} WHERE target = ? AND benchmark = ? AND variant = 'all'",
            [target, benchmark]).fetchall()])

    items: dict[tuple, dict[str, dict]] = {}   # item -> judge -> {criterion: score} / failed
    for r in scores:
        item = (r["suite"], r["run_name"], r["instance_id"])
        judge = items.setdefault(item, {}).setdefault(r["judge"], {"failed": False, "scores": {}})
        if r["failed"]:
            judge["failed"] = True
        elif r["criterion"] is not None:
            judge["scores"][r["criterion"]] = r["score"]
    judges = _ordered_judges([jury_judges, judge_seen, sorted({j for v in items.values() for j in v})])
    criteria: list[str] = [d for d in DIMENSIONS if any(d in j["scores"] for v in items.values() for j in v.values())]
    for v in items.values():
        for j in judges:
            for c in sorted((v.get(j) or {}).get("scores", {})):
                if c not in criteria:
                    criteria.append(c)

    ratings: dict[str, list[dict]] = {}
    has_ratings = _ratings_table(conn)
    if has_ratings:
        for r in _rows(conn, "SELECT instance_id, accuracy, completeness, clarity FROM human_ratings "
                             "WHERE dataset_name = ? AND model_key = ? ORDER BY file_row", [benchmark, model_key(model)]):
            ratings.setdefault(r["instance_id"], []).append({d: r[d] for d in DIMENSIONS})

    instances = []
    for item in sorted(items, key=lambda i: (i[0], i[1], position.get(i, 1 << 30), i[2])):
        suite, run_name, instance_id = item
        run = runs[(suite, run_name)]
        shown = []
        for j in judges:
            got = items[item].get(j)
            if got is None:
                continue
            expl = explained.get(item + (j,), {})
            st, err = status.get(item + (j,), (None, None))
            # a judge without a verdict object: judge_verdicts' reason where ours, HELM's None ("failed") else
            failed = got["failed"] and not got["scores"]
            shown.append({"judge": j, "status": (st if st not in (None, "ok") else "failed") if failed else "ok",
                          "error": err if failed else None,
                          "criteria": [{"name": c, "score": got["scores"].get(c), "explanation": expl.get(c)}
                                       for c in criteria if c in got["scores"] or c in expl]})
        jury = {}
        for c in criteria:
            vals = [items[item][j]["scores"][c] for j in judges
                    if j in items[item] and items[item][j]["scores"].get(c) is not None]
            jury[c] = sum(vals) / len(vals) if vals else None
        mine = ratings.get(instance_id, [])
        mean = {}
        for d in DIMENSIONS:
            vals = [x[d] for x in mine if x[d] is not None]
            mean[d] = sum(vals) / len(vals) if vals else None
        instances.append({"suite": suite, "run_name": run_name, "instance_id": instance_id,
                          "position": position.get(item), "tier": run["tier"], "shareable": run["shareable"],
                          "judges": shown, "jury": jury, "clinicians": mine, "clinicians_mean": mean})
    n_rated = sum(1 for i in instances if i["clinicians"])
    first = next(iter(runs.values()))
    if not has_ratings or not _any_ratings(conn):
        note = NO_RATINGS
    elif not n_rated:
        note = (f"No clinicians' ratings of these instances (the ratings loaded match none with dataset_name "
                f"{benchmark}, model_key {model_key(model)}).")
    else:
        note = None
    return jsonable({
        "target": target, "mode": snap["mode"], "benchmark": benchmark, "model": model,
        "model_key": model_key(model), "display_name": first["display_name"],
        "model_deployment": first["model_deployment"], "judges": judges, "criteria": criteria,
        "dimensions": list(DIMENSIONS), "runs": [{"suite": s, "run_name": r, "tier": runs[(s, r)]["tier"]}
                                                 for s, r in sorted({(i[0], i[1]) for i in items})],
        "instances": instances, "n_rated": n_rated, "ratings_note": note, "redacted": False,
    })


def _any_ratings(conn: duckdb.DuckDBPyConnection) -> bool:
    return conn.execute("SELECT count(*) FROM human_ratings WHERE dataset_name IS NOT NULL").fetchone()[0] > 0


def redact_verdicts(answer: dict) -> dict:
    """The shareable form: for instances of runs whose tier is not shareable, judge explanations and
    errors replaced (model output about the instance's private text); scores and ratings stay."""
    out = {k: v for k, v in answer.items() if k != "instances"}
    red = []
    for i in answer.get("instances", []):
        if i.get("tier") in SHAREABLE_TIERS:
            red.append(i)
            continue
        out["redacted"] = True
        red.append({**i, "judges": [
            {**j, "error": REDACTED if j.get("error") else None,
             "criteria": [{**c, "explanation": REDACTED if c.get("explanation") else None}
                          for c in j.get("criteria") or []]}
            for j in i.get("judges") or []]})
    out["instances"] = red
    return out


# -- what the page asks for, read through the page's reader (cached like its other views) -----------
def jury_view(reader) -> dict:
    """The judge ablation of the reader's target: ranks per jury variant, rank stability, verdicts to read."""
    snap = reader.snapshot()

    def build() -> dict:
        with reader.connect() as conn:
            return build_jury(conn, snap)
    return reader.cached("jury", build)


def verdicts_view(reader, benchmark: str, model: str) -> dict:
    """Every judge's score and explanation per instance of `model` on jury `benchmark`, beside the
    clinicians' ratings of the item."""
    snap = reader.snapshot()

    def build() -> dict:
        with reader.connect() as conn:
            return build_verdicts(conn, snap, benchmark, model)
    return reader.cached(("verdicts", benchmark, model), build)
