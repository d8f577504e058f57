"""`medhelm-run`: HELM's helm-run, executed as the code location's declared jobs (not a second code
path). The confs are expanded once; whether a run is up to date is decided once, by the run layer
(`run.suite.plan_suite`, else the execution it starts)."""
from __future__ import annotations

import argparse
import gc
import os
import sys
import warnings

from medhelm_cli.errors import one_line_errors
from medhelm_core.catalog import benchmark_paths_from_env
from medhelm_core.errors import MedhelmError, one_line, root_error
from medhelm_core.options import check_amount, check_count, check_input_folder, check_output_folder
from medhelm_core.selections import RunSelection, add_arguments, from_arguments
from medhelm_core.storage import add_storage_argument

PROG = "medhelm-run"
BUDGET_EXIT = 3  # stopped at --budget: everything paid is stored, rerun to continue
WAITING_EXIT = 4  # stopped waiting with runs still in a vendor batch: rerun (or --collect) to continue


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=PROG, description="Run MedHELM run entries (as helm-run does).")
    add_arguments(parser, RunSelection, required=("suite", "max_eval_instances"), defaults={"conf_paths": []},
                  aliases={"conf_paths": ["-c"], "run_entries": ["-r"]})
    parser.add_argument("--output-path", "-o", default="benchmark_output")
    add_storage_argument(parser)
    parser.add_argument("--local-path", default="prod_env", help="HELM prod_env (model_deployments.yaml, credentials.conf)")
    parser.add_argument("--num-threads", "-n", type=int, default=8)
    parser.add_argument("--benchmark-path", action="append", default=list(benchmark_paths_from_env()), metavar="DIR",
                        help="a benchmark folder of your own (or a folder of them), beside the built-in ones; "
                             "repeatable (default: $MEDHELM_BENCHMARK_PATH)")
    parser.add_argument("--dry-run", action="store_true", help="print the run names and run nothing")
    parser.add_argument("--offline", action="store_true", default=os.environ.get("MEDHELM_OFFLINE") == "1",
                        help="refuse, before any call, every deployment (model or judge) that is not on this "
                             "machine (loopback) (default: $MEDHELM_OFFLINE=1)")
    parser.add_argument("--estimate-cost", action="store_true",
                        help="print the tokens and dollars the runs would cost (model and judge calls; stored "
                             "completions cost nothing) and send nothing")
    parser.add_argument("--budget", type=float, default=None, metavar="USD",
                        help="spend at most USD on new completions in this invocation: no request is sent once "
                             "spend + the worst case of requests in flight would exceed it; rerun to continue")
    parser.add_argument("--progress", action=argparse.BooleanOptionalAction, default=None,
                        help="one progress display on stderr: per deployment, in flight / limit, requests/s, "
                             "done / total and cost (default: when stderr is a terminal)")
    batch = parser.add_argument_group("vendor batches", "half price, answered within 24 hours (OpenAI, Azure "
                                      "OpenAI, Anthropic); deployments with `batch: true` in "
                                      "medhelm_deployments.yaml go by batch without --batch")
    batch.add_argument("--batch", action="store_true",
                       help="send the model's and the judges' requests through the vendors' batch APIs for every "
                            "deployment that has one (the others run online in the same invocation)")
    batch.add_argument("--no-wait", action="store_true",
                       help="submit the batches, run online what no batch holds, and exit; rerun (or --collect) "
                            "later to collect them")
    batch.add_argument("--collect", action="store_true",
                       help="only collect the outstanding batches (waiting for them unless --no-wait); submit "
                            "nothing, run nothing")
    batch.add_argument("--max-wait", type=float, default=None, metavar="SECONDS",
                       help="stop waiting for batches after SECONDS: the runs still in one are left for the next "
                            f"invocation (exit {WAITING_EXIT}) (default: until every batch has ended, at most the "
                            "vendors' 24 hours)")
    return parser


def run_main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    # --judges given (its default is the Stanford jury): a suite judged by another jury is re-judged
    args.judges_given = any(a == "--judges" or a.startswith("--judges=")
                            for a in (sys.argv[1:] if argv is None else argv))
    warnings.filterwarnings("ignore")
    return one_line_errors(PROG, lambda: _run(_checked(args)))


def _checked(args):
    """The options a selection does not carry, checked before anything is written (the selection's
    own: `options.check_run_selection`, when it is expanded)."""
    check_output_folder("--output-path", args.output_path)
    check_input_folder("--local-path", args.local_path)
    check_count("--num-threads", args.num_threads)
    check_amount("--budget", args.budget)
    check_amount("--max-wait", args.max_wait)
    for path in args.benchmark_path:
        check_input_folder("--benchmark-path", path, must_exist=True)
    _check_batch_flags(args)
    return args


def _check_batch_flags(args) -> None:
    """Flags that contradict each other: one line, before anything is read."""
    waits = (("--collect", args.collect), ("--no-wait", args.no_wait), ("--max-wait", args.max_wait is not None))
    for flag, on in waits:
        for other, also in (("--dry-run", args.dry_run), ("--estimate-cost", args.estimate_cost)):
            if on and also:
                raise MedhelmError(f"{flag} with {other}: {other} sends nothing, there is no batch to wait for")
    if args.no_wait and args.max_wait is not None:
        raise MedhelmError("--max-wait with --no-wait: --no-wait does not wait")


def _run(args) -> int:
    from medhelm_core.hf_hub import start_torch_device_probe
    from medhelm_core.run.entries import expand_selection
    from medhelm_core.run.workspace import Workspace

    ws = Workspace(args.output_path, args.local_path, num_threads=args.num_threads,
                   benchmark_paths=tuple(args.benchmark_path), edition=args.edition, storage=args.storage)
    selection = from_arguments(RunSelection, args)
    if selection.metric_device == "auto":
        start_torch_device_probe()  # answered beside the expansion, when the first spec asks
    if args.judges_given and not (args.dry_run or args.collect) and _rejudges(ws, args):
        return _rejudge(ws, args)
    entries = expand_selection(ws, selection)  # the only expansion: the register_suite job takes these
    if args.dry_run:
        return _dry_run(ws, entries)
    if args.estimate_cost:
        return _estimate(ws, entries, args.budget, args.batch)
    if args.collect:
        return _collect(ws, args, entries)
    return _execute(ws, args, selection, entries)


def _rejudges(ws, args) -> bool:
    """The suite's stored runs were judged by another jury than --judges': re-judging them makes a
    suite of its own (`<suite>@<jury>`), instead of judging the suite again in place."""
    from medhelm_core.run.rejudge import judged_by_another_jury

    return judged_by_another_jury(ws, args.suite, args.judges)


def _rejudge(ws, args) -> int:
    """The suite's stored completions sent to the jury of --judges (`run.rejudge`): estimate first,
    only judge calls, paid once; --estimate-cost prints the estimate and stops."""
    from medhelm_core.costs import Budget, BudgetExhausted
    from medhelm_core.engine import RunControls
    from medhelm_core.run.rejudge import rejudge_target

    ws.controls = RunControls(budget=Budget(args.budget) if args.budget is not None else None)
    _say(f"suite {args.suite!r} was judged by another jury: its stored completions go to the jury of "
         f"--judges {args.judges} as a suite of its own; the confs are not read again")
    try:
        rejudge_target(ws, args.suite, args.judges, estimate_only=args.estimate_cost, flag="--judges",
                       progress=lambda m: print(f"[rejudge] {m}", file=sys.stderr), say=_say)
    except BudgetExhausted as e:  # the judge answers paid are stored: a rerun continues
        _say(f"stopped at --budget {args.budget}: {e}. Rerun the same command to resume.")
        return BUDGET_EXIT
    return 0


def _dry_run(ws, entries) -> int:
    from medhelm_core.jury.presets import describe_judges

    for _, spec in entries:
        print(spec["name"])
    judges = describe_judges(ws, entries)  # what --judges resolved to (stderr: stdout stays the names)
    if judges:
        print(f"{PROG}: {judges}", file=sys.stderr)
    return 0


def _estimate(ws, entries, budget: float | None, force_batch: bool) -> int:
    from medhelm_core.run.batch_first import setting_batches
    from medhelm_core.run.estimate import estimate_runs, format_estimate, with_batch_prices
    from medhelm_core.run.preflight import run_problems

    problems = run_problems(ws, entries)  # keys, deployments, judges: before any data is read
    est = estimate_runs(ws, entries)
    if force_batch or any(setting_batches(ws, r.deployment) for r in est.rows):
        est = with_batch_prices(ws, est, force_batch=force_batch)  # the price by batch beside the online one
    print(format_estimate(est, budget=budget))
    for problem in problems:
        print(f"Before a run can start: {problem}")
    return 0


def _say(line: str) -> None:
    print(f"{PROG}: {line}", file=sys.stderr)


def _batch_pass(ws, args, runs, collect_only: bool = False):
    """The batch pass on these runs (--collect), its lines on stderr; its report."""
    from medhelm_core.run.batch_pass import batch_pass

    report = batch_pass(ws, runs, wait=not args.no_wait, collect_only=collect_only, force_batch=args.batch,
                        max_wait_s=args.max_wait, on_event=_say)
    _say_batch(report)
    return report


def _say_batch(report) -> None:
    """A batch pass's summary line, its errors after the first, the deployments asked online."""
    _say(report.summary_line())
    for error in report.errors[1:]:  # the first is in the summary line
        _say(f"batch: {error}")
    if report.online_deployments:
        _say(f"batch: no batch API, asked online: {', '.join(sorted(report.online_deployments))}")


def _waiting_line(report, waiting: int, args) -> str:
    """What the user does next about runs (or batches) still in a vendor batch."""
    head = (f"{waiting} run(s) wait on {len(report.outstanding)} outstanding batch(es)" if waiting
            else f"{len(report.outstanding)} batch(es) still outstanding")
    # Without --no-wait the pass stops waiting at --max-wait, or on batches it cannot poll (said above).
    why = "" if args.no_wait else " (--max-wait reached)" if args.max_wait is not None else " (see above)"
    return (f"{head}{why}: rerun the same command to collect them and finish the runs, or add --collect to only "
            f"collect (or turn on the Dagster sensor medhelm_batches); vendors answer within 24 hours")


def _collect(ws, args, entries) -> int:
    """--collect: the outstanding batches collected (waited for, unless --no-wait); nothing submitted, no run."""
    from medhelm_core.run.batch_first import outstanding
    from medhelm_core.run.preflight import check_offline
    from medhelm_core.run.workspace import RunRef

    if not outstanding(ws):
        _say("batch: nothing outstanding to collect")
        return 0
    if args.offline:
        check_offline(ws, entries)
    report = _batch_pass(ws, args, [RunRef(args.suite, spec["name"]) for _, spec in entries], collect_only=True)
    if report.outstanding:
        _say(_waiting_line(report, len(report.pending_runs), args))
    elif report.collected:
        _say("every batch collected: rerun the same command without --collect to finish the runs")
    if report.errors:
        return 1
    return WAITING_EXIT if report.outstanding and not args.no_wait else 0


def _preflight(ws, args, entries) -> None:
    """Everything that can refuse the runs, before the first write and the first call."""
    from medhelm_core.run.datasets import check_datasets_load
    from medhelm_core.run.entries import check_one_edition
    from medhelm_core.run.preflight import check_offline, private_tier_notice, validate_runs
    from medhelm_core.run.reachability import check_endpoints_listen

    validate_runs(ws, entries)
    check_datasets_load(ws, entries)  # the user's data files read before anything is written
    if ws.store.exists():
        check_one_edition(ws, args.suite, [spec["name"] for _, spec in entries])
    if args.offline:
        check_offline(ws, entries)
    check_endpoints_listen(ws, entries)
    notice = private_tier_notice(ws, entries)  # the last word before the first call
    if notice:
        print(f"{PROG}: {notice}", file=sys.stderr)


class _Report:
    """One stderr line per run as it ends (the runs of an invocation end in any order)."""

    def __init__(self, total: int):
        self.total, self.outcomes, self.waiting = total, [], []

    def wait(self, run) -> None:
        """A run left out of the online execution: a live vendor batch holds some of its requests."""
        self.waiting.append(run)
        print(f"[{len(self.outcomes) + len(self.waiting)}/{self.total}] WAITING {run.run_name} (in a vendor batch)",
              file=sys.stderr)

    def __call__(self, outcome) -> None:
        from medhelm_core.costs import BudgetExhausted

        self.outcomes.append(outcome)
        head = f"[{len(self.outcomes) + len(self.waiting)}/{self.total}]"
        if outcome.reused:
            return
        if not outcome.started:
            print(f"{head} NOT STARTED {outcome.run.run_name} (budget reached)", file=sys.stderr)
        elif isinstance(outcome.error, BudgetExhausted):
            print(f"{head} STOPPED {outcome.run.run_name}: {outcome.error}", file=sys.stderr)
        elif outcome.error is not None:
            print(one_line(f"{head} FAILED {outcome.run.run_name}: {root_error(outcome.error)}"), file=sys.stderr)
        else:
            print(f"{head} {outcome.run.run_name} ({outcome.seconds:.1f}s, {outcome.new_calls} new calls)",
                  file=sys.stderr)


def _execute(ws, args, selection, entries) -> int:
    from medhelm_core.costs import Budget
    from medhelm_core.engine import RunControls
    from medhelm_core.run import suite as suite_layer

    plan = suite_layer.plan_suite(ws, args.suite, entries)
    if plan.nothing_to_do:  # a rerun with nothing new: no call, no Dagster run
        print(suite_layer.summary_line([suite_layer.RunOutcome(r, reused=True) for r in plan.runs]), file=sys.stderr)
        return 0
    _preflight(ws, args, entries)
    # One budget and one progress display for every run this invocation launches.
    ws.controls = RunControls(budget=Budget(args.budget) if args.budget is not None else None)
    report = ws.controls.on_outcome = _Report(len(plan.runs))
    batch = _launch(ws, args, selection, entries, plan)
    code = _verdict(report.outcomes, len(plan.runs), args.budget)
    if report.waiting:
        _say(_waiting_line(batch, len(report.waiting), args))
        if code == 0 and not args.no_wait:
            return WAITING_EXIT
    return code


def _launch(ws, args, selection, entries, plan):
    """Register the runs, run the batch pass (in batch mode), then the online runs and the Dagster jobs
    that record them; the batch pass's report (None without one)."""
    from medhelm_core.progress import progress_display
    from medhelm_core.run import batch_first
    from medhelm_core.run import suite as suite_layer
    from medhelm_core.run.datasets import is_current
    from medhelm_core.run.entries import cells_of, register_runs, scenario_partition_key, scenario_partitions

    # The runs are registered and started first; the Dagster jobs that record them follow while
    # they run. A run whose dataset is not built yet builds it first (its first run does).
    register_runs(ws, args.suite, entries)
    tiers = scenario_partitions(entries, ws.catalog)
    to_build = {key for keys in tiers.values() for key in keys if not is_current(ws, key)}
    datasets = {run: key for run, key in ((r, scenario_partition_key(spec["scenario_spec"], ws.edition))
                                          for r, (_, spec) in zip(plan.runs, entries)) if key in to_build}
    cells = dict(zip(plan.runs, cells_of(args.suite, entries)))
    runs, fresh, batch = plan.runs, plan.fresh, None
    specs = {r: spec for r, (_, spec) in zip(plan.runs, entries)}
    if batch_first.batches_in_play(ws, specs.values(), args.batch):
        runs, fresh, batch = batch_first.before_online(ws, plan.runs, specs, to_build, plan.fresh,
                                                       force_batch=args.batch, wait=not args.no_wait,
                                                       max_wait_s=args.max_wait, on_event=_say)
        _say_batch(batch)
        for run in batch.pending_runs:  # not online now: reported as waiting, not as failed
            ws.controls.on_outcome.wait(run)
        datasets = {}  # built by before_online
    elif args.no_wait:
        _say("--no-wait: no deployment of these runs batches (add --batch, or batch: true in "
             "medhelm_deployments.yaml): they run online")
    with progress_display(ws, args.progress):
        _freeze_loaded(collect=True)
        execution = suite_layer.SuiteExecution(ws, runs, suite_layer.STAGES, fresh=fresh, datasets=datasets)
        try:
            for outcome in execution.take_reused():
                ws.controls.on_outcome(outcome)
            ws.controls.started = execution if execution.runs else None
            launch = _record(ws, args, selection, entries, tiers, to_build)
            _freeze_loaded(collect=False)   # Dagster's modules and definitions, loaded by _record
            if execution.runs:
                launch.run_layers(execution.runs, [cells[r] for r in execution.runs])
        finally:  # not taken (a job failed before the layers' step): its runs are not left running
            ws.controls.started = None
            execution.close()
    if launch.failure and len(ws.controls.on_outcome.outcomes) < len(runs):
        raise MedhelmError(launch.failure)  # the step failed outside any run (bug, bad config)
    return batch


def _freeze_loaded(collect: bool) -> None:
    """Move what is alive now (modules, Dagster's definitions, the catalog: about 460,000 objects
    once Dagster is loaded) out of the cyclic collector's sight. Each full collection traversed them
    all, about 0.3 s of CPU with the GIL held, every few seconds of a wide suite. `collect` first
    when nothing is running yet; later, with runs going, a collection would be that same pause."""
    if collect:
        gc.collect()
    gc.freeze()


def _record(ws, args, selection, entries, tiers: dict, to_build: set):
    """The Dagster jobs that record the suite and its datasets (the runs already going)."""
    from medhelm_dagster.launch import SuiteLaunch

    # What the runs list shows for this invocation's Dagster runs (the UI can filter on them).
    tags = {"medhelm/suite": args.suite, "medhelm/edition": ws.edition,
            "medhelm/conf": " ".join(selection.conf_paths + [f"-r {d}" for d in selection.run_entries or []])[:1000]}
    launch = SuiteLaunch(ws, tags)
    launch.register(selection.model_dump(), entries, registered=True)
    for tier, keys in tiers.items():
        if to_build.intersection(keys):
            launch.build_datasets(tier, keys)
    return launch


def _verdict(outcomes, total: int, budget: float | None) -> int:
    from medhelm_core.costs import BudgetExhausted
    from medhelm_core.run.suite import summary_line

    print(summary_line(outcomes), file=sys.stderr)
    if any(isinstance(o.error, BudgetExhausted) or not o.started for o in outcomes):
        done = sum(o.ok for o in outcomes)
        partial = sum(isinstance(o.error, BudgetExhausted) for o in outcomes)
        print(f"{PROG}: stopped at --budget {budget}: {done} runs complete, {partial} partial, "
              f"{total - done - partial} not started. Rerun the same command to resume.", file=sys.stderr)
        return BUDGET_EXIT
    failures = [o for o in outcomes if o.error is not None]
    if failures:
        print(f"{PROG}: error: {len(failures)} of {total} runs failed", file=sys.stderr)
        return 1
    return 0
