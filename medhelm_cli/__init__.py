"""The command lines `medhelm-run` and `medhelm-summarize`: HELM's flags, checked before anything is
written, and one line per outcome. What to do is the run layer's to decide (`medhelm_core.run`);
the work is done by the code location's declared jobs (`medhelm_dagster.launch`), imported only by
a command that launches them, so `--help`, `--dry-run` and bad arguments answer without Dagster."""
from medhelm_cli.run import run_main
from medhelm_cli.summarize import summarize_main

__all__ = ["run_main", "summarize_main"]
