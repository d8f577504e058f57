"""`medhelm-summarize`: HELM's helm-summarize, executed as the code location's leaderboard assets."""
from __future__ import annotations

import argparse
import json
import sys
import warnings
from pathlib import Path

from medhelm_cli.errors import one_line_errors
from medhelm_core.errors import MedhelmError
from medhelm_core.options import check_name, check_output_folder
from medhelm_core.selections import SummarizeSelection, add_arguments
from medhelm_core.storage import add_storage_argument

PROG = "medhelm-summarize"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=PROG, description="Build the leaderboard tables (as helm-summarize does).")
    add_arguments(parser, SummarizeSelection, defaults={"suite": None, "auto_generate_schema": False},
                  aliases={"schema_path": ["--schema"]})
    parser.add_argument("--output-path", "-o", default="benchmark_output")
    add_storage_argument(parser)
    parser.add_argument("--local-path", default="prod_env")
    return parser


def summarize_main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    warnings.filterwarnings("ignore")
    if bool(args.release) != bool(args.suites) or (args.suite and args.release):
        parser.error("use --suite S, or --release R --suites S1 S2 ...")
    if not args.suite and not args.release:
        from medhelm_core.editions import load_edition

        try:
            edition = load_edition(args.edition)
        except MedhelmError as e:
            print(f"{PROG}: error: {e}", file=sys.stderr)
            return 2
        if edition.summarize_default_suite is None:
            parser.error(f"--suite or --release is required (as {edition.upstream}'s helm-summarize requires)")
        args.suite = edition.summarize_default_suite
    return one_line_errors(PROG, lambda: _summarize(_checked(args)))


def _checked(args):
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


def _suite_editions(output_path: str, suites: list[str], storage: str | None = None) -> dict[str, str]:
    """The edition of each suite's runs; stops before anything is written when a suite has no runs
    (HELM would write an empty leaderboard)."""
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
    from medhelm_core.editions import edition_of_suites
    from medhelm_dagster.launch import summarize

    edition = edition_of_suites(_suite_editions(args.output_path, args.suites or [args.suite], args.storage),
                                args.edition)
    if not args.schema_path and not args.auto_generate_schema:
        args.schema_path = str(edition.schema_path)
    target = summarize(args.output_path, args.local_path, args.storage,
                       {"suite": args.suite, "suites": args.suites, "release": args.release,
                        "schema_path": args.schema_path, "auto_generate_schema": args.auto_generate_schema,
                        "edition": edition.name})
    _print_top_table(target)
    print(f"wrote {target}", file=sys.stderr)
    return 0


def _print_top_table(base: Path) -> None:
    """Show the first leaderboard table (as HELM's page would, 3 decimals) on stdout."""
    from medhelm_core.summarize.files import top_table_markdown

    schema_path = base / "schema.json"
    if schema_path.exists():
        table = top_table_markdown(base, json.loads(schema_path.read_text(encoding="utf-8")))
        if table:
            print(table)
