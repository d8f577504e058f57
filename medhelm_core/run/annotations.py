"""Layer 5, the annotations: the LLM jury (judge calls through the engine, a verdict per judge)
and the local annotators (EhrSqlAnnotator) on a run's request states."""
from __future__ import annotations

import json

from medhelm_core import jury
from medhelm_core.engine import EngineReport, FollowUp, Job
from medhelm_core.errors import MedhelmError
from medhelm_core.parts import LocalAnnotatorDef
from medhelm_core.run.completions import budget_stop
from medhelm_core.run.entries import load_run_spec
from medhelm_core.run.workspace import RunRef, Workspace, in_data_scope
from medhelm_core.store import insert_rows


def request_state(state_json: str | dict, result: dict | None, annotations: dict | None = None) -> dict:
    """A stored request state with its result (and annotations), keys in HELM's order."""
    st = json.loads(state_json) if isinstance(state_json, str) else state_json
    ordered = {k: st[k] for k in ("instance", "train_trial_index", "output_mapping", "request") if k in st}
    ordered["result"] = result
    for k in ("num_train_instances", "prompt_truncated", "num_conditioning_tokens"):
        ordered[k] = st[k]
    if annotations:
        ordered["annotations"] = annotations
    return ordered


def load_request_states(ws: Workspace, run: RunRef, with_annotations: bool = True,
                        answered_only: bool = False) -> list[dict]:
    """The run's request states with results (and annotations), in HELM's order; each answer read
    as the run's edition reads it (`Workspace.completion_view`). `answered_only`: the states whose
    answer is stored (the batch pass judges those while the rest are still in a vendor's batch),
    instead of an error for the first one without."""
    with ws.store.connect() as conn:
        entry = conn.execute("SELECT edition, deployment FROM run_entries WHERE suite = ? AND run_name = ?",
                             [run.suite, run.run_name]).fetchone()
        rows = conn.execute(
            "SELECT r.position, r.request_state, c.result, r.model_deployment, c.untruncated FROM requests r"
            " LEFT JOIN completions c ON c.request_key = r.request_key"
            " WHERE r.suite = ? AND r.run_name = ? ORDER BY r.position", [run.suite, run.run_name]).fetchall()
        ann = {}
        if with_annotations:
            for pos, annotator, annotation in conn.execute(
                    "SELECT position, annotator, annotation FROM annotations WHERE suite = ? AND run_name = ?"
                    " ORDER BY position, annotator", [run.suite, run.run_name]).fetchall():
                ann.setdefault(pos, {})[annotator] = json.loads(annotation)
    edition, recorded = entry if entry is not None else (None, None)
    run_ws, views = ws.for_edition(edition), {}
    states, unknown = [], 0
    for pos, state, result, deployment, untruncated in rows:
        if result is None:
            if answered_only:
                continue
            raise MedhelmError(f"{run.run_name}: request {pos} has no completion yet; materialize completions first")
        st, result = json.loads(state), json.loads(result)
        if deployment not in views:
            views[deployment] = run_ws.completion_view(deployment, json.loads(recorded) if recorded else None)
        view = views[deployment]
        if view is not None:  # the edition reads the answer as its client would have made it
            untruncated = json.loads(untruncated) if untruncated else None
            unknown += view.stop_cut_unknown(st["request"], untruncated)
            result = view(result, st["request"], untruncated)
        states.append(request_state(st, result, ann.get(pos)))
    if unknown:
        raise MedhelmError(f"{run.run_name}: {unknown} of its answers were stored before medhelm-build kept the text "
                           f"the API returned (completions.untruncated); {run_ws.edition} needs it to cut them at the "
                           "stop sequence as its client does: run this suite under helm-0.5.16, or delete those "
                           "completions rows to ask them again")
    return states


class JuryPlan:
    """A run's annotators: the LLM juries (judge calls through the engine, a verdict per judge)
    and the local annotators, and the judge jobs of each request state."""

    def __init__(self, ws: Workspace, run: RunRef, spec: dict | None = None):
        """`spec`: the run spec to read the annotators from (default: the registered one; a
        re-judge gives the spec with its new jury, `run.rejudge`)."""
        self.run, self.ws = run, ws
        self.juries, self.local_annotators = [], []
        for aspec in (spec if spec is not None else load_run_spec(ws, run)).get("annotators") or []:
            defn = ws.catalog.annotator(aspec, run.run_name)
            (self.local_annotators if isinstance(defn, LocalAnnotatorDef) else self.juries).append(defn)

    def judges_on_arrival(self, rows: list[tuple]) -> FollowUp | None:
        """The completion engine's follow-up for the run's request rows (position, key, deployment,
        state): an instance's judge calls, as soon as its model answer is in."""
        if not self.juries:
            return None
        states_by_key: dict[str, list[str]] = {}
        for _, key, _, state in rows:
            states_by_key.setdefault(key, []).append(state)

        def follow_up(job: Job, result: dict) -> list[Job]:
            if job.stage != "model":
                return []
            view = self.ws.completion_view(job.deployment)
            if view is not None:
                if view.needs_stored_parts(job.request):
                    return []  # what the view reads (the text before the stop cut...) is in the store: judged later
                result = view(result, job.request)
            return [j for state in states_by_key.get(job.key, ())
                    for j in self.judge_jobs(request_state(state, result))]

        return follow_up

    def judge_jobs(self, st: dict) -> list[Job]:
        """The judge calls of one request state (none when its output is empty); a question asked
        twice is one request (the engine asks each key once)."""
        jobs = []
        for j in self.juries:
            for judge, calls in (jury.judge_calls(j, st) or {}).items():
                info = j.judges[judge]
                for call in calls:
                    req = jury.judge_request(info, call.prompt)
                    jobs.append(Job(self.ws.request_key(info["model_deployment"], req), info["model_deployment"], req,
                                    stage="judge"))
        return jobs


@in_data_scope
def run_annotations(ws: Workspace, run: RunRef) -> dict:
    plan = JuryPlan(ws, run)
    states = load_request_states(ws, run, with_annotations=False)
    jobs = [job for st in states for job in plan.judge_jobs(st)]
    results, report = ws.engine().run(jobs) if jobs else ({}, EngineReport())
    return write_annotations(ws, plan, states, results, report)


def write_annotations(ws: Workspace, plan: JuryPlan, states: list[dict], results: dict,
                      report: EngineReport) -> dict:
    """Verdicts and annotations of every request state from the judges' answers in `results`."""
    run = plan.run
    if report.budget_stopped:
        budget_stop(ws, run, report, "judge requests")  # before writing: no verdict from a call never made
    ann_rows, verdict_rows, counts = annotation_rows(ws, plan, states, results, report)
    with ws.store.transaction() as conn:
        conn.execute("DELETE FROM annotations WHERE suite = ? AND run_name = ?", [run.suite, run.run_name])
        conn.execute("DELETE FROM judge_verdicts WHERE suite = ? AND run_name = ?", [run.suite, run.run_name])
        insert_annotation_rows(conn, ann_rows, verdict_rows)
    return {"annotated": len(ann_rows), "judge_calls_new": report.new, "judge_calls_reused": report.reused,
            "statuses": counts, "report": report}


def insert_annotation_rows(conn, ann_rows: list[tuple], verdict_rows: list[tuple]) -> None:
    """`annotation_rows`' rows into `annotations` and `judge_verdicts` (the caller's transaction)."""
    insert_rows(conn, "annotations", ["suite", "run_name", "position", "instance_id", "annotator", "annotation"],
                ann_rows)
    insert_rows(conn, "judge_verdicts", ["suite", "run_name", "position", "instance_id", "annotator", "judge",
                                         "judge_deployment", "status", "request_key", "raw_text", "parsed",
                                         "error"], verdict_rows)


def annotation_rows(ws: Workspace, plan: JuryPlan, states: list[dict], results: dict,
                    report: EngineReport) -> tuple[list[tuple], list[tuple], dict[str, int]]:
    """The `annotations` and `judge_verdicts` rows of the run's request states from the judges'
    answers in `results`, and the count of each verdict status; nothing is written."""
    run = plan.run
    ann_rows, verdict_rows = [], []
    counts: dict[str, int] = {}
    for pos, st in enumerate(states):
        iid = st["instance"]["id"]
        for j in plan.juries:
            calls = jury.judge_calls(j, st)
            verdicts: dict[str, list[jury.Verdict]] = {}
            keyed: list[str | None] = []  # the request key of each verdict, in row order
            if calls is None:
                for name in j.judges:
                    verdicts[name] = [jury.Verdict(name, jury.SKIPPED_EMPTY_OUTPUT)]
                    keyed.append(None)
            else:
                for judge, judge_calls in calls.items():
                    info = j.judges[judge]
                    view = ws.completion_view(info["model_deployment"])
                    verdicts[judge] = []  # a judge with no question is still one the annotator asked
                    for call in judge_calls:
                        req = jury.judge_request(info, call.prompt)
                        key = ws.request_key(info["model_deployment"], req)
                        keyed.append(key)
                        result = results.get(key)
                        if result is not None and view is not None:
                            result = view(result, req)
                        if result is None or not result.get("success"):
                            err = report.errors.get(key) or (result or {}).get("error") or "request failed"
                            v = jury.Verdict(judge, jury.REQUEST_FAILED, error=err)
                        else:
                            v = jury.parse_judge_output(j, judge, result["completions"][0]["text"],
                                                        ws.switches.jury_validation)
                        v.call = call.label
                        verdicts[judge].append(v)
            for v, key in zip((v for vs in verdicts.values() for v in vs), keyed):
                counts[v.status] = counts.get(v.status, 0) + 1
                verdict_rows.append((run.suite, run.run_name, pos, iid, jury.verdict_annotator(j, v.call), v.judge,
                                     j.judges[v.judge]["model_deployment"], v.status, key, v.raw_text,
                                     json.dumps(v.parsed) if v.parsed is not None else None, v.error))
            outcome = jury.jury_annotation(j, st, calls, verdicts)
            for judge, summary in outcome.summaries.items():  # beside HELM's annotation, never in it
                verdict_rows.append((run.suite, run.run_name, pos, iid, j.name, judge,
                                     j.judges[judge]["model_deployment"], jury.SUMMARY, None, None,
                                     json.dumps(summary, ensure_ascii=False), None))
            ann_rows.append((run.suite, run.run_name, pos, iid, j.name,
                             json.dumps(outcome.annotation, ensure_ascii=False)))
    for pos, st in enumerate(states):  # local annotators (e.g. EhrSqlAnnotator): no model, no verdicts
        for la in plan.local_annotators:
            ann_rows.append((run.suite, run.run_name, pos, st["instance"]["id"], la.name,
                             json.dumps(la.annotate(st), ensure_ascii=False)))
    return ann_rows, verdict_rows, counts
