"""`medhelm-run` and `medhelm-summarize`: HELM's command lines, executed as the declared Dagster jobs
and assets the UI shows (not a second code path). Dagster and the asset modules are imported inside
the commands that need them, so `--help`, `--dry-run` and bad arguments answer without loading them."""
from __future__ import annotations

import argparse
import os
import sys
import time
import warnings
from pathlib import Path

from medhelm_core.catalog import benchmark_paths_from_env
from medhelm_core.errors import MedhelmError
from medhelm_core.selections import RunSelection, SummarizeSelection, add_arguments, from_arguments

QUIET = {"loggers": {"console": {"config": {"log_level": "ERROR"}}}}


def dagster_instance(output_path: str):
    """DAGSTER_HOME when set (so `dagster dev` shows these runs), else `<output-path>/.dagster_home`."""
    import dagster as dg

    home = Path(os.environ.get("DAGSTER_HOME") or Path(output_path) / ".dagster_home").absolute()
    home.mkdir(parents=True, exist_ok=True)
    cfg = home / "dagster.yaml"
    if not cfg.exists():
        cfg.write_text("telemetry:\n  enabled: false\n")
    os.environ["DAGSTER_HOME"] = str(home)
    return dg.DagsterInstance.get()


def _user_error(exc: BaseException) -> BaseException:
    """Unwrap Dagster's step errors down to the error our code raised."""
    seen = exc
    while True:
        inner = getattr(seen, "user_exception", None) or seen.__cause__
        if inner is None or inner is seen:
            return seen
        seen = inner


def run_main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="medhelm-run", description="Run MedHELM run entries (as helm-run does).")
    add_arguments(parser, RunSelection, required=("conf_paths", "suite", "max_eval_instances"))
    parser.add_argument("--output-path", "-o", default="benchmark_output")
    parser.add_argument("--local-path", default="prod_env", help="HELM prod_env (model_deployments.yaml, credentials.conf)")
    parser.add_argument("--num-threads", "-n", type=int, default=8)
    parser.add_argument("--benchmark-path", action="append", default=list(benchmark_paths_from_env()), metavar="DIR",
                        help="a benchmark folder of your own (or a folder of them), beside the built-in ones; "
                             "repeatable (default: $MEDHELM_BENCHMARK_PATH)")
    parser.add_argument("--dry-run", action="store_true", help="print the run names and run nothing")
    parser.add_argument("--estimate-cost", action="store_true",
                        help="print the tokens and dollars the runs would cost (model and judge calls; stored "
                             "completions cost nothing) and send nothing")
    parser.add_argument("--budget", type=float, default=None, metavar="USD",
                        help="spend at most USD on new completions in this invocation: no request is sent once "
                             "spend + the worst case of requests in flight would exceed it; rerun to continue")
    parser.add_argument("--progress", action=argparse.BooleanOptionalAction, default=None,
                        help="progress bars on stderr (default: when stderr is a terminal)")
    args = parser.parse_args(argv)
    warnings.filterwarnings("ignore")
    try:
        return _run(args)
    except MedhelmError as e:
        print(f"medhelm-run: error: {e}", file=sys.stderr)
        return 2


BUDGET_EXIT = 3  # stopped at --budget: everything paid is stored, rerun to continue


def _tqdm_factory(force: bool | None):
    """Progress bars (tqdm, stderr) for the completion engine: one per run step."""
    from tqdm import tqdm

    from medhelm_core.engine import ProgressHandle

    def factory(label: str, todo: int, reused: int) -> ProgressHandle:
        bar = tqdm(total=todo, desc=label, unit="req", file=sys.stderr, leave=False, dynamic_ncols=True,
                   disable=(None if force is None else not force), smoothing=0.1)
        if reused:
            bar.set_postfix_str(f"{reused} reused", refresh=False)

        def update(n: int, postfix: dict) -> None:
            if postfix:
                bar.set_postfix(postfix, refresh=False)
            bar.update(n)

        return ProgressHandle(update=update, close=bar.close)

    return factory


def _run(args) -> int:
    from medhelm_core.run.entries import expand_selection, scenario_partitions
    from medhelm_core.run.preflight import validate_runs
    from medhelm_core.run.workspace import RunRef, Workspace

    ws = Workspace(args.output_path, args.local_path, num_threads=args.num_threads,
                   benchmark_paths=tuple(args.benchmark_path))
    selection = from_arguments(RunSelection, args)
    entries = expand_selection(ws, selection)
    if args.dry_run:
        for _, spec in entries:
            print(spec["name"])
        return 0
    if args.estimate_cost:
        from medhelm_core.run.estimate import estimate_runs, format_estimate

        print(format_estimate(estimate_runs(ws, entries), budget=args.budget))
        return 0
    from medhelm_core.costs import Budget, BudgetExhausted
    from medhelm_core.engine import RunControls

    # One budget and one progress display for every run this invocation launches.
    ws.controls = RunControls(budget=Budget(args.budget) if args.budget is not None else None,
                              progress_factory=_tqdm_factory(args.progress))
    validate_runs(ws, entries)

    from assets.definitions import defs
    from assets.resources import MedhelmResource

    instance = dagster_instance(args.output_path)
    resources = {"medhelm": MedhelmResource(output_path=str(args.output_path), local_path=str(args.local_path),
                                            num_threads=args.num_threads, benchmark_paths=list(ws.benchmark_paths)),
                 "run_controls": ws.controls}
    config = selection.model_dump()
    # The declared jobs of the code location, launched in this process with this invocation's resources.
    defs.get_job_def("register_suite").execute_in_process(
        instance=instance, resources=resources, run_config={"ops": {"run_entries": {"config": config}}, **QUIET})
    for tier, keys in scenario_partitions(entries, ws.catalog).items():
        for key in keys:
            try:
                defs.get_job_def(f"build_{tier}_datasets").execute_in_process(
                    instance=instance, resources=resources, partition_key=key, run_config=QUIET)
            except Exception as e:  # noqa: BLE001 - a dataset that cannot be built stops the suite
                raise MedhelmError(f"dataset {key}: {_user_error(e)}") from None
    failures = []
    runs = [RunRef(args.suite, spec["name"]) for _, spec in entries]
    for i, run in enumerate(runs, 1):
        start = time.time()
        try:
            defs.get_job_def("run_layers").execute_in_process(
                instance=instance, resources=resources, partition_key=run.partition_key, run_config=QUIET)
            print(f"[{i}/{len(runs)}] {run.run_name} ({time.time() - start:.1f}s)", file=sys.stderr)
        except Exception as e:  # noqa: BLE001 - report every failed run, as helm-run does, then exit non-zero
            err = _user_error(e)
            if isinstance(err, BudgetExhausted):
                left = len(runs) - i
                print(f"[{i}/{len(runs)}] STOPPED {run.run_name}: {err}", file=sys.stderr)
                print(f"medhelm-run: stopped at --budget {args.budget}: {i - 1 - len(failures)} runs complete, "
                      f"{run.run_name} partial, {left} not started. Rerun the same command to resume.",
                      file=sys.stderr)
                return BUDGET_EXIT
            failures.append(f"{run.run_name}: {err}")
            print(f"[{i}/{len(runs)}] FAILED {run.run_name}: {err}", file=sys.stderr)
    if failures:
        print(f"medhelm-run: error: {len(failures)} of {len(runs)} runs failed", file=sys.stderr)
        return 1
    return 0


def summarize_main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="medhelm-summarize",
                                     description="Build the leaderboard tables (as helm-summarize does).")
    add_arguments(parser, SummarizeSelection, defaults={"suite": None, "auto_generate_schema": False},
                  aliases={"schema_path": ["--schema"]})
    parser.add_argument("--output-path", "-o", default="benchmark_output")
    parser.add_argument("--local-path", default="prod_env")
    args = parser.parse_args(argv)
    warnings.filterwarnings("ignore")
    if bool(args.release) != bool(args.suites) or (args.suite and args.release):
        parser.error("use --suite S, or --release R --suites S1 S2 ...")
    if not args.suite and not args.release:
        args.suite = "default"
    if not args.schema_path and not args.auto_generate_schema:
        from medhelm_core.resources import DEFAULT_SCHEMA_PATH

        args.schema_path = str(DEFAULT_SCHEMA_PATH)
    try:
        return _summarize(args)
    except MedhelmError as e:
        print(f"medhelm-summarize: error: {e}", file=sys.stderr)
        return 2


def _check_suites_exist(output_path: str, suites: list[str]) -> None:
    """Stop before anything is written when a suite has no runs (HELM would write an empty leaderboard)."""
    import duckdb

    from medhelm_core.store import Store

    store = Store.in_output_path(output_path)
    if not store.path.exists():
        raise MedhelmError(f"no runs in {output_path}: {store.path} does not exist (run medhelm-run first)")
    try:
        with store.connect(read_only=True) as conn:  # waits for a running writer, as the summarize would
            known = [r[0] for r in conn.execute("SELECT DISTINCT suite FROM runs ORDER BY suite").fetchall()]
    except duckdb.CatalogException:
        known = []  # no `runs` table: nothing was ever run into this file
    missing = [s for s in suites if s not in known]
    if missing:
        there = ", ".join(known) if known else "none"
        raise MedhelmError(f"suite {missing[0]!r} has no runs in {store.path} (suites there: {there})")


def _summarize(args) -> int:
    import dagster as dg

    _check_suites_exist(args.output_path, args.suites or [args.suite])

    from assets.leaderboard import SUMMARY_ASSETS
    from assets.resources import MedhelmResource

    instance = dagster_instance(args.output_path)
    resources = {"medhelm": MedhelmResource(output_path=str(args.output_path), local_path=str(args.local_path))}
    config = {"suite": args.suite, "suites": args.suites, "release": args.release,
              "schema_path": args.schema_path, "auto_generate_schema": args.auto_generate_schema}
    try:
        dg.materialize(SUMMARY_ASSETS, instance=instance, resources=resources,
                       run_config={"ops": {"summarize_target": {"config": config}}, **QUIET})
    except MedhelmError:
        raise
    except Exception as e:  # noqa: BLE001
        err = _user_error(e)
        if isinstance(err, MedhelmError):
            raise err from None
        raise
    target = Path(args.output_path) / (f"releases/{args.release}" if args.release else f"runs/{args.suite}")
    _print_top_table(target)
    print(f"wrote {target}", file=sys.stderr)
    return 0


def _print_top_table(base: Path) -> None:
    """Show the first leaderboard table (as HELM's page would, 3 decimals) on stdout."""
    import json

    from medhelm_core.summarize_files import top_table_markdown

    schema_path = base / "schema.json"
    if schema_path.exists():
        table = top_table_markdown(base, json.loads(schema_path.read_text(encoding="utf-8")))
        if table:
            print(table)
