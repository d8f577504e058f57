"""Checks of one run's rows, where data can go wrong: each is a SQL question about one run, and
the Dagster asset checks of the per-run layers (evaluated when the run's layer is done)."""
from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Callable

from medhelm_core.run.workspace import RunRef, Workspace


@dataclass(frozen=True)
class RunCheck:
    name: str
    asset: str          # the per-run asset it checks
    after: str          # the stage (run.suite.STAGES) whose rows it reads
    description: str
    evaluate: Callable[[Workspace, RunRef], tuple[bool, dict]]
    severity: str = "ERROR"  # or "WARN"


def every_request_answered(ws: Workspace, run: RunRef) -> tuple[bool, dict]:
    with ws.store.connect() as conn:
        total, answered, errored = conn.execute(
            "SELECT count(*), count(c.request_key),"
            " count(*) FILTER (WHERE c.request_key IS NULL AND e.request_key IS NOT NULL)"
            " FROM requests r LEFT JOIN completions c USING (request_key)"
            " LEFT JOIN (SELECT DISTINCT request_key FROM completion_errors) e USING (request_key)"
            " WHERE r.suite = ? AND r.run_name = ?", [run.suite, run.run_name]).fetchone()
    silent = total - answered - errored
    return silent == 0 and total > 0, {"requests": total, "answered": answered, "errors": errored,
                                       "unaccounted": silent}


def judges_all_ok(ws: Workspace, run: RunRef) -> tuple[bool, dict]:
    with ws.store.connect() as conn:
        rows = dict(conn.execute("SELECT status, count(*) FROM judge_verdicts WHERE suite = ? AND run_name = ?"
                                 " GROUP BY status", [run.suite, run.run_name]).fetchall())
    failed = rows.get("parse_failed", 0) + rows.get("request_failed", 0)
    return failed == 0, {"statuses": json.dumps(rows), "failed": failed}


def stats_count_equals_instances(ws: Workspace, run: RunRef) -> tuple[bool, dict]:
    with ws.store.connect() as conn:
        expected = dict(conn.execute(
            "SELECT split, count(DISTINCT instance_id) FROM requests WHERE suite = ? AND run_name = ?"
            " GROUP BY split", [run.suite, run.run_name]).fetchall())
        got = dict(conn.execute(
            "SELECT split, mean FROM run_stats WHERE suite = ? AND run_name = ? AND name = 'num_instances'"
            " AND perturbation IS NULL", [run.suite, run.run_name]).fetchall())
    passed = bool(expected) and all(got.get(s) == n for s, n in expected.items())
    return passed, {"expected": json.dumps(expected), "num_instances": json.dumps(got)}


RUN_CHECKS = [
    RunCheck("every_request_answered", "completions", "completions",
             "Every sampled request has a completion or an explicit recorded error.", every_request_answered),
    RunCheck("judges_all_ok", "annotations", "annotations",
             "Judges that failed (request or parse) are counted; HELM would silently default them.", judges_all_ok,
             severity="WARN"),
    RunCheck("stats_count_equals_instances", "run_stats", "scores",
             "num_instances in stats.json equals the number of evaluated instances per split.",
             stats_count_equals_instances),
]
