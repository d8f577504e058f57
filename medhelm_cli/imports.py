"""`medhelm-import`: published HELM results (GCS or disk) into DuckDB, rebuilt and compared.

    medhelm-import --source gs://crfm-helm-public/medhelm/benchmark_output --release v2.0.0
    medhelm-import --source ../shared/oracle/synthetic/benchmark_output --release oracle
    medhelm-import --source ../shared/oracle/public/benchmark_output --suite public-n50
    medhelm-import --human-ratings medhelm_human_annotation.csv -o benchmark_output
    medhelm-import --rejudge my_judges.yaml --suite public-n50 --local-path prod_env   # -> public-n50@my_judges

Dagster-free on purpose (it starts in well under a second); the Dagster assets in
medhelm_dagster/published.py call the same functions.
"""
from __future__ import annotations

import argparse
import os
import sys
import time
import warnings
from typing import Optional

from medhelm_core.errors import MedhelmError, unexpected_line
from medhelm_core.options import check_amount, check_count, check_input_file, check_name, check_output_folder
from medhelm_core.selections import ImportSelection, add_arguments
from medhelm_core.lake_store import open_store
from medhelm_core.storage import add_storage_argument, resolve_storage

PROG = "medhelm-import"
LATEST = "latest"


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog=PROG, description="Import published HELM results (a release or a suite of "
                                "a benchmark_output on GCS, on disk or behind any fsspec URL), rebuild the "
                                "leaderboard from them and compare it with the published one, cell by cell.")
    # --source with --release or --suite, unless --human-ratings comes alone (checked in `main`)
    add_arguments(p, ImportSelection, only=("source",), defaults={"source": None})
    add_arguments(p.add_mutually_exclusive_group(), ImportSelection, only=("release", "suite"))
    add_arguments(p, ImportSelection, only=("with_completions",))
    p.add_argument("--no-per-instance", action="store_true", help="skip per_instance_stats.json (tables only)")
    p.add_argument("--rescore", action="store_true",
                   help="re-score the published completions with our metrics (implies --with-completions)")
    p.add_argument("--output-path", "-o", default="benchmark_output", help="where medhelm.duckdb lives")
    add_storage_argument(p)
    add_arguments(p, ImportSelection, only=("suite_prefix", "jobs", "token", "endpoint_url"), aliases={"jobs": ["-j"]})
    p.add_argument("--no-compare", action="store_true", help="import only; do not rebuild and compare")
    p.add_argument("--rebuild", action="store_true",
                   help="rebuild and compare even when nothing the rebuild reads changed since the last one")
    p.add_argument("--write-files", metavar="DIR", default=None,
                   help="also write the rebuilt leaderboard's HELM files under DIR (releases/<R>/ or runs/<S>/)")
    p.add_argument("--local-path", default="prod_env",
                   help="HELM prod_env whose model_deployments.yaml gives tokenizers for --rescore, and the judges' "
                        "deployments (and credentials.conf) for --rejudge")
    p.add_argument("--rejudge", metavar="FILE", default=None,
                   help="send the stored completions of the target (--release or --suite: imported "
                        "--with-completions, or a suite of your own) to the jury of FILE (HELM's judges.yaml form, or "
                        "a --judges preset such as public:gpt) and land them as the target <target>@<jury>, the "
                        "original untouched; the estimate is printed first; judge calls already paid are reused")
    p.add_argument("--estimate-cost", action="store_true",
                   help="with --rejudge: print what the new jury's calls would cost, and stop")
    p.add_argument("--budget", type=float, metavar="USD", default=None,
                   help="with --rejudge: send no judge request whose worst case would take the spend past USD")
    p.add_argument("--human-ratings", metavar="CSV", default=None,
                   help="load clinicians' ratings in the MedHELM authors' format (medhelm_human_annotation.csv) "
                        "into human_ratings, replacing those there, for analytics' judge_agreement; alone, "
                        "then rebuild the imported targets they rate")
    p.add_argument("--quiet", "-q", action="store_true")
    p.add_argument("--offline-hint", default=PROG, help=argparse.SUPPRESS)  # the command to suggest offline
    return p


def main(argv: Optional[list[str]] = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.rejudge is None and (args.estimate_cost or args.budget is not None):
        parser.error("--estimate-cost and --budget go with --rejudge FILE")
    if args.rejudge is not None and args.source is None:   # a target already in the store
        if args.release is None and args.suite is None:
            parser.error("--rejudge needs the target: --release R or --suite S (with --source: imported first)")
    elif args.human_ratings is None or args.source is not None:   # an import: argparse's own messages
        if args.source is None:
            parser.error("the following arguments are required: --source (or --human-ratings CSV alone)")
        if args.release is None and args.suite is None:
            parser.error("one of the arguments --release --suite is required")
    warnings.filterwarnings("ignore")
    try:
        return run(args)
    except MedhelmError as e:
        from medhelm_core.published.source import SourceUnreachable

        msg = str(e)
        if isinstance(e, SourceUnreachable):
            target = f"--release {args.release}" if args.release else f"--suite {args.suite}"
            if args.release == LATEST:
                target = "--release <R>"
            msg += (f"; no network? reproduce from a local copy instead: "
                    f"{args.offline_hint} --source /path/to/local/benchmark_output {target}")
        print(f"{PROG}: error: {msg}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"{PROG}: interrupted; rerun the same command to resume", file=sys.stderr)
        return 130
    except Exception as e:  # noqa: BLE001 - a storage/network error: one line, not a traceback
        if os.environ.get("MEDHELM_DEBUG"):
            raise
        print(unexpected_line(PROG, e).replace(" (MEDHELM_DEBUG=1", " (rerun to resume; MEDHELM_DEBUG=1"),
              file=sys.stderr)
        return 1


def check_args(args) -> None:
    """The options, before anything is read or written."""
    check_output_folder("--output-path", args.output_path)
    if args.write_files:
        check_output_folder("--write-files", args.write_files)
    check_count("--jobs", args.jobs)
    check_name("--release", args.release)
    check_name("--suite", args.suite)
    if args.suite_prefix:
        check_name("--suite-prefix", args.suite_prefix)
    if args.human_ratings is not None:
        check_input_file("--human-ratings", args.human_ratings)
    check_amount("--budget", args.budget)


def write_ratings(store, rows: list[dict]) -> None:
    from medhelm_core.summarize.human_ratings import write_human_ratings

    with store.connect() as conn:
        write_human_ratings(conn, rows)


def report_ratings(store, args, rows: list[dict], *, rebuild: bool) -> None:
    """--human-ratings, once loaded: how many, and the items no judged instance in the store matches,
    named in one line; with `rebuild`, the imported targets they rate are rebuilt (their
    judge_agreement; nothing is fetched), and our own suites are named, for their next medhelm-summarize."""
    from medhelm_core.summarize.human_ratings import ratings_report

    with store.connect() as conn:
        report = ratings_report(conn, args.human_ratings, rows)
        imported: dict[str, list[str]] = {}
        if conn.execute("SELECT count(*) FROM information_schema.tables WHERE table_name = 'published_targets' "
                        "AND table_schema = 'main' AND table_catalog = current_database()").fetchone()[0]:
            imported = {t: list(suites) for t, suites in conn.execute(
                "SELECT target, local_suites FROM published_targets ORDER BY target").fetchall()}
    print(report.summary_line())
    unmatched = report.unmatched_line(PROG)
    if unmatched:
        print(unmatched, file=sys.stderr)
    if not rebuild:
        return
    targets = [t for t, suites in imported.items() if set(suites) & set(report.suites)]
    own = [s for s in report.suites if not any(s in suites for suites in imported.values())]
    if own:
        print(f"{PROG}: judge_agreement of {', '.join(own)} follows at the next medhelm-summarize of the suite "
              f"(or of a release holding it)", file=sys.stderr)
    if targets:
        from medhelm_core.published.leaderboard import rebuild_and_compare

        for target in targets:
            for line in rebuild_and_compare(store, target, output_dir=args.write_files, force=args.rebuild).lines():
                print(line)


def run(args) -> int:
    from medhelm_core.published.importer import Importer
    from medhelm_core.published.source import open_source

    check_args(args)
    start = time.time()
    say = (lambda m: None) if args.quiet else (lambda m: print(f"[import] {m}", file=sys.stderr, flush=True))
    ratings = None
    jury = None
    if args.rejudge is not None:   # read first: a bad judges file stops before anything is fetched or written
        from medhelm_core.run.rejudge import load_jury

        jury = load_jury(args.rejudge, flag="--rejudge")
    if args.human_ratings is not None:   # read first: a bad file stops before anything is fetched or written
        from medhelm_core.summarize.human_ratings import read_human_ratings

        ratings = read_human_ratings(args.human_ratings)
    if args.source is None:   # --human-ratings and/or --rejudge on what the store holds
        store = open_store(resolve_storage(args.storage, args.output_path), args.output_path)
        if ratings is not None:
            write_ratings(store, ratings)
            report_ratings(store, args, ratings, rebuild=not args.no_compare)
        if jury is not None:
            rejudge(args, args.release or args.suite, say)
        say(f"done in {time.time() - start:.1f}s; tables in {store.where}")
        return 0
    source = open_source(args.source, token=args.token, endpoint_url=args.endpoint_url)
    source.preflight()  # unreachable or not a folder: say so before anything is created
    if args.release == LATEST:
        from medhelm_core.published.source import newest_release

        names = source.releases()
        args.release = newest_release(names)
        if args.release is None:
            raise MedhelmError(f"no releases under {source.display('releases/')}; name one with --release R "
                               f"or a suite with --suite S")
        print(f"{PROG}: newest release on {args.source}: {args.release} (of {len(names)}: {', '.join(names)})",
              file=sys.stderr)
    store = open_store(resolve_storage(args.storage, args.output_path), args.output_path)
    if ratings is not None:   # before the import, whose rebuild below then holds the jury against them
        write_ratings(store, ratings)
    with_completions = args.with_completions or args.rescore or args.rejudge is not None
    report = Importer(store, source, release=args.release, suite=args.suite, with_completions=with_completions,
                      per_instance=not args.no_per_instance, jobs=args.jobs, suite_prefix=args.suite_prefix,
                      progress=say).run()
    print(report.summary_line())
    for prob in report.problems:
        print(f"warning: {prob.line()}", file=sys.stderr)
    if ratings is not None:   # matched against what the store holds now, this import included
        report_ratings(store, args, ratings, rebuild=False)
    if not args.no_compare:
        from medhelm_core.published.leaderboard import rebuild_and_compare

        summary = rebuild_and_compare(store, report.target, output_dir=args.write_files, force=args.rebuild)
        for line in summary.lines():
            print(line)
    if args.rescore:
        from medhelm_core.published.rescore import rescore_target

        rs = rescore_target(store, report.target, local_path=args.local_path, progress=say)
        for line in rs.lines():
            print(line)
    if jury is not None:
        rejudge(args, report.target, say)
    say(f"done in {time.time() - start:.1f}s; tables in {store.where}")
    return 0


def rejudge(args, target: str, say) -> None:
    """--rejudge FILE on `target`: the estimate (and nothing else with --estimate-cost), then the new
    jury's calls (those already paid reused) and the target `<target>@<jury>`, summarized."""
    from medhelm_core.costs import Budget
    from medhelm_core.engine import RunControls
    from medhelm_core.run.rejudge import rejudge_target
    from medhelm_core.run.workspace import Workspace

    controls = RunControls(budget=Budget(args.budget) if args.budget is not None else None)
    ws = Workspace(output_path=args.output_path, local_path=args.local_path, storage=args.storage, controls=controls)
    rejudge_target(ws, target, args.rejudge, progress=say, estimate_only=args.estimate_cost,
                   output_dir=args.write_files, flag="--rejudge")


if __name__ == "__main__":
    sys.exit(main())
