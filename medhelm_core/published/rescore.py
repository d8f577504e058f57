"""Re-score published completions offline: our metrics on the published request states (completions
and judge annotations from scenario_state.json), compared with the published per-instance and
run-level stats.  No model or judge is called.

`rescore_comparison` gets one row per stat on either side, keyed by (suite, run, level, instance,
train trial, name, split, sub_split, perturbation name, occurrence); `equal` = same count and sums
within 1e-9 (or both missing).  Re-scoring is per stat, not per run: every stat that can be
recomputed from the published request states is (`status` 'recomputed'), and each one that cannot
is listed with `status` 'not_recomputed' and its cause in words: a metric class not implemented
here, HELM's device-only stats (BERTScore, SummaC) without the [summarization] extra or their
weights, token counts whose tokenizer is not on this machine (with the file and where it comes from).
A recomputed stat that differs names its cause: a change of the stat's definition in a HELM release
newer than the run (`metric_history.yaml`; the run is no newer than its release's summary date),
untokenized counts, or the published jury scores rewritten after the run.
"""
from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import Callable, Optional

import pandas as pd

from medhelm_core.catalog import Catalog, default_catalog
from medhelm_core.helm_config.deployments import load_model_registry
from medhelm_core.errors import MedhelmError
from medhelm_core.metrics.evaluate import TOKENIZER_STATS, evaluate_run_partial
from medhelm_core.store import Store, in_transaction
from medhelm_core.tokenizers import TokenizerError, UncountedTokenizer, get_tokenizer

from .metric_history import drift_causes, parse_date, with_retired_classes_replaced
from .tables import ensure_published_tables

RESCORED_COLUMNS = ["suite", "run_name", "level", "seq", "instance_id", "train_trial_index", "name", "split",
                    "sub_split", "perturbation_name", "count", "sum", "mean"]
TOKEN_STATS = {"num_prompt_tokens", "num_completion_tokens", "num_output_tokens", "max_num_output_tokens",
               "num_prompt_characters"}


@dataclass
class RescoreSummary:
    target: str
    runs: int = 0
    runs_skipped: dict[str, str] = field(default_factory=dict)
    stats: int = 0           # published stats of the re-scored runs
    recomputed: int = 0      # ... that were computed again here
    equal: int = 0
    causes: dict[str, int] = field(default_factory=dict)          # recomputed but different, per cause
    not_recomputed: dict[str, int] = field(default_factory=dict)  # per cause
    seconds: float = 0.0

    def lines(self) -> list[str]:
        out = [f"{self.target}: re-scored {self.runs} run(s) offline: {self.stats} published stats, "
               f"{self.recomputed} recomputed ({self.equal} equal), {self.stats - self.recomputed} not recomputed; "
               f"{self.seconds:.1f}s"]
        for cause, n in sorted(self.not_recomputed.items(), key=lambda kv: -kv[1]):
            out.append(f"  {n} not recomputed: {cause}")
        for cause, n in sorted(self.causes.items(), key=lambda kv: -kv[1]):
            out.append(f"  {n} differ: {cause}")
        for run, why in sorted(self.runs_skipped.items()):
            out.append(f"  not re-scored: {run}: {why}")
        return out


def _states(conn, suite: str, run_name: str) -> list[dict]:
    """The run's request states as in scenario_state.json (fields in HELM's RequestState order)."""
    rows = conn.execute("""
        SELECT instance, reference_index, request_mode, train_trial_index, output_mapping, request, result,
               num_train_instances, prompt_truncated, num_conditioning_tokens, annotations
        FROM published_request_states WHERE suite = ? AND run_name = ? ORDER BY position""",
                        [suite, run_name]).fetchall()
    states = []
    for (instance, ref_idx, mode, tti, mapping, request, result, ntrain, truncated, ncond, annotated) in rows:
        st: dict = {"instance": json.loads(instance)}
        if ref_idx is not None:
            st["reference_index"] = ref_idx
        if mode is not None:
            st["request_mode"] = mode
        st["train_trial_index"] = tti
        if mapping is not None:
            st["output_mapping"] = json.loads(mapping)
        st["request"] = json.loads(request)
        if result is not None:
            st["result"] = json.loads(result)
        st["num_train_instances"] = ntrain
        st["prompt_truncated"] = truncated
        if ncond is not None:
            st["num_conditioning_tokens"] = ncond
        if annotated is not None:
            st["annotations"] = json.loads(annotated)
        states.append(st)
    return states


published_request_states = _states   # (re-judging reads them too: medhelm_core/run/rejudge.py)


def _tokenizer(registry, deployment: Optional[str]) -> tuple[Optional[str], Optional[str]]:
    if registry is None or deployment is None:
        return None, "no model deployments (--local-path) to find the tokenizer"
    try:
        return registry.get_deployment(deployment).tokenizer_name, None
    except MedhelmError as e:
        return None, str(e)


def _run_tokenizer(registry, deployment: Optional[str]):
    """The run's tokenizer, or a stand-in and the cause when it cannot be had here."""
    name, err = _tokenizer(registry, deployment)
    if err:
        return UncountedTokenizer(None), f"token counts need the deployment's tokenizer ({err})"
    try:
        return get_tokenizer(name, registry.tokenizer_configs.get(name) if name else None), None
    except TokenizerError as e:
        return UncountedTokenizer(name), str(e)


def rescore_target(store: Store, target: str, local_path: Optional[str] = "prod_env",
                   progress: Optional[Callable[[str], None]] = None, catalog: Optional[Catalog] = None) -> RescoreSummary:
    metrics = (catalog or default_catalog()).metrics

    start = time.time()
    say = progress or (lambda m: None)
    summary = RescoreSummary(target)
    registry = None
    if local_path is not None:
        try:
            registry = load_model_registry(local_path)
        except Exception:  # noqa: BLE001 - tokenizers then unknown; reported per run
            registry = None
    with store.connect() as conn:
        ensure_published_tables(conn)
        suites = conn.execute("SELECT suites, date FROM published_targets WHERE target = ?", [target]).fetchone()
        if suites is None:
            raise MedhelmError(f"{target!r} has not been imported (run medhelm-import first)")
        made_by = parse_date(suites[1])   # the runs are no newer than their release's summary
        runs = conn.execute("""
            SELECT r.suite, r.run_name, r.run_spec FROM published_runs r
            WHERE r.suite IN (SELECT unnest(?::VARCHAR[]))
              AND EXISTS (SELECT 1 FROM published_request_states c WHERE c.suite = r.suite AND c.run_name = r.run_name)
            ORDER BY r.suite, r.run_name""", [list(dict.fromkeys(suites[0]))]).fetchall()
        rescored: list[tuple] = []
        notes: dict[tuple[str, str], str] = {}
        not_recomputed: list[tuple[str, str, str, str]] = []  # (suite, run, stat name, cause)
        drift: list[tuple[str, str, str, str]] = []  # (suite, run, stat name, a definition change since the run)
        for i, (suite, run_name, spec_text) in enumerate(runs, 1):
            spec = with_retired_classes_replaced(json.loads(spec_text), made_by)  # HELM 0.5.5-0.5.7 jury classes
            missing = [m["class_name"] for m in spec.get("metric_specs", []) if m["class_name"] not in metrics]
            tokenizer, tok_cause = _run_tokenizer(registry, (spec.get("adapter_spec") or {}).get("model_deployment"))
            run_spec = dict(spec, metric_specs=[m for m in spec.get("metric_specs", []) if m["class_name"] in metrics])
            note = []
            if missing:
                note.append("metric classes not implemented here: " + ", ".join(sorted(set(missing))))
            try:
                per_instance, stats, causes = evaluate_run_partial(run_spec, _states(conn, suite, run_name),
                                                                    tokenizer, metrics)
            except Exception as e:  # noqa: BLE001 - one run's failure is reported, the others go on
                summary.runs_skipped[f"{suite}/{run_name}"] = f"{type(e).__name__}: {e}"[:300]
                continue
            if tok_cause:
                causes.update({name: tok_cause for name in TOKENIZER_STATS})
            not_recomputed.extend((suite, run_name, name, cause) for name, cause in causes.items())
            drift.extend((suite, run_name, name, cause) for name, cause in drift_causes(spec, made_by).items())
            notes[(suite, run_name)] = "; ".join(note)
            seq = 0
            for entry in per_instance:
                for s in entry["stats"]:
                    rescored.append(_row(suite, run_name, "instance", seq, entry["instance_id"],
                                         entry["train_trial_index"], s))
                    seq += 1
            for s in stats:
                rescored.append(_row(suite, run_name, "run", seq, None, None, s))
                seq += 1
            summary.runs += 1
            if i % 10 == 0:
                say(f"re-scored {i}/{len(runs)} runs")
        frame = pd.DataFrame(rescored, columns=RESCORED_COLUMNS)
        frame = frame.astype({"seq": "int64", "count": "int64", "sum": "float64", "mean": "float64"})
        frame["train_trial_index"] = frame["train_trial_index"].astype("Int64")
        note_frame = pd.DataFrame([(s, r, n) for (s, r), n in notes.items()], columns=["suite", "run_name", "note"])
        missing_frame = pd.DataFrame(not_recomputed, columns=["suite", "run_name", "name", "cause"], dtype="string")
        drift_frame = pd.DataFrame(drift, columns=["suite", "run_name", "name", "cause"], dtype="string")
        try:
            with in_transaction(conn):
                conn.register("_rescored", frame)
                conn.register("_notes", note_frame)
                conn.register("_not_computed", missing_frame)
                conn.register("_drift", drift_frame)
                conn.execute("DELETE FROM rescore_comparison WHERE (suite, run_name) IN "
                             "(SELECT suite, run_name FROM _notes)")
                conn.execute(COMPARE_SQL)
        finally:
            conn.unregister("_rescored")
            conn.unregister("_notes")
            conn.unregister("_not_computed")
            conn.unregister("_drift")
        in_target = """(suite, run_name) IN (SELECT suite, run_name FROM published_runs
                                             WHERE suite IN (SELECT unnest(?::VARCHAR[])))"""
        target_suites = [list(dict.fromkeys(suites[0]))]
        summary.stats, summary.recomputed, summary.equal = conn.execute(f"""
            SELECT count(*), count(*) FILTER (WHERE status = 'recomputed'), count(*) FILTER (WHERE equal)
            FROM rescore_comparison WHERE published_count IS NOT NULL AND {in_target}""", target_suites).fetchone()
        for status, attr in (("recomputed", "causes"), ("not_recomputed", "not_recomputed")):
            setattr(summary, attr, dict(conn.execute(f"""
                SELECT cause, count(*) FROM rescore_comparison
                WHERE NOT equal AND status = ? AND {in_target} GROUP BY cause""",
                                                     [status, *target_suites]).fetchall()))
    summary.seconds = time.time() - start
    return summary


def _row(suite, run_name, level, seq, instance_id, tti, s: dict) -> tuple:
    name = s["name"]
    pert = name.get("perturbation") or {}
    total = s.get("sum")
    return (suite, run_name, level, seq, instance_id, tti, name["name"], name.get("split"), name.get("sub_split"),
            pert.get("name"), s.get("count"), None if total is None else float(total),
            None if s.get("mean") is None else float(s["mean"]))


COMPARE_SQL = f"""
INSERT INTO rescore_comparison
WITH runs AS (SELECT suite, run_name FROM _notes),
p AS (
    SELECT s.suite, s.run_name, 'instance' AS level, s.instance_id, s.train_trial_index, s.name, s.split, s.sub_split,
           s.perturbation_name, s.count, s.sum, s.mean,
           row_number() OVER (PARTITION BY s.suite, s.run_name, s.instance_id, s.train_trial_index, s.name, s.split,
                              s.sub_split, s.perturbation_name ORDER BY s.entry_pos, s.ordinal) AS occurrence
    FROM published_instance_stats s JOIN runs USING (suite, run_name)
    UNION ALL
    SELECT s.suite, s.run_name, 'run', NULL, NULL, s.name, s.split, s.sub_split, s.perturbation_name, s.count, s.sum,
           s.mean,
           row_number() OVER (PARTITION BY s.suite, s.run_name, s.name, s.split, s.sub_split, s.perturbation_name
                              ORDER BY s.ordinal)
    FROM published_run_stats s JOIN runs USING (suite, run_name)
),
r AS (
    SELECT suite, run_name, level, instance_id, train_trial_index, name, split, sub_split, perturbation_name,
           count, sum, mean,
           row_number() OVER (PARTITION BY suite, run_name, level, instance_id, train_trial_index, name, split,
                              sub_split, perturbation_name ORDER BY seq) AS occurrence
    FROM _rescored
),
j AS (
    SELECT coalesce(p.suite, r.suite) AS suite, coalesce(p.run_name, r.run_name) AS run_name,
           coalesce(p.level, r.level) AS level, coalesce(p.instance_id, r.instance_id) AS instance_id,
           coalesce(p.train_trial_index, r.train_trial_index) AS train_trial_index,
           coalesce(p.name, r.name) AS name, coalesce(p.split, r.split) AS split,
           coalesce(p.sub_split, r.sub_split) AS sub_split,
           coalesce(p.perturbation_name, r.perturbation_name) AS perturbation_name,
           coalesce(p.occurrence, r.occurrence) AS occurrence,
           p.count AS published_count, r.count AS rescored_count, p.sum AS published_sum, r.sum AS rescored_sum,
           p.mean AS published_mean, r.mean AS rescored_mean,
           p.suite IS NOT NULL AS in_p, r.suite IS NOT NULL AS in_r
    FROM p FULL OUTER JOIN r
      ON p.suite = r.suite AND p.run_name = r.run_name AND p.level = r.level
     AND p.instance_id IS NOT DISTINCT FROM r.instance_id
     AND p.train_trial_index IS NOT DISTINCT FROM r.train_trial_index
     AND p.name = r.name AND p.split IS NOT DISTINCT FROM r.split AND p.sub_split IS NOT DISTINCT FROM r.sub_split
     AND p.perturbation_name IS NOT DISTINCT FROM r.perturbation_name AND p.occurrence = r.occurrence
),
k AS (
    SELECT j.*, abs(published_sum - rescored_sum) AS abs_diff,
           in_p AND in_r AND published_count = rescored_count
           AND (published_sum IS NOT DISTINCT FROM rescored_sum OR abs(published_sum - rescored_sum) <= 1e-9
                OR (isnan(published_sum) AND isnan(rescored_sum))) AS equal
    FROM j
)
SELECT k.suite, k.run_name, k.level, k.instance_id, CAST(k.train_trial_index AS INTEGER), k.name, k.split, k.sub_split,
       k.perturbation_name, CAST(k.occurrence AS INTEGER), k.published_count, k.rescored_count, k.published_sum,
       k.rescored_sum, k.published_mean, k.rescored_mean, k.abs_diff, coalesce(k.equal, false),
       CASE WHEN coalesce(k.equal, false) THEN NULL
            WHEN NOT k.in_r AND m.cause IS NOT NULL THEN m.cause
            WHEN NOT k.in_r THEN 'not re-scored' || CASE WHEN n.note <> '' THEN ' (' || n.note || ')' ELSE '' END
            WHEN NOT k.in_p THEN 'not in the published stats'
            WHEN d.cause IS NOT NULL THEN d.cause
            WHEN k.name IN ({", ".join(repr(t) for t in sorted(TOKEN_STATS))}) AND n.note LIKE '%tokenizer unknown%'
                THEN 'token counts need the deployment''s tokenizer (' || n.note || ')'
            WHEN k.name LIKE '%jury%'
                THEN 'jury score differs: published per-instance jury scores were rewritten after the run (clamped to >= 1)?'
            ELSE 'value differs' END,
       CASE WHEN k.in_r THEN 'recomputed' ELSE 'not_recomputed' END
FROM k LEFT JOIN _notes n ON n.suite = k.suite AND n.run_name = k.run_name
LEFT JOIN (SELECT DISTINCT suite, run_name, name, cause FROM _not_computed) m
  ON m.suite = k.suite AND m.run_name = k.run_name AND m.name = k.name
LEFT JOIN (SELECT suite, run_name, name, min(cause) AS cause FROM _drift GROUP BY ALL) d
  ON d.suite = k.suite AND d.run_name = k.run_name AND d.name = k.name
"""
