"""After HELM's summarize files are written (`pipeline.write_files`): the display files
(instances.json, display_predictions.json, display_requests.json) of every run of the target we hold
the requests of, and the first leaderboard table as the terminal shows it.

A run's outputs are the run layer's: the caller passes them in (`RunOutputs`; the Dagster asset's
comes from `medhelm_core.run.scores`). A run whose HELM files are not in this output path (another
machine ran it into the shared store) gets them too, through the same object."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Protocol

import duckdb

from medhelm_core.helm_files import run_dir, write_display_files


class RunOutputs(Protocol):
    """What the run layer holds of one run of `suite`."""

    def outputs(self, suite: str, run_name: str) -> dict:
        """The run spec, request states, stats and per-instance stats as stored."""

    def write_run_files(self, suite: str, run_name: str, outputs: dict) -> None:
        """The run's own HELM files (run_spec.json, stats.json, ...) from those outputs."""


def runs_with_requests(conn: duckdb.DuckDBPyConnection) -> list[tuple[str, str]]:
    """(suite, run_name) of the target's runs whose requests are in the store (runs of a suite
    loaded from HELM's files, or imported, have none: no display files for them)."""
    return conn.execute(
        "SELECT DISTINCT t.suite, t.run_name FROM target_runs t"
        " WHERE EXISTS (SELECT 1 FROM requests q WHERE q.suite = t.suite AND q.run_name = t.run_name)"
        " ORDER BY ALL").fetchall()


def write_run_display_files(output_path: str | Path, base: str | Path, runs: list[tuple[str, str]],
                            run_outputs: RunOutputs) -> dict:
    """Each run's display files, against the target's schema.json under `base` (the directory
    `pipeline.write_files` returned); returns what was written and the first table as markdown."""
    base = Path(base)
    schema = json.loads((base / "schema.json").read_text(encoding="utf-8"))
    written = 0
    for suite, run_name in runs:
        computed = run_outputs.outputs(suite, run_name)
        directory = run_dir(output_path, suite, run_name)
        if not (directory / "stats.json").exists():   # run by another process into a shared store (--storage)
            run_outputs.write_run_files(suite, run_name, computed)
            written += 1
        write_display_files(directory, computed["run_spec"], computed["request_states"],
                            computed["per_instance_stats"], schema)
    return {"directory": str(base), "runs_with_display_files": len(runs), "run_files_written": written,
            "top_table_markdown": top_table_markdown(base, schema)}


def top_table_markdown(base: Path, schema: dict, skip_empty_columns: bool = True) -> str:
    """The first table of the first run group as markdown, values shown as HELM's page shows them
    (3 decimals, "-" when missing); columns no model has a value for are left out."""
    groups = schema.get("run_groups") or []
    if not groups:
        return ""
    path = base / "groups" / f"{groups[0]['name']}.json"
    if not path.exists():
        return ""
    table = json.loads(path.read_text(encoding="utf-8"))[0]
    keep = [i for i, _ in enumerate(table["header"])
            if i == 0 or not skip_empty_columns or any(row[i].get("value") is not None for row in table["rows"])]
    header = [table["header"][i].get("value", "") for i in keep]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for row in table["rows"]:
        cells = []
        for i in keep:
            v = row[i].get("value")
            cells.append("-" if v is None else (f"{v:.3f}" if isinstance(v, float) else str(v)))
        lines.append("| " + " | ".join(cells) + " |")
    return f"**{table.get('title', '')}**\n\n" + "\n".join(lines)
