"""Markdown previews for the Dagster UI (materialization metadata of `leaderboard_files`): the
leaderboard as HELM shows it, row counts, costs, judge statuses and the published comparison, from
the page's snapshot of the current target (`medhelm_core.server.data.current_snapshot`, passed in)."""
from __future__ import annotations

from typing import Any

import duckdb

from .format import helm_number, page_number
from .write import query

PIPELINE_TABLES = ["run_entries", "datasets", "instances", "requests", "completions", "completion_errors",
                   "annotations", "judge_verdicts", "jury_scores", "instance_stats", "runs", "run_stats",
                   "group_tables", "table_rows", "table_cells", "row_aggregates", "leaderboard_comparison"]


def _md_escape(s: Any) -> str:
    return str(s).replace("|", "\\|").replace("\n", " ")


def table_markdown(table: dict, transposed: bool = True) -> str:
    """A HELM table as markdown, as the page shows it: values with 3 decimals (HELM's rounding), the
    page's one model order (`order`, from data.py; else sorted by column 1 as HELM's page), columns no
    model has a value for left out (models as columns when transposed, as HELM shows MedHELM)."""
    header, rows = table["header"], table["rows"]
    if table.get("order") and len(table["order"]) == len(rows):
        rows = [rows[i] for i in table["order"]]
    elif len(header) > 1:
        lower = header[1].get("lower_is_better")
        present = [r for r in rows if len(r) > 1 and r[1].get("value") is not None]
        missing = [r for r in rows if not (len(r) > 1 and r[1].get("value") is not None)]
        if all(isinstance(r[1]["value"], (int, float)) for r in present):
            present = sorted(present, key=lambda r: r[1]["value"], reverse=not lower)
        rows = present + missing
    cols = [j for j in range(1, len(header)) if any(j < len(r) and r[j].get("value") is not None for r in rows)]
    names = [_md_escape(r[0].get("value", "")) for r in rows]
    if transposed:
        lines = ["| " + _md_escape(header[0].get("value", "Model")) + " | " + " | ".join(names) + " |",
                 "|---|" + "---:|" * len(rows)]
        for j in cols:
            cells = [page_number(r[j].get("value")) if j < len(r) else "-" for r in rows]
            lines.append("| " + _md_escape(header[j].get("value", "")) + " | " + " | ".join(cells) + " |")
    else:
        lines = ["| " + " | ".join(_md_escape(header[j].get("value", "")) for j in [0, *cols]) + " |",
                 "|---|" + "---:|" * len(cols)]
        for r, name in zip(rows, names):
            lines.append("| " + name + " | " + " | ".join(page_number(r[j].get("value")) if j < len(r) else "-"
                                                          for j in cols) + " |")
    return "\n".join(lines)


def _tables(conn: duckdb.DuckDBPyConnection) -> set[str]:
    """Tables and views of the current database's main schema."""
    return {r[0] for r in conn.execute(
        "SELECT table_name FROM duckdb_tables() WHERE schema_name = 'main' AND database_name = current_database()"
        " UNION SELECT view_name FROM duckdb_views() WHERE schema_name = 'main'"
        " AND database_name = current_database()").fetchall()}


def leaderboard_metadata(conn: duckdb.DuckDBPyConnection, snap: dict | None,
                         output_path: Any = None) -> dict[str, Any]:
    """{name: markdown or number} for the current summarize target of `conn`, whose page snapshot is
    `snap` (None: nothing summarized)."""
    if not snap:
        return {}
    mode, name, suites = snap["mode"], snap["target"], list(snap["suites"])
    out: dict[str, Any] = {}
    top = snap["top"]
    if top and snap["tables"].get(top):
        parts = []
        for t in snap["tables"][top]:
            parts.append(f"**{t['title']}**\n\n" + table_markdown(t))
        out["leaderboard_md"] = f"### {top} ({mode} {name})\n\n" + "\n\n".join(parts)
    groups = [g for g in snap["groups"] if g["has_tables"]]
    out["groups_md"] = "\n".join(
        ["| group | kind | tables |", "|---|---|---:|"]
        + [f"| {_md_escape(g['display_name'])} | {g['kind']} | {g['n_tables']} |" for g in groups])
    present = _tables(conn)
    counts = []
    for t in PIPELINE_TABLES:
        if t in present:
            counts.append((t, conn.execute(f'SELECT count(*) FROM "{t}"').fetchone()[0]))
    out["row_counts_md"] = "\n".join(["| table | rows |", "|---|---:|"] + [f"| {t} | {n} |" for t, n in counts])
    costs = snap["costs"]
    cost_lines = ["| model deployment | prompt tokens | completion tokens |"
                  + (" model cost (USD) | judge cost (USD) |" if costs["unit"] == "USD" else ""),
                  "|---|---:|---:|" + ("---:|---:|" if costs["unit"] == "USD" else "")]
    total = 0.0
    for dep, d in sorted(costs["by_deployment"].items(), key=lambda kv: str(kv[0])):
        line = f"| {_md_escape(dep)} | {helm_number(d.get('num_prompt_tokens'))} | {helm_number(d.get('num_completion_tokens'))} |"
        if costs["unit"] == "USD":
            line += f" {d.get('cost') if d.get('cost') is not None else '-'} | {d.get('judge_cost') if d.get('judge_cost') is not None else '-'} |"
            total += (d.get("cost") or 0) + (d.get("judge_cost") or 0)
        cost_lines.append(line)
    out["costs_md"] = "\n".join(cost_lines) + f"\n\nsource: {costs['source']}"
    if costs["unit"] == "USD":
        out["cost_usd_total"] = float(total)
    if "judge_verdicts" in present:
        st = query(conn, "SELECT status, count(*) AS n FROM judge_verdicts WHERE suite IN (SELECT unnest(?)) "
                         "GROUP BY status ORDER BY status", [suites])
        if st:
            out["judge_status_md"] = "\n".join(["| judge status | verdicts |", "|---|---:|"]
                                               + [f"| {r['status']} | {r['n']} |" for r in st])
    cmp = snap["comparison"]
    if cmp["rows"]:
        sm = cmp["summary"]
        lines = [f"valued cells equal: {sm['valued_equal']}/{sm['valued']}, missing on both sides: "
                 f"{sm['both_missing']}, differ: {sm['differ']}", "",
                 "| cause | cells |", "|---|---:|"] + [f"| {_md_escape(c)} | {n} |" for c, n in sm["causes"].items()]
        out["published_comparison_md"] = "\n".join(lines)
        out["cells_differing_from_published"] = int(sm["differ"])
    out["runs"] = len(snap["runs"])
    out["private_tier_runs"] = sum(n for t, n in snap["tiers"].items() if t != "public")
    if output_path is not None:
        out["view"] = f"medhelm-server --{mode} {name} --output-path {output_path}  (http://127.0.0.1:8000)"
    return out
