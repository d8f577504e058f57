"""`medhelm-run` and `medhelm-summarize`: HELM's command lines, executed as the declared Dagster jobs
and assets the UI shows (not a second code path). Dagster and the asset modules are imported inside
the commands that need them, so `--help`, `--dry-run` and bad arguments answer without loading them."""
from __future__ import annotations

import argparse
import os
import sys
import warnings
from pathlib import Path

from medhelm_core.catalog import benchmark_paths_from_env
from medhelm_core.errors import DEBUG_ENV, MedhelmError, one_line, unexpected_line
from medhelm_core.options import (check_amount, check_count, check_input_folder, check_name,
                                  check_output_folder)
from medhelm_core.selections import RunSelection, SummarizeSelection, add_arguments, from_arguments
from medhelm_core.storage import add_storage_argument

# Dagster's console logger says nothing on the command's stderr (its stack traces stay in the
# instance's event log, which the UI shows): the command reports each failure in one line itself.
QUIET = {"loggers": {"console": {"config": {"log_level": "CRITICAL"}}}}


def dagster_instance(output_path: str):
    """DAGSTER_HOME when set (so `dagster dev` shows these runs), else `<output-path>/.dagster_home`."""
    import dagster as dg

    home = Path(os.environ.get("DAGSTER_HOME") or Path(output_path) / ".dagster_home").absolute()
    home.mkdir(parents=True, exist_ok=True)
    os.environ["DAGSTER_HOME"] = str(home)
    cfg, ready = home / "dagster.yaml", home / ".medhelm_storage_ready"
    if ready.exists() and cfg.exists():
        return _reusing_connections(dg.DagsterInstance.get())
    # The first commands on a new home create its dagster.yaml and Dagster's SQLite storage (the
    # runs, schedules and event-log index databases, with their migrations): two at once race
    # ("table ... already exists"), so the first ones take turns until the storage is there.
    import filelock

    with filelock.FileLock(str(home / ".medhelm_storage.lock")):
        if not cfg.exists():
            # As deploy/local/dagster.yaml: later `dg launch` runs on this home print INFO, not DEBUG.
            cfg.write_text("python_logs:\n  python_log_level: INFO\ntelemetry:\n  enabled: false\n")
        instance = dg.DagsterInstance.get()
        if not ready.exists():
            instance.event_log_storage.get_asset_keys()  # the event log's index database
            ready.touch()
    return _reusing_connections(instance)


def _reusing_connections(instance):
    """The instance, its SQLite event log keeping one connection per database file in this process.
    Dagster's opens a new engine and connection for each event it stores (about 8 ms of CPU each);
    a suite's run stores thousands (its planned cells, then each cell's materializations and checks),
    all on the thread that also collects the runs' outcomes. Same rows, same locks (the storage's
    own, around each use), about a third of the CPU. Other storages (PostgreSQL) are left as they are."""
    import contextlib
    import types

    from dagster._core.storage.event_log.sqlite import sqlite_event_log as sqlite_log
    from sqlalchemy import create_engine
    from sqlalchemy.pool import StaticPool

    storage = instance.event_log_storage
    if type(storage) is not sqlite_log.SqliteEventLogStorage or getattr(storage, "_medhelm_engines", None) is not None:
        return instance
    if not all(hasattr(storage, a) for a in ("_connect", "_db_lock", "_initialized_dbs", "_initdb",
                                              "conn_string_for_shard")):
        return instance  # another Dagster than the pinned one: its own connections, as they are
    engines: dict = {}

    @contextlib.contextmanager
    def connect(self, shard: str):
        with self._db_lock:  # one user of a shard's connection at a time, as Dagster's own
            engine = engines.get(shard)
            if engine is None:
                engine = engines[shard] = create_engine(
                    self.conn_string_for_shard(shard), poolclass=StaticPool,
                    connect_args={"timeout": sqlite_log.SQLITE_BUSY_TIMEOUT_SECONDS, "check_same_thread": False})
            if shard not in self._initialized_dbs:
                self._initdb(engine)
                self._initialized_dbs.add(shard)
            with engine.connect() as conn, conn.begin():
                yield conn

    storage._medhelm_engines = engines
    storage._connect = types.MethodType(connect, storage)
    return instance


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
    args = parser.parse_args(argv)
    warnings.filterwarnings("ignore")
    return _one_line_errors("medhelm-run", lambda: _run(_checked_run_args(args)))


def _one_line_errors(prog: str, command) -> int:
    """Run a command: a user's error is one line (exit 2), any other error its type and first line
    (exit 1), never a traceback, ours or Dagster's ($MEDHELM_DEBUG=1 raises it)."""
    try:
        return command()
    except MedhelmError as e:
        print(f"{prog}: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"{prog}: interrupted; rerun the same command to resume", file=sys.stderr)
        return 130
    except Exception as e:  # noqa: BLE001
        if os.environ.get(DEBUG_ENV):
            raise
        err = _user_error(e)
        if isinstance(err, MedhelmError):
            print(f"{prog}: error: {err}", file=sys.stderr)
            return 2
        print(unexpected_line(prog, err), file=sys.stderr)
        return 1


def _checked_run_args(args):
    """The options a selection does not carry, checked before anything is written (the selection's
    own: `options.check_run_selection`, when it is expanded)."""
    check_output_folder("--output-path", args.output_path)
    check_input_folder("--local-path", args.local_path)
    check_count("--num-threads", args.num_threads)
    check_amount("--budget", args.budget)
    for path in args.benchmark_path:
        check_input_folder("--benchmark-path", path, must_exist=True)
    return args


BUDGET_EXIT = 3  # stopped at --budget: everything paid is stored, rerun to continue


def _run(args) -> int:
    from medhelm_core.run.entries import cells_of, check_one_edition, expand_selection, scenario_partitions
    from medhelm_core.run.datasets import check_datasets_load
    from medhelm_core.run.preflight import check_offline, private_tier_notice, validate_runs
    from medhelm_core.run.reachability import check_endpoints_listen
    from medhelm_core.run.workspace import RunRef, Workspace

    ws = Workspace(args.output_path, args.local_path, num_threads=args.num_threads,
                   benchmark_paths=tuple(args.benchmark_path), edition=args.edition, storage=args.storage)
    selection = from_arguments(RunSelection, args)
    entries = expand_selection(ws, selection)
    if args.dry_run:
        for _, spec in entries:
            print(spec["name"])
        from medhelm_core.jury.presets import describe_judges

        judges = describe_judges(ws, entries)  # what --judges resolved to (stderr: stdout stays the names)
        if judges:
            print(f"medhelm-run: {judges}", file=sys.stderr)
        return 0
    if args.estimate_cost:
        from medhelm_core.run.estimate import estimate_runs, format_estimate
        from medhelm_core.run.preflight import run_problems

        problems = run_problems(ws, entries)  # keys, deployments, judges: before any data is read
        print(format_estimate(estimate_runs(ws, entries), budget=args.budget))
        for problem in problems:
            print(f"Before a run can start: {problem}")
        return 0
    from medhelm_core.costs import Budget, BudgetExhausted
    from medhelm_core.engine import RunControls

    # One budget and one progress display for every run this invocation launches.
    ws.controls = RunControls(budget=Budget(args.budget) if args.budget is not None else None)
    from medhelm_core.run.suite import STAGES, RunOutcome, SuiteExecution, summary_line, unchanged, up_to_date

    if unchanged(ws, args.suite, entries):  # a rerun with nothing new: no call, no Dagster run
        print(summary_line([RunOutcome(RunRef(args.suite, spec["name"]), reused=True) for _, spec in entries]),
              file=sys.stderr)
        return 0
    validate_runs(ws, entries)
    check_datasets_load(ws, entries)  # the user's data files read before anything is written
    if ws.store.exists():
        check_one_edition(ws, args.suite, [spec["name"] for _, spec in entries])
    if args.offline:
        check_offline(ws, entries)
    check_endpoints_listen(ws, entries)
    notice = private_tier_notice(ws, entries)  # the last word before the first call
    if notice:
        print(f"medhelm-run: {notice}", file=sys.stderr)

    from assets.definitions import defs
    from assets.partitions import grid_range_tags, partition_range_tags
    from assets.resources import MedhelmResource
    from medhelm_core.progress import progress_display
    from medhelm_core.run.datasets import is_current

    runs = [RunRef(args.suite, spec["name"]) for _, spec in entries]
    cells = dict(zip(runs, cells_of(args.suite, entries)))
    outcomes = []

    def report(outcome) -> None:  # each run as it ends (the runs of the invocation end in any order)
        outcomes.append(outcome)
        head = f"[{len(outcomes)}/{len(runs)}]"
        if outcome.reused:
            return
        if not outcome.started:
            print(f"{head} NOT STARTED {outcome.run.run_name} (budget reached)", file=sys.stderr)
        elif isinstance(outcome.error, BudgetExhausted):
            print(f"{head} STOPPED {outcome.run.run_name}: {outcome.error}", file=sys.stderr)
        elif outcome.error is not None:
            print(one_line(f"{head} FAILED {outcome.run.run_name}: {_user_error(outcome.error)}"), file=sys.stderr)
        else:
            print(f"{head} {outcome.run.run_name} ({outcome.seconds:.1f}s, {outcome.new_calls} new calls)",
                  file=sys.stderr)

    ws.controls.on_outcome = report
    instance = dagster_instance(args.output_path)
    resources = {"medhelm": MedhelmResource(output_path=str(args.output_path), local_path=str(args.local_path),
                                            num_threads=args.num_threads, benchmark_paths=list(ws.benchmark_paths),
                                            storage=args.storage),
                 "run_controls": ws.controls}
    config = selection.model_dump()
    # What the runs list shows for this invocation's Dagster runs (the UI can filter on them).
    tags = {"medhelm/suite": args.suite, "medhelm/edition": ws.edition,
            "medhelm/conf": " ".join(selection.conf_paths + [f"-r {d}" for d in selection.run_entries or []])[:1000]}
    # The declared jobs of the code location, launched in this process with this invocation's
    # resources: one Dagster run registers the suite, one per tier builds its datasets, one runs every run.
    defs.get_job_def("register_suite").execute_in_process(
        instance=instance, resources=resources, run_config={"ops": {"run_entries": {"config": config}}, **QUIET},
        tags=tags)
    for tier, keys in scenario_partitions(entries, ws.catalog).items():
        if all(is_current(ws, key) for key in keys):
            continue  # nothing to rebuild: no Dagster run
        try:
            defs.get_job_def(f"build_{tier}_datasets").execute_in_process(
                instance=instance, resources=resources, run_config=QUIET,
                tags={**tags, **partition_range_tags(instance, f"{tier}_scenarios", keys)})
        except Exception as e:  # noqa: BLE001 - a dataset that cannot be built stops the suite
            raise MedhelmError(str(_user_error(e))) from None
    # Runs whose inputs did not change since they completed are not run again (not even in Dagster).
    fresh = up_to_date(ws, runs)
    for run in runs:
        if run in fresh:
            report(RunOutcome(run, stages=list(STAGES), reused=True))
    stale = [r for r in runs if r not in fresh]
    if stale:
        with progress_display(ws, args.progress):
            # The runs start now, before Dagster plans the run that records them (its planned events,
            # a few per cell, take seconds at a suite's width): its step takes them over.
            started = ws.controls.started = SuiteExecution(ws, stale, STAGES)
            try:
                # One Dagster run over the rectangle of cells the stale runs span; the config names
                # exactly which runs are the invocation's (a cell of the rectangle may hold another's).
                result = defs.get_job_def("run_layers").execute_in_process(
                    instance=instance, resources=resources, raise_on_error=False,
                    run_config={"ops": {"layers": {"config": {"runs": [r.key for r in stale]}}}, **QUIET},
                    tags={**tags, **grid_range_tags(instance, [cells[r] for r in stale])})
            finally:  # not taken (the run failed before its step): its runs are not left running
                ws.controls.started = None
                started.close()
        if not result.success and len(outcomes) < len(runs):  # the step failed outside any run (bug, bad config)
            step_errors = [e for e in result.all_events if e.is_step_failure]
            error = step_errors[0].step_failure_data.error if step_errors else None
            raise MedhelmError(f"run_layers failed: {error.message.strip() if error else 'see the Dagster run'}")

    print(summary_line(outcomes), file=sys.stderr)
    if any(isinstance(o.error, BudgetExhausted) or not o.started for o in outcomes):
        done = sum(o.ok for o in outcomes)
        partial = sum(isinstance(o.error, BudgetExhausted) for o in outcomes)
        print(f"medhelm-run: stopped at --budget {args.budget}: {done} runs complete, {partial} partial, "
              f"{len(runs) - done - partial} not started. Rerun the same command to resume.", file=sys.stderr)
        return BUDGET_EXIT
    failures = [o for o in outcomes if o.error is not None]
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
    add_storage_argument(parser)
    parser.add_argument("--local-path", default="prod_env")
    args = parser.parse_args(argv)
    warnings.filterwarnings("ignore")
    if bool(args.release) != bool(args.suites) or (args.suite and args.release):
        parser.error("use --suite S, or --release R --suites S1 S2 ...")
    if not args.suite and not args.release:
        from medhelm_core.editions import load_edition

        try:
            edition = load_edition(args.edition)
        except MedhelmError as e:
            print(f"medhelm-summarize: error: {e}", file=sys.stderr)
            return 2
        if edition.summarize_default_suite is None:
            parser.error(f"--suite or --release is required (as {edition.upstream}'s helm-summarize requires)")
        args.suite = edition.summarize_default_suite
    return _one_line_errors("medhelm-summarize", lambda: _summarize(_checked_summarize_args(args)))


def _checked_summarize_args(args):
    """The options, and the schema (read whole: a file that is missing or not a schema), before
    anything is written."""
    from medhelm_core.summarize.schema import check_schema_file

    check_output_folder("--output-path", args.output_path)
    check_name("--release", args.release)
    if args.schema_path and args.auto_generate_schema:
        raise MedhelmError("give --schema-path or --auto-generate-schema, not both")
    if args.schema_path:
        check_schema_file("--schema-path", args.schema_path)
    return args


def _check_suites_exist(output_path: str, suites: list[str], storage: str | None = None) -> dict[str, str]:
    """Stop before anything is written when a suite has no runs (HELM would write an empty
    leaderboard). Returns the edition of each suite's runs."""
    import duckdb

    from medhelm_core.lake_store import open_store
    from medhelm_core.storage import resolve_storage
    from medhelm_core.summarize.tables import suite_editions

    store = open_store(resolve_storage(storage, output_path), output_path)
    if not store.exists():
        raise MedhelmError(f"no runs in {output_path}: {store.where} does not exist (run medhelm-run first)")
    try:
        with store.connect(read_only=True) as conn:  # waits for a running writer, as the summarize would
            known = suite_editions(conn)
    except duckdb.CatalogException:
        known = {}  # no `runs` table: nothing was ever run into this file
    missing = [s for s in suites if s not in known]
    if missing:
        there = ", ".join(known) if known else "none"
        raise MedhelmError(f"suite {missing[0]!r} has no runs in {store.where} (suites there: {there})")
    return {s: known[s] for s in suites}


def _summarize(args) -> int:
    import dagster as dg

    from medhelm_core.editions import edition_of_suites

    edition = edition_of_suites(_check_suites_exist(args.output_path, args.suites or [args.suite], args.storage),
                                args.edition)
    if not args.schema_path and not args.auto_generate_schema:
        args.schema_path = str(edition.schema_path)

    from assets.leaderboard import SUMMARY_ASSETS
    from assets.resources import MedhelmResource

    instance = dagster_instance(args.output_path)
    resources = {"medhelm": MedhelmResource(output_path=str(args.output_path), local_path=str(args.local_path),
                                            storage=args.storage)}
    config = {"suite": args.suite, "suites": args.suites, "release": args.release,
              "schema_path": args.schema_path, "auto_generate_schema": args.auto_generate_schema,
              "edition": edition.name}
    dg.materialize(SUMMARY_ASSETS, instance=instance, resources=resources,
                   run_config={"ops": {"summarize_target": {"config": config}}, **QUIET})
    target = Path(args.output_path) / (f"releases/{args.release}" if args.release else f"runs/{args.suite}")
    _print_top_table(target)
    print(f"wrote {target}", file=sys.stderr)
    return 0


def _print_top_table(base: Path) -> None:
    """Show the first leaderboard table (as HELM's page would, 3 decimals) on stdout."""
    import json

    from medhelm_core.summarize.files import top_table_markdown

    schema_path = base / "schema.json"
    if schema_path.exists():
        table = top_table_markdown(base, json.loads(schema_path.read_text(encoding="utf-8")))
        if table:
            print(table)
