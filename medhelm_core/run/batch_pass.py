"""The batch pass: a suite's model and judge requests through the vendors' batch APIs, before the online runs.

    report = batch_pass(ws, runs, wait=True)        # medhelm-run [--batch] [--no-wait] [--collect]
    print(report.summary_line())
    ... SuiteExecution(ws, runs_to_run_online) ...  # finds the batch answers stored: asks only the rest

What it does, in order (every step is safe to repeat, in this process or the next):

1. Outstanding batches of the ledger (a killed or `--no-wait` invocation's) are resumed
   (`lifecycle.resume`), polled once, and collected where they ended.
2. Model round (not with `collect_only`): each run's requests (`requests` layer, as the online run
   builds them) of deployments that batch (`batch: true` in the deployments settings, or every
   deployment with a batch API under `force_batch`), not answered and held by no live batch, are
   submitted, in as many batches as `batch_max_requests` and the vendor's limits need.
3. Jury round: the judge requests of the instances whose answers are stored (`JuryPlan.judge_jobs`,
   as the online jury builds them), for judge deployments that batch, go into the judges' batches;
   with `wait`, again each time a model batch is collected, so a suite takes about two batch round
   trips (model, then jury).
4. With `wait`, every live batch is polled each `batch_poll_seconds` (the shortest among them) until
   all have ended, and collected as each ends. Without, the pass returns: the state is in the ledger,
   and the next pass collects it and submits nothing twice.

An answer is stored as the online engine stores it: the same `completions` row (`engine._completion_row`)
under the same content-addressed key, in the transaction that settles the batch's items; its cost is the
batch price (online x (1 - batch_discount)). Items that expired, were cancelled or failed are left
unstored (the ledger says why): the online path, or the next batch pass, asks them again.

`ws.controls.budget` (`--budget`) counts each request's worst case (prompt tokens + max_tokens, at the
batch price) when its batch is submitted; what does not fit is not submitted (and the budget is spent
for the online path as well). The spend of a batch collected in this invocation settles its
reservation; one submitted by an earlier invocation was counted there.

A deployment without a batch API (or whose `batch` is off) is not touched: the online runs ask it.

`pending_runs` names every run a live batch holds a request of, model or judge, whoever submitted it
(judge requests are matched to runs by computing their juries' requests when the pass did not), so the
online runs after it never pay for a request a batch holds. `jury_only` is the Dagster sensor's pass
(`medhelm_dagster/batches.py`, over `batch_runs(ws)`): collect, and batch only the judge requests that
no batch ever held (nothing failed or expired is batched again, so no request cycles through batches).
"""
from __future__ import annotations

import json
import logging
import time
import weakref
from dataclasses import dataclass, field
from typing import Callable, Iterable

from medhelm_core import owners
from medhelm_core.batch import lifecycle, ledger
from medhelm_core.batch.apis import batch_api
from medhelm_core.batch.protocol import ANSWERED, FAILED_ITEM, RETRY, BatchAPIError, flavour_of
from medhelm_core.costs import record_prices
from medhelm_core.engine import Job, _completion_row
from medhelm_core.errors import MedhelmError
from medhelm_core.run import annotations as annotation_layer
from medhelm_core.run import requests as request_layer
from medhelm_core.run.entries import run_workspace
from medhelm_core.run.suite import up_to_date
from medhelm_core.run.workspace import RunRef, Workspace
from medhelm_core.store import insert_answers

log = logging.getLogger(__name__)

# Budget -> {request key: worst case reserved at submission}: the invocation's reservations, kept with its
# budget so that a later pass of the same invocation (--no-wait, then a collect) settles them.
_RESERVATIONS: "weakref.WeakKeyDictionary[object, dict[str, float]]" = weakref.WeakKeyDictionary()

MODEL, JUDGE = "model", "judge"


@dataclass
class BatchPassReport:
    """What one batch pass did; `summary_line()` is its one line."""

    submitted: list[str] = field(default_factory=list)     # ledger batch ids created at the vendor by this pass
    collected: list[str] = field(default_factory=list)     # ledger batch ids collected by this pass
    outstanding: list[str] = field(default_factory=list)   # ledger batch ids still live when the pass returned
    requests_submitted: dict[str, int] = field(default_factory=dict)  # MODEL / JUDGE -> requests batched
    answered: int = 0        # stored by this pass
    retry: int = 0           # expired, cancelled, transient error: left for the online path / next pass
    failed: int = 0          # refused as online would refuse them: the online path records the error
    invalid: int = 0         # refused before sending (HELM refuses them online too): left for the online path
    budget_skipped: int = 0  # not submitted: their worst case did not fit the budget
    spend_usd: float = 0.0   # batch price of the answers this pass stored (priced deployments)
    online_usd: float = 0.0  # what the same answers cost online
    batch_deployments: set[str] = field(default_factory=set)   # deployments this pass batched for
    online_deployments: set[str] = field(default_factory=set)  # batch asked for, but no batch API: online
    pending_runs: list[RunRef] = field(default_factory=list)   # runs with requests in a live batch
    errors: list[str] = field(default_factory=list)            # one line each, naming deployment / batch

    @property
    def requests(self) -> int:
        return sum(self.requests_submitted.values())

    def summary_line(self) -> str:
        """`batch: 2 submitted (300 requests), 2 collected: 298 answered, 2 to ask again, 0 failed, $0.0012
        (online $0.0024), 0 outstanding`."""
        parts = [f"batch: {len(self.submitted)} submitted ({self.requests:,} requests)",
                 f"{len(self.collected)} collected: {self.answered:,} answered, {self.retry:,} to ask again, "
                 f"{self.failed:,} failed"]
        money = f"${self.spend_usd:,.4f}"
        if self.online_usd:
            money += f" (online ${self.online_usd:,.4f})"
        parts.append(money)
        parts.append(f"{len(self.outstanding)} outstanding")
        if self.budget_skipped:
            parts.append(f"{self.budget_skipped:,} not submitted (budget)")
        if self.errors:
            parts.append(f"{len(self.errors)} error(s), first: {self.errors[0]}")
        return ", ".join(parts)


def batch_flavour(ws: Workspace, deployment: str, force_batch: bool = False):
    """The batch dialect (`batch.Flavour`) a deployment's requests go through: its `batch` setting on (or
    `force_batch`) and its client one with a batch API; else None (it runs online)."""
    dep = ws.registry.deployments.get(deployment)
    if dep is None or not (force_batch or ws.deployment_settings(deployment).batch):
        return None
    return flavour_of(dep)


def batch_pass(ws: Workspace, runs: Iterable[RunRef], *, wait: bool = True, collect_only: bool = False,
               jury_only: bool = False, force_batch: bool = False, max_wait_s: float | None = None,
               sleep: Callable[[float], None] = time.sleep, clock: Callable[[], float] = time.monotonic,
               poll_seconds: float | None = None, on_event: Callable[[str], None] | None = None) -> BatchPassReport:
    """Batch what the runs need from deployments that batch, then (with `wait`) wait for the batches and
    store their answers; see the module docstring.

    runs          the runs the invocation will run online afterwards (the up-to-date ones may be left
                  out: nothing of theirs is asked)
    wait          False (`--no-wait`): submit, collect what has already ended, and return
    collect_only  (`--collect`): resume, poll and collect the outstanding batches; submit nothing
    jury_only     (the Dagster sensor): collect, then submit only judge requests that no batch ever held
                  (no model request, nothing asked again: what failed or expired is the online run's)
    force_batch   (`--batch`): every deployment with a batch API batches, whatever its `batch` setting
    max_wait_s    stop waiting after this long (the batches stay in the ledger)
    sleep, clock  injectable for tests; poll_seconds overrides every deployment's batch_poll_seconds
    on_event      told one line per batch submitted or collected (the command line prints them)
    """
    return _Pass(ws, list(runs), force_batch, sleep, clock, poll_seconds, on_event, jury_only).run(
        wait, collect_only, max_wait_s)


class _Pass:
    def __init__(self, ws: Workspace, runs: list[RunRef], force_batch: bool, sleep, clock,
                 poll_seconds: float | None, on_event, jury_only: bool = False):
        self.ws, self.runs, self.force = ws, runs, force_batch
        self.sleep, self.clock, self.poll_seconds, self.on_event = sleep, clock, poll_seconds, on_event
        self.report = BatchPassReport()
        self.store = ws.store
        self._apis: dict[tuple[str, str, bool], object | None] = {}
        self._run_ws: dict[RunRef, Workspace] = {}
        self._plans: dict[RunRef, annotation_layer.JuryPlan | None] = {}
        self._model_of: dict[RunRef, str] = {}
        budget = ws.controls.budget
        self._reserved: dict[str, float] = (_RESERVATIONS.setdefault(budget, {}) if budget is not None
                                            else {})  # request key -> budget reservation (worst case)
        self._judge_keys: dict[RunRef, set[str]] = {}  # the judge requests this pass computed, per run
        self._given_up: set[str] = set()  # batches the vendor refused to show: not waited on by this pass
        self.jury_only = jury_only

    # -- the pass ---------------------------------------------------------------------------------
    def run(self, wait: bool, collect_only: bool, max_wait_s: float | None) -> BatchPassReport:
        if not self.store.exists() and collect_only:
            return self.report
        start = self.clock()
        self._settle()
        if not collect_only:
            if not self.jury_only:
                self._model_round()
            self._jury_round(None)
        while wait:
            interval = self._interval()
            if interval is None:
                break  # nothing live that this process can poll
            if max_wait_s is not None and self.clock() - start + interval > max_wait_s:
                break
            self.sleep(interval)
            models = self._settle()
            if models and not collect_only:
                self._jury_round(models)
        self._finish()
        return self.report

    def _event(self, line: str) -> None:
        log.info(line)
        if self.on_event is not None:
            self.on_event(line)

    def _error(self, line: str) -> None:
        if line not in self.report.errors:  # a vendor down for a while: said once
            log.warning(line)
            self.report.errors.append(line)

    # -- which deployments batch ------------------------------------------------------------------
    def _workspace(self, run: RunRef) -> Workspace:
        if run not in self._run_ws:
            self._run_ws[run] = run_workspace(self.ws, run)
        return self._run_ws[run]

    def _api(self, ws: Workspace, deployment: str, submitted: bool = False):
        """The batch API of a deployment, or None when it runs online (no batch API, batch off, unknown).
        `submitted`: a batch of the ledger's, collected whatever the deployment's settings say now."""
        cache = (ws.edition, deployment, submitted)
        if cache in self._apis:
            return self._apis[cache]
        api = None
        dep = ws.registry.deployments.get(deployment)
        if dep is None:
            if submitted:
                self._error(f"{deployment}: its outstanding batches cannot be collected: not a deployment of "
                            f"{ws.local_path} any more")
            self._apis[cache] = None
            return None
        flavour = flavour_of(dep) if submitted else batch_flavour(ws, deployment, self.force)
        if flavour is None:
            if ws.deployment_settings(deployment).batch:  # asked for, but its client has no batch API: online
                self.report.online_deployments.add(deployment)
        else:
            try:
                settings = ws.deployment_settings(deployment)
                api = batch_api(ws.client(deployment), flavour, settings.batch_max_requests, settings)
            except MedhelmError as e:  # no key, a missing SDK: one line (the online path says it too)
                self._error(f"{deployment}: no batch client: {e}")
        self._apis[cache] = api
        return api

    # -- rounds -----------------------------------------------------------------------------------
    def _model_round(self) -> None:
        """Submit the runs' model requests that batch."""
        groups: dict[tuple[str, str], tuple[Workspace, dict[str, dict]]] = {}
        for run in self.runs:
            try:
                run_ws = self._workspace(run)
                deployment = self._model_deployment(run)
                if deployment is None or self._api(run_ws, deployment) is None:
                    continue
                request_layer.build_requests(run_ws, run)  # as the online run builds them: the same keys
                rows = request_layer.request_rows(run_ws, run)
            except MedhelmError as e:  # e.g. its dataset is not built: the online run says so
                self._error(f"{run.run_name}: no batch: {e}")
                continue
            for _, key, dep, state in rows:
                if self._api(run_ws, dep) is not None:
                    groups.setdefault((run_ws.edition, dep), (run_ws, {}))[1][key] = json.loads(state)["request"]
        for (_, dep), (run_ws, requests) in groups.items():
            self._submit(run_ws, dep, requests, MODEL)

    def _jury_round(self, models: set[str] | None) -> None:
        """Submit the judge requests of the instances whose answers are stored (of the runs whose model
        deployment is in `models`, when given: those just collected)."""
        groups: dict[tuple[str, str], tuple[Workspace, dict[str, dict]]] = {}
        for run in self.runs:
            if models is not None and self._model_deployment(run) not in models:
                continue
            try:
                run_ws = self._workspace(run)
                plan = self._plan(run, run_ws)
                if plan is None:
                    continue
                states = annotation_layer.load_request_states(run_ws, run, with_annotations=False,
                                                              answered_only=True)
                jobs = [job for st in states for job in plan.judge_jobs(st)]  # as the online jury asks them
            except MedhelmError as e:  # the online run says it too
                self._error(f"{run.run_name}: no jury batch: {e}")
                continue
            keys = self._judge_keys.setdefault(run, set())
            for job in jobs:
                if self._api(run_ws, job.deployment) is not None:
                    groups.setdefault((run_ws.edition, job.deployment), (run_ws, {}))[1][job.key] = job.request
                    keys.add(job.key)
        for (_, dep), (run_ws, requests) in groups.items():
            self._submit(run_ws, dep, requests, JUDGE)

    def _plan(self, run: RunRef, run_ws: Workspace) -> annotation_layer.JuryPlan | None:
        """The run's jury, when one of its judge deployments batches (else None: nothing to batch)."""
        if run not in self._plans:
            plan = annotation_layer.JuryPlan(run_ws, run)
            judges = {info["model_deployment"] for j in plan.juries for info in j.judges.values()}
            self._plans[run] = plan if any(self._api(run_ws, d) is not None for d in sorted(judges)) else None
        return self._plans[run]

    def _model_deployment(self, run: RunRef) -> str | None:
        if not self._model_of:
            with self.store.connect() as conn:
                rows = conn.execute("SELECT suite, run_name, model_deployment FROM run_entries"
                                    " WHERE suite || '/' || run_name IN (SELECT unnest(?::VARCHAR[]))",
                                    [[r.key for r in self.runs]]).fetchall()
            self._model_of.update({RunRef(s, n): d for s, n, d in rows})
        return self._model_of.get(run)

    # -- submitting -------------------------------------------------------------------------------
    def _submit(self, run_ws: Workspace, deployment: str, requests: dict[str, dict], stage: str) -> None:
        with self.store.connect() as conn:
            free = ledger.unbatched(conn, list(requests))  # answered or in a live batch: not again
            if self.jury_only and free:  # a sensor never re-batches what failed or expired (no endless loop)
                seen = {k for (k,) in conn.execute("SELECT DISTINCT request_key FROM batch_items WHERE request_key"
                                                   " IN (SELECT unnest(?::VARCHAR[]))", [free]).fetchall()}
                free = [k for k in free if k not in seen]
        if not free:
            return
        api = self._api(run_ws, deployment)
        fits = self._within_budget(run_ws, deployment, api, free, requests)
        if not fits:
            return
        try:
            sub = lifecycle.submit(self.store, api, deployment, {k: requests[k] for k in fits})
        except BatchAPIError as e:  # e.g. the SDK refused before anything was reserved
            self._release(fits)
            self._error(f"{deployment}: batch not submitted: {e}")
            return
        self.report.batch_deployments.add(deployment)
        self.report.invalid += len(sub.invalid)
        self.report.requests_submitted[stage] = self.report.requests_submitted.get(stage, 0) + sub.batched_keys
        not_held = list(sub.invalid) + list(sub.skipped) + list(sub.online)
        if sub.online:  # under the vendor's fewest a batch may hold (Bedrock: 100): the online runs ask them
            least = getattr(api, "min_requests", api.flavour.min_requests)
            self._event(f"{deployment}: {len(sub.online):,} {stage} requests asked online: too few for a "
                        f"{api.flavour.name} batch (at least {least:,} of one model)")
        for batch_id, why in sub.abandoned.items():
            not_held += ledger.item_keys(self.store, batch_id)
            self._error(f"{deployment}: batch {batch_id} not created: {why}")
        self._release(not_held)
        for row in sub.submitted:
            self.report.submitted.append(row.batch_id)
            self._event(f"{deployment}: submitted batch {row.batch_id} ({row.vendor_batch_id}, "
                        f"{row.num_requests:,} {stage} requests)")
        for batch_id in sub.unacknowledged:  # created perhaps: the next settle looks for it at the vendor
            self._event(f"{deployment}: batch {batch_id} sent, its creation unconfirmed (looked for again)")

    def _within_budget(self, run_ws: Workspace, deployment: str, api, keys: list[str],
                       requests: dict[str, dict]) -> list[str]:
        """The keys whose worst case fits the budget, in order, each reserved (all of them without one)."""
        budget = run_ws.controls.budget
        if budget is None:
            return keys
        settings = run_ws.deployment_settings(deployment)
        if not settings.priced:
            self._error(f"{deployment}: --budget needs a price for it (input_per_million and output_per_million "
                        f"in the deployments settings): not batched")
            return []
        count = run_ws.token_counter(deployment)
        fits = []
        for i, key in enumerate(keys):
            req = requests[key]
            text = req.get("prompt") or "\n".join(str(m.get("content", "")) for m in req.get("messages") or [])
            out_tokens = (req.get("max_tokens") or 0) * max(1, req.get("num_completions") or 1)
            worst = settings.batch_cost(count(text), out_tokens, api.flavour.discount) or 0.0
            if not budget.reserve(worst):
                self.report.budget_skipped += len(keys) - i
                break
            self._reserved[key] = worst
            fits.append(key)
        return fits

    def _release(self, keys: Iterable[str]) -> None:
        budget = self.ws.controls.budget
        for key in keys:
            worst = self._reserved.pop(key, None)
            if worst is not None and budget is not None:
                budget.settle(worst, 0.0, paid=False)

    # -- polling and collecting -------------------------------------------------------------------
    def _settle(self) -> set[str]:
        """Resume, poll once and collect (where ended) every outstanding batch of the ledger; the
        deployments of the batches collected."""
        collected: set[str] = set()
        by_deployment: dict[str, list[ledger.BatchRow]] = {}
        for row in ledger.outstanding(self.store):
            by_deployment.setdefault(row.model_deployment, []).append(row)
        for deployment, rows in by_deployment.items():
            api = self._api(self.ws, deployment, submitted=True)
            if api is None:
                continue
            foreign = [r for r in rows if r.vendor != api.flavour.name]
            for r in foreign:  # the deployment's client changed vendor since: its batches are the old vendor's
                self._error(f"{deployment}: batch {r.batch_id} was sent to {r.vendor}, the deployment is now "
                            f"{api.flavour.name}: not collected")
                self._given_up.add(r.batch_id)
            rows = [r for r in rows if r.vendor == api.flavour.name]
            if any(not r.acknowledged for r in rows):
                try:
                    lifecycle.resume(self.store, api, deployment)
                except BatchAPIError as e:
                    self._error(f"{deployment}: resuming its batches: {e}")
                rows = [r for r in ledger.outstanding(self.store, deployment) if r.vendor == api.flavour.name]
            for row in rows:
                if not row.acknowledged or row.batch_id in self._given_up:
                    continue  # another live process is creating it, or it is unresolved (the row says why)
                try:
                    status = lifecycle.poll(self.store, api, row)
                    if not status.ended:
                        continue
                    results = lifecycle.collect(self.store, api, row.batch_id, status)
                except BatchAPIError as e:  # the batch stays outstanding (the next pass tries again)
                    self._error(f"{deployment}: batch {row.batch_id} ({row.vendor_batch_id}): {e}")
                    if not e.transient:  # e.g. 404, 401: polling again in this pass would not help
                        self._given_up.add(row.batch_id)
                    continue
                self._store_answers(api, row, results)
                collected.add(deployment)
        return collected

    def _store_answers(self, api, row: ledger.BatchRow, results) -> None:
        """The answered items as the online engine stores them (same row, same key), at the batch price,
        in the transaction that settles the batch's items."""
        deployment = row.model_deployment
        settings = self.ws.deployment_settings(deployment)
        requests = ledger.requests_of(self.store, row.batch_id)
        costs: dict[str, tuple[float | None, float | None]] = {}

        def write(conn, results) -> None:
            rows = []
            for key, outcome in results.outcomes.items():
                if outcome.state != ANSWERED:
                    continue
                att = outcome.attempt
                cost = settings.batch_cost(att.prompt_tokens, att.completion_tokens, api.flavour.discount)
                costs[key] = (cost, settings.cost(att.prompt_tokens, att.completion_tokens))
                rows.append(_completion_row(Job(key, deployment, requests[key]), att, 1, cost))
            insert_answers(conn, rows)
            record_prices(conn, {deployment: settings})  # as the online engine records the prices in use

        lifecycle.store_collected(self.store, row.batch_id, results, write)
        counts = {ANSWERED: 0, RETRY: 0, FAILED_ITEM: 0}
        budget = self.ws.controls.budget
        for key, outcome in results.outcomes.items():
            counts[outcome.state] = counts.get(outcome.state, 0) + 1
            worst = self._reserved.pop(key, None)
            if worst is not None and budget is not None:  # reserved at submission by this invocation
                answered = outcome.state == ANSWERED
                budget.settle(worst, costs.get(key, (0.0, None))[0] if answered else 0.0, paid=answered)
        spend = sum(c or 0.0 for c, _ in costs.values())
        self.report.answered += counts[ANSWERED]
        self.report.retry += counts[RETRY]
        self.report.failed += counts[FAILED_ITEM]
        self.report.spend_usd += spend
        self.report.online_usd += sum(o or 0.0 for _, o in costs.values())
        self.report.collected.append(row.batch_id)
        why = f" ({results.batch_error})" if results.batch_error else ""
        self._event(f"{deployment}: collected batch {row.batch_id} ({results.vendor_batch_id}, {results.state}"
                    f"{why}): {counts[ANSWERED]:,} answered, {counts[RETRY]:,} to ask again, "
                    f"{counts[FAILED_ITEM]:,} failed, ${spend:,.4f}")

    def _interval(self) -> float | None:
        """Seconds until the next poll (the shortest batch_poll_seconds of the live batches this process
        can poll), or None when there is none."""
        live = [r for r in ledger.outstanding(self.store)
                if r.batch_id not in self._given_up
                and self._api(self.ws, r.model_deployment, submitted=True) is not None
                and (r.acknowledged or not self._owned_by_another(r))]
        if not live:
            return None
        if self.poll_seconds is not None:
            return self.poll_seconds
        return min(self.ws.deployment_settings(r.model_deployment).batch_poll_seconds for r in live)

    @staticmethod
    def _owned_by_another(row: ledger.BatchRow) -> bool:
        """Not created yet, and its submitter still alive (or unresolved): waiting for it could be forever."""
        return row.error is not None or bool(row.owner and owners.owner_alive(row.owner))

    # -- the end ----------------------------------------------------------------------------------
    def _finish(self) -> None:
        live = ledger.outstanding(self.store) if self.store.exists() else []
        self.report.outstanding = [r.batch_id for r in live]
        if not live or not self.runs:
            return
        with self.store.connect() as conn:
            queued = {k for (k,) in conn.execute(
                "SELECT i.request_key FROM batch_items i JOIN batches b ON b.batch_id = i.batch_id"
                " WHERE i.state = ? AND b.state NOT IN (?, ?)",
                [ledger.QUEUED, ledger.COLLECTED, ledger.ABANDONED]).fetchall()}
            held = {RunRef(s, n) for s, n in conn.execute(
                "SELECT DISTINCT suite, run_name FROM requests WHERE request_key IN (SELECT unnest(?::VARCHAR[]))"
                " AND suite || '/' || run_name IN (SELECT unnest(?::VARCHAR[]))",
                [sorted(queued), [r.key for r in self.runs]]).fetchall()}
        held |= {run for run, keys in self._judge_keys.items() if keys & queued}
        with self.store.connect() as conn:  # queued keys that are no run's model request: judge requests
            judged = {k for (k,) in conn.execute(
                "SELECT request_key FROM (SELECT unnest(?::VARCHAR[]) AS request_key)"
                " WHERE request_key NOT IN (SELECT request_key FROM requests)", [sorted(queued)]).fetchall()}
        if judged - {k for keys in self._judge_keys.values() for k in keys}:
            # A jury batch this pass did not compute (an earlier invocation's, or one of judges that do not
            # batch now): every judge request of the other runs is looked at, so no online run asks one.
            for run in self.runs:
                if run not in held and judge_keys(self._workspace(run), run) & judged:
                    held.add(run)
        self.report.pending_runs = [r for r in self.runs if r in held]


def judge_keys(ws: Workspace, run: RunRef) -> set[str]:
    """The keys of every judge request of the run's answered instances (whatever its judges' batch
    settings), as the online jury asks them; empty without a jury (or when its plan cannot be made)."""
    try:
        plan = annotation_layer.JuryPlan(ws, run)
        if not plan.juries:
            return set()
        states = annotation_layer.load_request_states(ws, run, with_annotations=False, answered_only=True)
    except MedhelmError:
        return set()
    return {job.key for st in states for job in plan.judge_jobs(st)}


def batch_runs(ws: Workspace) -> list[RunRef]:
    """The registered runs not completed since, whose model or judge requests went into a vendor batch
    (what the Dagster sensor watches): those with a model request in `batch_items`, and those never
    completed (no `run_fingerprints` row) with a judge request there."""
    if not ws.store.exists():
        return []
    with ws.store.connect() as conn:
        if not conn.execute("SELECT count(*) FROM batch_items").fetchone()[0]:
            return []
        by_model = {RunRef(s, n) for s, n in conn.execute(
            "SELECT DISTINCT suite, run_name FROM requests"
            " WHERE request_key IN (SELECT request_key FROM batch_items)").fetchall()}
        unfinished = [RunRef(s, n) for s, n in conn.execute(
            "SELECT e.suite, e.run_name FROM run_entries e LEFT JOIN run_fingerprints f"
            " ON f.suite = e.suite AND f.run_name = e.run_name"
            " WHERE f.fingerprint IS NULL AND json_array_length(coalesce(e.run_spec->'annotators', '[]')) > 0"
            " ORDER BY e.suite, e.run_name").fetchall()]
    by_judge = set()
    for run in unfinished:
        keys = sorted(judge_keys(run_workspace(ws, run), run)) if run not in by_model else []
        if keys:
            with ws.store.connect() as conn:
                if conn.execute("SELECT 1 FROM batch_items WHERE request_key IN (SELECT unnest(?::VARCHAR[]))"
                                " LIMIT 1", [keys]).fetchone():
                    by_judge.add(run)
    runs = sorted(by_model | by_judge, key=lambda r: (r.suite, r.run_name))
    done = up_to_date(ws, runs)
    return [r for r in runs if r not in done]


__all__ = ["BatchPassReport", "batch_pass", "batch_runs", "judge_keys"]
