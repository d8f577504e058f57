"""The command lines: `medhelm-run` (run.py), `medhelm-summarize` (summarize.py), `medhelm-import`
(imports.py), `medhelm-server` and `medhelm-export` (serve.py). HELM's flags, checked before anything
is written, and one line per outcome; the work is the library's (`medhelm_core`) and, for a run or a
summary, the code location's declared jobs (`medhelm_dagster.launch`), imported only by a command
that launches them, so `--help`, `--dry-run` and bad arguments answer without Dagster."""


def __getattr__(name: str):
    # `from medhelm_cli import run_main`: each command's module loads only when asked for, so one
    # command never pays for another's imports.
    if name == "run_main":
        from medhelm_cli.run import run_main
        return run_main
    if name == "summarize_main":
        from medhelm_cli.summarize import summarize_main
        return summarize_main
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["run_main", "summarize_main"]
