"""`medhelm-run`: HELM's helm-run, executed as the code location's declared jobs (not a second code
path). The confs are expanded once; whether a run is up to date is decided once, by the run layer
(`run.suite.plan_suite`, else the execution it starts)."""
from __future__ import annotations

import argparse
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
    return parser


def run_main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    warnings.filterwarnings("ignore")
    return one_line_errors(PROG, lambda: _run(_checked(args)))


def _checked(args):
    """The options a selection does not carry, checked before anything is written (the selection's
    own: `options.check_run_selection`, when it is expanded)."""
    check_output_folder("--output-path", args.output_path)
    check_input_folder("--local-path", args.local_path)
    check_count("--num-threads", args.num_threads)
    check_amount("--budget", args.budget)
    for path in args.benchmark_path:
        check_input_folder("--benchmark-path", path, must_exist=True)
    return args


def _run(args) -> int:
    from medhelm_core.run.entries import expand_selection
    from medhelm_core.run.workspace import Workspace

    ws = Workspace(args.output_path, args.local_path, num_threads=args.num_threads,
                   benchmark_paths=tuple(args.benchmark_path), edition=args.edition, storage=args.storage)
    selection = from_arguments(RunSelection, args)
    entries = expand_selection(ws, selection)  # the only expansion: the register_suite job takes these
    if args.dry_run:
        return _dry_run(ws, entries)
    if args.estimate_cost:
        return _estimate(ws, entries, args.budget)
    return _execute(ws, args, selection, entries)


def _dry_run(ws, entries) -> int:
    from medhelm_core.jury.presets import describe_judges

    for _, spec in entries:
        print(spec["name"])
    judges = describe_judges(ws, entries)  # what --judges resolved to (stderr: stdout stays the names)
    if judges:
        print(f"{PROG}: {judges}", file=sys.stderr)
    return 0


def _estimate(ws, entries, budget: float | None) -> int:
    from medhelm_core.run.estimate import estimate_runs, format_estimate
    from medhelm_core.run.preflight import run_problems

    problems = run_problems(ws, entries)  # keys, deployments, judges: before any data is read
    print(format_estimate(estimate_runs(ws, entries), budget=budget))
    for problem in problems:
        print(f"Before a run can start: {problem}")
    return 0


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
        self.total, self.outcomes = total, []

    def __call__(self, outcome) -> None:
        from medhelm_core.costs import BudgetExhausted

        self.outcomes.append(outcome)
        head = f"[{len(self.outcomes)}/{self.total}]"
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
    _launch(ws, args, selection, entries, plan)
    return _verdict(report.outcomes, len(plan.runs), args.budget)


def _launch(ws, args, selection, entries, plan) -> None:
    from medhelm_core.progress import progress_display
    from medhelm_core.run import suite as suite_layer
    from medhelm_core.run.datasets import is_current
    from medhelm_core.run.entries import cells_of, scenario_partitions
    from medhelm_dagster.launch import SuiteLaunch

    # What the runs list shows for this invocation's Dagster runs (the UI can filter on them).
    tags = {"medhelm/suite": args.suite, "medhelm/edition": ws.edition,
            "medhelm/conf": " ".join(selection.conf_paths + [f"-r {d}" for d in selection.run_entries or []])[:1000]}
    launch = SuiteLaunch(ws, tags)
    launch.register(selection.model_dump(), entries)
    for tier, keys in scenario_partitions(entries, ws.catalog).items():
        if not all(is_current(ws, key) for key in keys):
            launch.build_datasets(tier, keys)
    cells = dict(zip(plan.runs, cells_of(args.suite, entries)))
    with progress_display(ws, args.progress):
        # The runs start now, before Dagster plans the run that records them (its planned events,
        # a few per cell, take seconds at a suite's width): its step takes them over.
        execution = suite_layer.SuiteExecution(ws, plan.runs, suite_layer.STAGES, fresh=plan.fresh)
        try:
            for outcome in execution.take_reused():
                ws.controls.on_outcome(outcome)
            if execution.runs:
                ws.controls.started = execution
                launch.run_layers(execution.runs, [cells[r] for r in execution.runs])
        finally:  # not taken (the run failed before its step): its runs are not left running
            ws.controls.started = None
            execution.close()
    if launch.failure and len(ws.controls.on_outcome.outcomes) < len(plan.runs):
        raise MedhelmError(launch.failure)  # the step failed outside any run (bug, bad config)


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
