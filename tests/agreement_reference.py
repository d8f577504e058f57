"""The reference for analytics' judge_agreement (issue 44, item 3), computed here from the raw inputs
with well-kept libraries, never with our SQL: pingouin's intraclass_corr for ICC(3,k) and ICC(2,1)
(on the two columns z-scored with the population SD), SciPy's spearmanr, scikit-learn's
cohen_kappa_score(weights="quadratic"); the bootstrap's percentiles are numpy's. Also a writer of
ratings CSVs in the MedHELM authors' exact format (som-shahlab/medhelm's medhelm_human_annotation.csv).
"""
from __future__ import annotations

import csv
import math
import random
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pingouin
from scipy.stats import spearmanr
from sklearn.metrics import cohen_kappa_score

AUTHORS_COLUMNS = ["username", "specialty", "team", "entry_id", "instance_id", "dataset_name", "model_key",
                   "user_label", "accuracy", "completeness", "clarity", "question", "answer"]
DIMENSIONS = ("accuracy", "completeness", "clarity")
STATISTICS = ("icc3k", "icc2_1", "spearman", "kappa_w")
METRICS = ("rouge_l", "BERTScore-F")   # raters on their own scale: no kappa
TOL = 1e-9

# pingouin names the rows ICC3k / ICC2 (up to 0.5) or ICC(C,k) / ICC(A,1) (0.7)
ICC_ROWS = {"icc3k": ("ICC3k", "ICC(C,k)"), "icc2_1": ("ICC2", "ICC(A,1)")}


def write_ratings_csv(path: Path, rows: list[dict], bom: bool = True) -> Path:
    """The authors' file: their columns in their order, a byte-order mark, quoted multi-line texts."""
    with open(path, "w", newline="", encoding="utf-8-sig" if bom else "utf-8") as f:
        w = csv.DictWriter(f, fieldnames=AUTHORS_COLUMNS)
        w.writeheader()
        for r in rows:
            w.writerow({c: ("" if r.get(c) is None else r.get(c)) for c in AUTHORS_COLUMNS})
    return path


def synthetic_ratings(items: dict[tuple[str, str, str], dict[str, float]], seed: int,
                      unmatched: list[tuple[str, str, str]] = ()) -> list[dict]:
    """One to three clinicians' ratings of each item (dataset_name, model_key, instance_id), each the
    item's jury score per dimension (`items`) plus noise, rounded and clipped to 1-5, now and then left
    empty; rows shuffled so an item's ratings are apart in the file; `unmatched` items rated too."""
    rng = random.Random(seed)
    rows = []
    keys = sorted(items) + list(unmatched)
    for key in keys:
        for k in range(rng.choice([1, 2, 2, 3])):
            dataset, model_key, instance = key
            row = {"username": f"Annotator {rng.randint(1, 9)}",
                   "specialty": rng.choice(["Internal Medicine", "Medical student"]), "team": f"Team {rng.randint(1, 9)}", "entry_id": str(rng.randint(1, 999)), "instance_id": instance,
                   "dataset_name": dataset, "model_key": model_key, "user_label": "Model A",
                   "question": f'Summarize, "briefly":\n{dataset} {instance}\n[patient] ok , doctor .',
                   "answer": f"## Note\n* {model_key}, point {k}\n"}
            for d in DIMENSIONS:
                base = items.get(key, {}).get(d, 3.0)
                value = min(5, max(1, round(base + rng.gauss(0, 1.2))))
                row[d] = "" if rng.random() < 0.06 else str(value)
            rows.append(row)
    rng.shuffle(rows)
    return rows


def ratings_by_item(rows: list[dict]) -> dict[tuple[tuple[str, str, str], str], list[float]]:
    """(item, dimension) -> the item's non-empty ratings of that dimension, in file order."""
    out: dict = {}
    for r in rows:
        key = (r["dataset_name"], r["model_key"], r["instance_id"])
        for d in DIMENSIONS:
            if str(r.get(d) or "").strip():
                out.setdefault((key, d), []).append(float(r[d]))
    return out


def reference_pairs(judges: dict[str, dict[tuple, float]], metrics: dict[str, dict[tuple, float]],
                    ratings: dict[tuple, list[float]]) -> dict[tuple[str, str], list[tuple[tuple, float, float]]]:
    """(rater, dimension) -> [(item, x, y)] in item order: `judges` judge -> {(item, dimension): score};
    `metrics` stat -> {item: value}. The target's items are those any judge scored."""
    judged = {item for scores in judges.values() for item, _ in scores}
    out: dict = {}
    for (item, d), values in sorted(ratings.items()):
        if item not in judged:
            continue
        y = sum(values) / len(values)
        scores = {j: s[(item, d)] for j, s in judges.items() if (item, d) in s}
        for j, s in scores.items():
            out.setdefault((j, d), []).append((item, s, y))
        if scores:
            out.setdefault(("jury", d), []).append((item, sum(scores.values()) / len(scores), y))
        if len(values) >= 2:
            out.setdefault(("clinicians", d), []).append((item, values[0], values[1]))
        for m, per_item in metrics.items():
            if item in per_item:
                out.setdefault((m, d), []).append((item, per_item[item], y))
    return {k: sorted(v) for k, v in out.items()}


def half_up(v: float) -> int:
    return math.floor(v + 0.5)


def reference_statistics(x: list[float], y: list[float], kappa: bool = True) -> dict[str, float | None]:
    """The four statistics of the pairs, None where undefined."""
    xa, ya = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    out: dict[str, float | None] = {}
    if len(xa) > 1 and len(set(x)) > 1 and len(set(y)) > 1:
        n = len(xa)
        z = lambda v: (v - v.mean()) / v.std()   # noqa: E731 - population SD (ddof 0)
        long = pd.DataFrame({"item": np.tile(np.arange(n), 2), "rater": ["x"] * n + ["y"] * n,
                             "score": np.concatenate([z(xa), z(ya)])})
        icc = pingouin.intraclass_corr(data=long, targets="item", raters="rater", ratings="score").set_index("Type")["ICC"]
        for stat, names in ICC_ROWS.items():
            out[stat] = float(next(icc[name] for name in names if name in icc.index))
        out["spearman"] = float(spearmanr(xa, ya).statistic)
    else:
        out.update(icc3k=None, icc2_1=None, spearman=None)
    if kappa:
        a, c = [half_up(v) for v in x], [half_up(v) for v in y]
        labels = list(range(min(a + c), max(a + c) + 1))   # every integer between: weights (a - b)^2
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            k = cohen_kappa_score(a, c, weights="quadratic", labels=labels)
            if set(a + c) == set(labels) and not math.isnan(k):   # no gap: its default labels give the same
                assert abs(k - cohen_kappa_score(a, c, weights="quadratic")) <= 1e-12
        out["kappa_w"] = None if math.isnan(k) else float(k)
    return out


def check_agreement(conn, target: str, pairs: dict[tuple[str, str], list]) -> int:
    """leaderboard.judge_agreement of `target` against the reference: the same rows, each value to
    1e-9, n_items; returns the values compared."""
    got = {(r[0], r[1], r[2]): r[3:] for r in conn.execute(
        "SELECT rater, dimension, statistic, value, ci_low, ci_high, n_items FROM leaderboard.judge_agreement "
        "WHERE target = ?", [target]).fetchall()}
    want = {}
    for (rater, d), ps in pairs.items():
        stats = reference_statistics([p[1] for p in ps], [p[2] for p in ps], kappa=rater not in METRICS)
        for stat, value in stats.items():
            want[(rater, d, stat)] = (value, len(ps))
    assert set(got) == set(want), (sorted(set(got) - set(want)), sorted(set(want) - set(got)))
    compared = 0
    for key, (value, n) in want.items():
        g_value, ci_low, ci_high, n_items = got[key]
        assert n_items == n, key
        assert (g_value is None) == (value is None), (key, g_value, value)
        if value is not None:
            assert abs(g_value - value) <= TOL, (key, g_value, value)
            compared += 1
        if ci_low is not None:
            assert ci_low <= ci_high, key
    return compared


def bootstrap_picks(conn, seed: int, b: int, n: int) -> list[list[int]]:
    """The resamples' item positions (0-based), as judge_agreement's documentation defines them: the
    k-th draw of resample b is hash(seed, b, k) % n, DuckDB's hash of three BIGINTs."""
    rows = conn.execute("SELECT r.b, list(CAST(hash(CAST(? AS BIGINT), r.b, s.k) % CAST(? AS BIGINT) AS BIGINT) "
                        "ORDER BY s.k) FROM range(1, ? + 1) r(b), range(?) s(k) GROUP BY r.b ORDER BY r.b",
                        [seed, n, b, n]).fetchall()
    return [list(p) for _, p in rows]


def reference_interval(conn, pairs: list[tuple], seed: int, b: int, kappa: bool = True,
                       alpha: float = 0.05) -> dict[str, tuple[float, float] | None]:
    """Percentile bootstrap interval of each statistic (numpy's default, linear, percentile of the
    resamples where the statistic is defined)."""
    x = [p[1] for p in pairs]
    y = [p[2] for p in pairs]
    values: dict[str, list[float]] = {}
    for picks in bootstrap_picks(conn, seed, b, len(pairs)):
        stats = reference_statistics([x[i] for i in picks], [y[i] for i in picks], kappa=kappa)
        for stat, v in stats.items():
            values.setdefault(stat, [])
            if v is not None:
                values[stat].append(v)
    return {stat: (tuple(np.percentile(v, [100 * alpha / 2, 100 * (1 - alpha / 2)])) if v else None)
            for stat, v in values.items()}
