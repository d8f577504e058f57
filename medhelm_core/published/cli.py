"""`medhelm-import`: published HELM results (GCS or disk) into DuckDB, rebuilt and compared.

    medhelm-import --source gs://crfm-helm-public/medhelm/benchmark_output --release v2.0.0
    medhelm-import --source ../shared/oracle/synthetic/benchmark_output --release oracle
    medhelm-import --source ../shared/oracle/public/benchmark_output --suite public-n50

Dagster-free on purpose (it starts in well under a second); the Dagster assets in
assets/published.py call the same functions.
"""
from __future__ import annotations

import argparse
import os
import sys
import time
import warnings
from typing import Optional

from medhelm_core.errors import MedhelmError, unexpected_line
from medhelm_core.options import check_count, check_name, check_output_folder
from medhelm_core.selections import ImportSelection, add_arguments
from medhelm_core.lake_store import open_store
from medhelm_core.storage import add_storage_argument, resolve_storage

PROG = "medhelm-import"
LATEST = "latest"


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog=PROG, description="Import published HELM results (a release or a suite of "
                                "a benchmark_output on GCS, on disk or behind any fsspec URL), rebuild the "
                                "leaderboard from them and compare it with the published one, cell by cell.")
    add_arguments(p, ImportSelection, required=("source",), only=("source",))
    add_arguments(p.add_mutually_exclusive_group(required=True), ImportSelection, only=("release", "suite"))
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
                   help="HELM prod_env whose model_deployments.yaml gives tokenizers for --rescore")
    p.add_argument("--quiet", "-q", action="store_true")
    p.add_argument("--offline-hint", default=PROG, help=argparse.SUPPRESS)  # the command to suggest offline
    return p


def main(argv: Optional[list[str]] = None) -> int:
    args = build_parser().parse_args(argv)
    warnings.filterwarnings("ignore")
    try:
        return run(args)
    except MedhelmError as e:
        from .source import SourceUnreachable

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


def run(args) -> int:
    from .importer import Importer
    from .source import open_source

    check_args(args)
    start = time.time()
    say = (lambda m: None) if args.quiet else (lambda m: print(f"[import] {m}", file=sys.stderr, flush=True))
    source = open_source(args.source, token=args.token, endpoint_url=args.endpoint_url)
    source.preflight()  # unreachable or not a folder: say so before anything is created
    if args.release == LATEST:
        from .source import newest_release

        names = source.releases()
        args.release = newest_release(names)
        if args.release is None:
            raise MedhelmError(f"no releases under {source.display('releases/')}; name one with --release R "
                               f"or a suite with --suite S")
        print(f"{PROG}: newest release on {args.source}: {args.release} (of {len(names)}: {', '.join(names)})",
              file=sys.stderr)
    store = open_store(resolve_storage(args.storage, args.output_path), args.output_path)
    with_completions = args.with_completions or args.rescore
    report = Importer(store, source, release=args.release, suite=args.suite, with_completions=with_completions,
                      per_instance=not args.no_per_instance, jobs=args.jobs, suite_prefix=args.suite_prefix,
                      progress=say).run()
    print(report.summary_line())
    for prob in report.problems:
        print(f"warning: {prob.line()}", file=sys.stderr)
    if not args.no_compare:
        from .leaderboard import rebuild_and_compare

        summary = rebuild_and_compare(store, report.target, output_dir=args.write_files, force=args.rebuild)
        for line in summary.lines():
            print(line)
    if args.rescore:
        from .rescore import rescore_target

        rs = rescore_target(store, report.target, local_path=args.local_path, progress=say)
        for line in rs.lines():
            print(line)
    say(f"done in {time.time() - start:.1f}s; tables in {store.where}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
