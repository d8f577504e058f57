"""After the SQL models ran: write helm-summarize's files for the target, and the display files
(instances.json, display_predictions.json, display_requests.json) of every run we hold; a run whose
HELM files are not in this output path (another machine ran it into the shared store) gets them too."""
from __future__ import annotations

import json
from pathlib import Path

from medhelm_core.run.scores import stored_run_outputs, write_files
from medhelm_core.run.workspace import RunRef
from medhelm_core.helm_files import run_dir, write_display_files
from medhelm_core.summarize.write import write_summarize_outputs


def write_leaderboard_files(ws) -> dict:
    with ws.store.connect() as conn:
        base = Path(write_summarize_outputs(conn, str(ws.output_path)))
        runs = conn.execute(
            "SELECT DISTINCT t.suite, t.run_name FROM target_runs t"
            " WHERE EXISTS (SELECT 1 FROM requests q WHERE q.suite = t.suite AND q.run_name = t.run_name)"
            " ORDER BY ALL").fetchall()
    schema = json.loads((base / "schema.json").read_text(encoding="utf-8"))
    written = 0
    for suite, run_name in runs:
        run = RunRef(suite, run_name)
        computed = stored_run_outputs(ws, run)
        directory = run_dir(ws.output_path, suite, run_name)
        if not (directory / "stats.json").exists():   # run by another process into a shared store (--storage)
            write_files(ws, run, computed)
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
