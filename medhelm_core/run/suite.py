"""The runs of one invocation, all at once: every deployment busy, each run's jury pipelined.

`run_suite` executes many runs concurrently (a thread per active run) through one completion
engine: the process-wide limiter of each deployment (`ratelimit.limiter_for`) admits the requests
of every run that uses it, so a deployment's `max_concurrency`, RPM/TPM and back-off hold for the
whole suite and no deployment idles while work for it exists. Within a run, an instance's judge
calls are sent as soon as its model answer is in (`CompletionEngine.run(..., follow_up=...)`);
scoring and writing a run's files happen when that run is complete, whatever the others do.

A run whose inputs did not change since it last completed (its run spec, its dataset's key, its
deployment and the code: `run_fingerprint`) and whose files are on disk is reused without touching
its rows: that is what makes a rerun with nothing new cost almost nothing per run.

Run order never changes a number or a file: each run's rows and files depend only on its own
requests and on the content-addressed answers.
"""
from __future__ import annotations

import contextvars
import json
import sys
import threading
import time
from concurrent.futures import as_completed
from dataclasses import dataclass, field
from typing import Iterable, Iterator

from medhelm_core.costs import run_cost
from medhelm_core.editions import DEFAULT_EDITION
from medhelm_core.engine import EngineReport
from medhelm_core.errors import MedhelmError
from medhelm_core.helm_files import run_dir
from medhelm_core.run import annotations as annotation_layer
from medhelm_core.run import checks as run_checks
from medhelm_core.run import completions as completion_layer
from medhelm_core.run import datasets as dataset_layer
from medhelm_core.run import requests as request_layer
from medhelm_core.run import scores as score_layer
from medhelm_core.run import scoring
from medhelm_core.run.entries import run_workspace, scenario_partition_key, spec_judges
from medhelm_core.run.lanes import RunLines
from medhelm_core.run.workspace import RunRef, Workspace
from medhelm_core.code_digest import code_digest
from medhelm_core.store import stable_hash, upsert

STAGES = ("requests", "completions", "annotations", "scores")


@dataclass
class RunOutcome:
    """What happened to one run: the stages it completed, or the error that stopped it."""

    run: RunRef
    stages: list[str] = field(default_factory=list)
    error: BaseException | None = None
    reused: bool = False          # up to date: nothing was done
    started: bool = True          # False: not started (the budget was already spent)
    model: EngineReport = field(default_factory=EngineReport)
    judge: EngineReport = field(default_factory=EngineReport)
    info: dict = field(default_factory=dict)  # per stage: what the layer returned
    checks: dict = field(default_factory=dict)  # check name -> (passed, metadata), for the stages done
    cost: dict = field(default_factory=dict)    # the run's `run_costs` row (all its calls, reused ones too)
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return self.error is None and self.started

    @property
    def new_calls(self) -> int:
        return self.model.new + self.judge.new

    @property
    def cost_usd(self) -> float:
        return self.model.cost_usd + self.judge.cost_usd


def run_fingerprint(ws: Workspace, spec: dict, scenario_key: str | None) -> str:
    """What a completed run's rows and files depend on besides the content-addressed answers:
    its run spec, its dataset (spec + data-file bytes), its deployment, its edition, and the code."""
    dep = ws.deployment(spec["adapter_spec"]["model_deployment"])
    return stable_hash({"run_spec": spec, "scenario_key": scenario_key, "deployment": dep.model_dump(mode="json"),
                        "edition": ws.edition, "code": code_digest(ws.benchmark_paths)})[:24]


def _current_fingerprints(ws: Workspace, runs: list[RunRef]) -> tuple[dict[RunRef, str], dict[RunRef, str]]:
    """(fingerprint now, fingerprint stored at the run's last completion) for each run."""
    with ws.store.connect() as conn:
        rows = conn.execute(
            "SELECT e.suite, e.run_name, e.run_spec, f.fingerprint, e.edition FROM run_entries e"
            " LEFT JOIN run_fingerprints f ON f.suite = e.suite AND f.run_name = e.run_name"
            " WHERE e.suite || '/' || e.run_name IN (SELECT unnest(?::VARCHAR[]))",
            [[r.key for r in runs]]).fetchall()
        datasets = dict(conn.execute("SELECT partition_key, scenario_key FROM scenario_specs").fetchall())
    now, stored = {}, {}
    for suite, name, spec_json, fp, edition in rows:
        run, spec, run_ws = RunRef(suite, name), json.loads(spec_json), ws.for_edition(edition)
        partition = scenario_partition_key(spec["scenario_spec"], run_ws.edition)
        now[run] = run_fingerprint(run_ws, spec, datasets.get(partition))
        if fp is not None:
            stored[run] = fp
    return now, stored


def up_to_date(ws: Workspace, runs: list[RunRef]) -> set[RunRef]:
    """Runs completed with the same inputs as now, whose HELM files are on disk."""
    if not runs:
        return set()
    now, stored = _current_fingerprints(ws, runs)
    return {r for r in runs if stored.get(r) is not None and stored[r] == now.get(r)
            and (run_dir(ws.output_path, r.suite, r.run_name) / "stats.json").exists()}


@dataclass
class SuitePlan:
    """What an invocation of these run entries has to do, decided once. `fresh` is the runs that are
    up to date, known before anything is registered when every run is registered with exactly these
    specs and every dataset is current (registering changes nothing then); else None, and the
    execution decides after registration and the datasets (`SuiteExecution`)."""

    runs: list[RunRef]
    fresh: set[RunRef] | None

    @property
    def nothing_to_do(self) -> bool:
        """Every run is up to date: no call, nothing to register, no Dagster run."""
        return self.fresh is not None and self.fresh == set(self.runs)


def plan_suite(ws: Workspace, suite_name: str, entries: list[tuple]) -> SuitePlan:
    """The plan of these (run entry, run spec) pairs of `suite_name`."""
    runs = [RunRef(suite_name, spec["name"]) for _, spec in entries]
    if not ws.store.exists():
        return SuitePlan(runs, None)
    with ws.store.connect() as conn:
        stored = dict(conn.execute("SELECT run_name, run_spec FROM run_entries WHERE suite = ?"
                                   " AND coalesce(edition, ?) = ?", [suite_name, DEFAULT_EDITION, ws.edition]).fetchall())
    if any(spec["name"] not in stored or json.loads(stored[spec["name"]]) != spec for _, spec in entries):
        return SuitePlan(runs, None)
    partitions = {scenario_partition_key(spec["scenario_spec"], ws.edition) for _, spec in entries}
    if not all(dataset_layer.is_current(ws, key) for key in partitions):
        return SuitePlan(runs, None)
    return SuitePlan(runs, up_to_date(ws, runs))


def _record_fingerprint(ws: Workspace, run: RunRef) -> None:
    now, _ = _current_fingerprints(ws, [run])
    with ws.store.transaction() as conn:
        upsert(conn, "run_fingerprints", ["suite", "run_name"], ["suite", "run_name", "fingerprint"],
               [(run.suite, run.run_name, now[run])])


def _forget_fingerprint(ws: Workspace, run: RunRef) -> None:
    def forget(conn) -> None:   # one small write of each starting run: in a shared transaction
        conn.execute("DELETE FROM run_fingerprints WHERE suite = ? AND run_name = ?", [run.suite, run.run_name])

    ws.store.combined(forget)


def run_one(ws: Workspace, run: RunRef, stages: Iterable[str] = STAGES, priority: float = 0.0,
            scorer=None, dataset: str | None = None, requests_built=None) -> RunOutcome:
    """The selected stages of one run; errors are returned in the outcome, not raised. Its
    requests wait for a deployment's slot behind those of runs with a lower `priority`; its
    scores are computed by `scorer` (`scoring.Scorer`: in a worker process) when given; its
    `dataset` (partition key) is built first when given (the first of its runs builds it);
    `requests_built(run)` is told when its requests are built."""
    stages = [s for s in STAGES if s in set(stages)]
    out = RunOutcome(run)
    start = time.time()
    budget = ws.controls.budget
    if budget is not None and budget.exhausted:
        out.started = False
        return out
    try:
        ws = run_workspace(ws, run)  # the edition the run was registered under
        if stages == list(STAGES):
            _forget_fingerprint(ws, run)  # a run stopped half-way is never taken as up to date
        if dataset is not None:
            dataset_layer.build_dataset(ws, dataset, for_run=True)
        if "requests" in stages:
            out.info["requests"] = request_layer.build_requests(ws, run)
            out.stages.append("requests")
            if requests_built is not None:
                requests_built(run)
        if "completions" in stages:
            _completions_and_jury(ws, run, out, with_jury="annotations" in stages, priority=priority)
        elif "annotations" in stages:
            info = annotation_layer.run_annotations(ws, run)
            out.judge, out.info["annotations"] = info["report"], info
            out.stages.append("annotations")
        if "scores" in stages:
            if scorer is not None:
                computed, directory = scorer.score(ws, run)
            else:
                computed = score_layer.compute_stats(ws, run)
                directory = score_layer.write_files(ws, run, computed)
            # Only the counts are kept: outcomes of a whole suite stay small (memory follows the work in flight).
            out.info["scores"] = {k: computed[k] for k in ("per_instance_rows", "run_stats", "instances")}
            out.info["scores"]["directory"] = directory
            out.stages.append("scores")
    except BaseException as e:  # noqa: BLE001 - reported per run; the suite goes on
        out.error = e
        if not isinstance(e, Exception):
            raise
    complete = stages == list(STAGES) and out.error is None
    if out.stages or complete:
        try:
            # One turn of the store for the run's last rows and reads (the uses inside are nested, so
            # free): at a suite's width every turn of the store's one writer is waited for.
            with ws.store.connect():
                if complete:
                    _record_fingerprint(ws, run)
                # What the run's materializations report, asked here (in the run's thread) rather than
                # by the thread that records them, so recording a run never waits on the store.
                if out.stages:
                    out.checks = {c.name: c.evaluate(ws, run) for c in run_checks.RUN_CHECKS if c.after in out.stages}
                    out.cost = run_cost(ws, run.suite, run.run_name)
        except Exception as e:  # noqa: BLE001
            out.error = out.error or e
    out.seconds = time.time() - start
    return out


def _completions_and_jury(ws: Workspace, run: RunRef, out: RunOutcome, with_jury: bool, priority: float) -> None:
    plan = annotation_layer.JuryPlan(ws, run) if with_jury else None
    results, report = completion_layer.run_completions(
        ws, run, follow_up_for=plan.judges_on_arrival if plan is not None else None, priority=priority)
    out.model, out.judge = report.stage("model"), report.stage("judge")
    out.info["completions"] = out.model
    out.stages.append("completions")
    if plan is not None:
        states = annotation_layer.load_request_states(ws, run, with_annotations=False)
        # Judge calls the follow-ups could not start (a text the edition cuts itself): asked now.
        missing = [j for st in states for j in plan.judge_jobs(st)
                   if j.key not in results and j.key not in out.judge.errors]
        if missing and not out.judge.budget_stopped:
            more, extra = ws.engine(priority).run(missing)
            results = {**results, **more}
            out.judge.absorb(extra)
        out.info["annotations"] = annotation_layer.write_annotations(ws, plan, states, results, out.judge)
        out.stages.append("annotations")


# A run thread that comes back from a DuckDB call (which releases the GIL) waits up to the
# interpreter's switch interval for the GIL, while it holds the store: with dozens of run threads,
# every use of the store pays that, and the store is the one resource all runs share. 0.5 ms instead
# of CPython's 5 ms shortens that wait tenfold (issue 40: the calls of 182 runs, 84 -> 58 s).
SWITCH_INTERVAL_S = 0.0005
_switch = {"users": 0, "before": None}
_switch_lock = threading.Lock()


def _shorten_switch_interval() -> None:
    with _switch_lock:
        if _switch["users"] == 0:
            _switch["before"] = sys.getswitchinterval()
            sys.setswitchinterval(min(SWITCH_INTERVAL_S, _switch["before"]))
        _switch["users"] += 1


def _restore_switch_interval() -> None:
    with _switch_lock:
        _switch["users"] -= 1
        if _switch["users"] == 0:
            sys.setswitchinterval(_switch["before"])


def default_parallel_runs(facts: dict[RunRef, tuple[str, tuple[str, ...]]]) -> int:
    """Enough runs at once for every deployment to have two runs' work queued."""
    return max(4, min(64, 2 * len({dep for dep, _ in facts.values()})))


def _run_facts(ws: Workspace, runs: list[RunRef]) -> dict[RunRef, tuple[str, tuple[str, ...]]]:
    """(model deployment, the judge deployments its annotators ask) of each run, in one query."""
    with ws.store.connect() as conn:
        rows = conn.execute(
            "SELECT suite, run_name, model_deployment, run_spec->'annotators', edition"
            " FROM run_entries WHERE suite || '/' || run_name IN (SELECT unnest(?::VARCHAR[]))",
            [[r.key for r in runs]]).fetchall()
    facts = {}
    for s, n, dep, annotators, edition in rows:
        annotators = json.loads(annotators) if annotators else []
        try:
            judges = tuple(sorted({d for d, _ in spec_judges(ws.for_edition(edition or DEFAULT_EDITION),
                                                             {"annotators": annotators}, n)}))
        except MedhelmError:   # the run says so itself when it starts; here only its place in line
            judges = ("?",) if annotators else ()
        facts[RunRef(s, n)] = (dep or "", judges)
    return facts


def lane_runs(order: list[RunRef], facts: dict[RunRef, tuple[str, tuple[str, ...]]]) -> list[RunRef]:
    """The runs of `order` that never wait on a judge, on deployments no judge uses (`lanes`):
    none when the suite has no jury."""
    judge_deployments = {j for _, judges in facts.values() for j in judges}
    return [r for r in order if judge_deployments and not facts[r][1] and facts[r][0] not in judge_deployments]


def schedule(runs: list[RunRef], facts: dict[RunRef, tuple[str, tuple[str, ...]]]) -> list[RunRef]:
    """The order runs start in. First the runs that load the judges' deployments, the suite's
    busiest: the runs with a jury (their judges are the longest chain), each deployment's before
    its runs without, and the runs of the judges' own models (work those deployments can do while
    the jury's model answers are still coming, instead of after the last judge call, when nothing
    else is left for them); then the rest. Within each group the deployments are taken in turn, so
    every deployment gets work at once."""
    judge_deployments = {j for _, judges in facts.values() for j in judges}

    def first(r: RunRef) -> bool:
        dep, judges = facts.get(r, ("", ()))
        return bool(judges) or dep in judge_deployments

    ordered = []
    for group in (True, False):
        by_dep: dict[str, list[RunRef]] = {}
        for r in sorted((r for r in runs if first(r) == group), key=lambda r: not facts.get(r, ("", ()))[1]):
            by_dep.setdefault(facts.get(r, ("", ()))[0], []).append(r)
        queues = list(by_dep.values())
        while queues:
            ordered += [q.pop(0) for q in queues]
            queues = [q for q in queues if q]
    return ordered


class SuiteExecution:
    """Runs of one invocation, started when this is made (a thread per active run: `parallel`
    of them, else two per deployment plus one per lane deployment, `lanes`); `outcomes()` yields
    each outcome as its run ends, up-to-date runs first, without any work. Made before the Dagster
    run that records the runs (`medhelm-run`), it keeps every endpoint busy while Dagster plans
    that run (`RunControls.started`, taken by its step).
    `datasets`: the runs whose dataset (partition key) is not built yet: each builds it first (the
    first of them; the others wait for it), so runs start before every dataset is built."""

    def __init__(self, ws: Workspace, runs: list[RunRef], stages: Iterable[str] = STAGES,
                 parallel: int | None = None, fresh: set[RunRef] | None = None,
                 datasets: dict[RunRef, str] | None = None):
        self.stages = [s for s in STAGES if s in set(stages)]
        self.runs = list(runs)
        datasets = datasets or {}
        if self.stages != list(STAGES):
            fresh = set()  # a subset of the layers: each one asked for is done again
        elif fresh is None:  # not decided by the caller's plan (`plan_suite`)
            fresh = up_to_date(ws, self.runs) - set(datasets)  # a dataset to build: its runs are not
        self.reused = [RunOutcome(run, stages=list(self.stages), reused=True) for run in self.runs if run in fresh]
        todo = [r for r in self.runs if r not in fresh]
        self.futures: list = []
        self._lines: RunLines | None = None
        self._scorer = None
        self._held = None
        self._switched = False
        self._closed = False
        if not todo:
            return
        facts = _run_facts(ws, todo)
        order = schedule(todo, facts)
        # Runs at once as asked; else two per deployment, and the lane's runs on threads of their own.
        lane = [] if parallel or ws.controls.parallel_runs else lane_runs(order, facts)
        parallel = parallel or ws.controls.parallel_runs or default_parallel_runs(facts)
        self._held = ws.store.held()
        self._held.__enter__()
        _shorten_switch_interval()
        self._switched = True
        try:
            processes = scoring.default_processes()
            if "scores" in self.stages and processes and len(todo) >= scoring.MIN_RUNS:
                self._scorer = scoring.Scorer(ws, processes)
            in_lane = set(lane)
            general = [r for r in order if r not in in_lane]
            gate = threading.Event()
            first_wave = set(general[:parallel])
            built: set[RunRef] = set()

            def requests_built(run: RunRef) -> None:  # the lane waits for the first jury runs to reach their judges
                if run in first_wave:
                    built.add(run)
                    if len(built) == len(first_wave):
                        gate.set()

            # Each run in a copy of this context: the data-scope root and the current run name are context variables.
            contexts = {run: contextvars.copy_context() for run in order}
            position = {run: i for i, run in enumerate(order)}

            def call(run: RunRef) -> RunOutcome:
                try:
                    return contexts[run].run(run_one, ws, run, self.stages, position[run], self._scorer,
                                             datasets.get(run), requests_built)
                finally:
                    requests_built(run)

            self._lines = RunLines(general, lane, parallel, len({facts[r][0] for r in lane}), call, gate)
            self.futures = list(self._lines.futures.values())
        except BaseException:
            self.close()
            raise

    def take_reused(self) -> list[RunOutcome]:
        """The up-to-date runs' outcomes, taken out: what is left is the runs being run (those a
        Dagster run over their cells takes over, `take_started`)."""
        reused, self.reused = self.reused, []
        done = {o.run for o in reused}
        self.runs = [r for r in self.runs if r not in done]
        return reused

    def matches(self, runs: Iterable[RunRef], stages: Iterable[str]) -> bool:
        return set(self.runs) == set(runs) and self.stages == [s for s in STAGES if s in set(stages)]

    def outcomes(self) -> Iterator[RunOutcome]:
        yield from self.reused
        try:
            for f in as_completed(self.futures):
                yield f.result()
        finally:
            self.close()

    def close(self) -> None:
        """Cancel the runs not started; wait for those running (what they paid for is kept)."""
        if self._closed:
            return
        self._closed = True
        try:
            if self._lines is not None:
                self._lines.close()
        finally:
            try:
                if self._scorer is not None:
                    self._scorer.close()
            finally:
                if self._switched:
                    _restore_switch_interval()
                if self._held is not None:
                    self._held.__exit__(None, None, None)


def take_started(controls, runs: Iterable[RunRef], stages: Iterable[str]) -> SuiteExecution | None:
    """The execution the invocation started before its Dagster run (`RunControls.started`) when it
    is of exactly these runs and stages; else None (one of other runs is closed first)."""
    started, controls.started = getattr(controls, "started", None), None
    if started is None:
        return None
    if started.matches(runs, stages):
        return started
    started.close()
    return None


def run_suite(ws: Workspace, runs: list[RunRef], stages: Iterable[str] = STAGES,
              parallel: int | None = None) -> Iterator[RunOutcome]:
    """Run every run (its selected stages), many at once; yields each outcome when its run ends.
    Runs that are up to date are yielded first, without any work."""
    yield from SuiteExecution(ws, runs, stages, parallel).outcomes()


def summary_line(outcomes: list[RunOutcome]) -> str:
    """`N runs: R reused, C new calls, $X` (R: up to date, nothing done)."""
    reused = sum(o.reused for o in outcomes)
    calls = sum(o.new_calls for o in outcomes)
    cost = sum(o.cost_usd for o in outcomes)
    return f"{len(outcomes)} runs: {reused} reused, {calls} new calls, ${cost:,.2f}"
