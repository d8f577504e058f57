"""Layer 4, the completions: every request of a run answered once (paid for once) by the engine."""
from __future__ import annotations

import json
from typing import Callable

from medhelm_core.clients.dspy_program import set_current_run_spec_name
from medhelm_core.costs import BudgetExhausted
from medhelm_core.engine import EngineReport, FollowUp, Job
from medhelm_core.errors import MedhelmError
from medhelm_core.run.requests import request_rows
from medhelm_core.run.workspace import RunRef, Workspace


def budget_stop(ws: Workspace, run: RunRef, report: EngineReport, what: str):
    budget = ws.controls.budget
    head = budget.message() if budget is not None else "budget reached"
    raise BudgetExhausted(f"{head} Stopped in {run.run_name}: {report.skipped} {what} not sent "
                          f"({report.new} new, {report.reused} already stored).")


def run_completions(ws: Workspace, run: RunRef, follow_up_for: Callable[[list[tuple]], FollowUp] | None = None,
                    priority: float = 0.0) -> tuple[dict[str, dict], EngineReport]:
    """Every request of the run answered (stored answers reused). `follow_up_for(request rows)`
    gives the engine's follow-up: the run's judges, asked as each answer arrives. Its requests wait
    for a deployment's slot behind those of runs with a lower `priority`."""
    rows = request_rows(ws, run)
    if not rows:
        raise MedhelmError(f"{run.run_name}: no requests built yet")
    jobs = [Job(k, dep, json.loads(state)["request"]) for _, k, dep, state in rows]
    set_current_run_spec_name(run.run_name)  # HELM's runner global (a context variable here), read by DSPy
    results, report = ws.engine(priority).run(
        jobs, follow_up=follow_up_for(rows) if follow_up_for is not None else None)
    model = report.stage("model")
    if model.budget_stopped:
        budget_stop(ws, run, model, "model requests")
    raise_for_failures(run, model, len(jobs))
    return results, report


def raise_for_failures(run: RunRef, report: EngineReport, total: int) -> None:
    if report.failed:
        first = next(iter(report.errors.values()))
        raise MedhelmError(f"{run.run_name}: {report.failed} of {total} requests failed "
                           f"(kept {report.new} new completions; rerun to retry the rest). First error: {first}")
