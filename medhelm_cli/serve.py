"""Command lines: `medhelm-server` (serve the page) and `medhelm-server export` / `medhelm-export`."""
from __future__ import annotations

import argparse
import logging
import sys

from medhelm_core.errors import MedhelmError
from medhelm_core.storage import add_storage_argument, resolve_storage

from medhelm_core.server.data import DataError, Reader


def _target_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--suite", help="the suite to show (as helm-server --suite)")
    p.add_argument("--release", help="the release to show (as helm-server --release)")
    p.add_argument("--suites", nargs="+", help="the release's suites, if its summary.json is not on disk")
    p.add_argument("--output-path", "-o", default="benchmark_output", help="holds medhelm.duckdb (default: %(default)s)")
    add_storage_argument(p)


def _reader(args: argparse.Namespace) -> Reader:
    if args.suite and args.release:
        raise DataError("give --suite or --release, not both")
    try:
        storage = resolve_storage(args.storage, args.output_path)
    except MedhelmError as e:
        raise DataError(str(e)) from None
    if storage.kind == "ducklake":
        return Reader(args.output_path, suite=args.suite, release=args.release, suites=args.suites, lake=storage)
    return Reader(args.output_path, suite=args.suite, release=args.release, suites=args.suites, db_path=storage.path)


def export_main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="medhelm-export",
                                description="Write a shareable static copy of the leaderboard page; private-tier "
                                            "prompts, completions and judge explanations are redacted.")
    _target_args(p)
    p.add_argument("--out", required=True, help="directory to write (index.html, static/, data/); it is built beside "
                                                "DIR and swapped in only when complete")
    p.add_argument("--no-runs", action="store_true", help="leaderboard tables only, no per-run instance pages")
    p.add_argument("--force", action="store_true",
                   help="replace DIR even if it holds files an export did not make (they are deleted)")
    args = p.parse_args(argv)
    from medhelm_core.server.export import ExportError, export_static

    try:
        info = export_static(_reader(args), args.out, include_runs=not args.no_runs, force=args.force)
    except (DataError, ExportError, MedhelmError) as e:
        return _fail("medhelm-export", str(e))
    except OSError as e:
        where = f": {e.filename}" if e.filename else ""
        return _fail("medhelm-export", f"cannot write --out {args.out}{where}: {e.strerror or e}")
    except Exception as e:  # noqa: BLE001 - the docs promise one line; nothing was written
        return _fail("medhelm-export", f"{type(e).__name__}: {e} (nothing written to {args.out})")
    except KeyboardInterrupt:
        _fail("medhelm-export", f"interrupted; {args.out} is as it was")
        return 130
    print(f"medhelm-export: wrote {info['out']}/index.html ({info['runs']} runs, "
          f"{info['redacted_runs']} with private-tier text redacted)")
    return 0


def _fail(prog: str, message: str, limit: int = 500) -> int:
    """One line on stderr (newlines folded, long values shortened); exit status 2."""
    line = " ".join(message.split())
    if len(line) > limit:
        line = line[: limit - 1] + "…"
    print(f"{prog}: error: {line}", file=sys.stderr)
    return 2


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] == "export":
        return export_main(argv[1:])
    p = argparse.ArgumentParser(prog="medhelm-server",
                                description="Serve the MedHELM leaderboard from <output-path>/medhelm.duckdb (or --storage) "
                                            "(read-only). `medhelm-server export --out DIR …` writes a shareable "
                                            "static copy instead.")
    _target_args(p)
    p.add_argument("--port", type=int, default=8000, help="default: %(default)s")
    p.add_argument("--host", default="127.0.0.1",
                   help="default: %(default)s (loopback: the page shows private-tier text in full)")
    p.add_argument("--allowed-host", action="append", default=[], metavar="NAME",
                   help="also answer requests whose Host is NAME (repeatable; the page answers only loopback names "
                        "and --host otherwise, against DNS rebinding)")
    p.add_argument("--redact", action="store_true", help="serve private-tier text redacted, as the export does")
    p.add_argument("--verbose", "-v", action="store_true", help="log every request")
    args = p.parse_args(argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING, format="%(message)s")
    from medhelm_core.server.app import run_forever
    from medhelm_core.server.guard import GuardError, HostGuard

    try:
        HostGuard(args.host, args.allowed_host)
    except GuardError as e:
        print(f"medhelm-server: error: --allowed-host {e}", file=sys.stderr)
        return 2
    try:
        reader = _reader(args)
        reader.snapshot()   # fail now, with the reason, rather than on the first page view
    except DataError as e:
        print(f"medhelm-server: error: {e}", file=sys.stderr)
        return 2
    if args.host not in ("127.0.0.1", "localhost", "::1") and not args.redact:
        print("medhelm-server: warning: serving beyond loopback shows private-tier text; add --redact "
              "to serve it redacted", file=sys.stderr)
    try:
        run_forever(reader, args.host, args.port, redact=args.redact, allowed_hosts=args.allowed_host)
    except OSError as e:
        print(f"medhelm-server: error: cannot listen on {args.host}:{args.port}: {e.strerror or e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
