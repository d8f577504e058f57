"""Write helm-summarize's JSON (and LaTeX) files from the DuckDB tables the SQL models built.

Shapes follow HELM 0.5.16 (presentation/summarize.py, table.py): `json.dumps(..., indent=2)` of
dataclasses with None fields omitted, no trailing newline.  Nothing is recomputed here except
string formatting (cell descriptions, URLs, LaTeX).
"""
from __future__ import annotations

import datetime
import hashlib
import json
import math
import os
import urllib.parse
from typing import Any, Optional

import duckdb

from medhelm_core.editions import load_edition

from .analytics import write_analytics
from .tables import suite_editions

WIN_RATE_HEADER = {
    "value": "Mean win rate",
    "description": "How many models this model outperforms on average (over columns).",
    "markdown": False,
    "lower_is_better": False,
    "metadata": {},
}
MEAN_SCORE_HEADER = {
    "value": "Mean score",
    "description": "The mean of the scores from all columns.",
    "markdown": False,
    "metadata": {},   # lower_is_better = header[0].lower_is_better = None in HELM
}
MODEL_HEADER = {"value": "Model", "markdown": False, "metadata": {}}
BOLD = {"font-weight": "bold"}


# --------------------------------------------------------------------------- helpers

def query(conn: duckdb.DuckDBPyConnection, sql: str, params: Optional[list] = None) -> list[dict[str, Any]]:
    cur = conn.execute(sql, params or [])
    cols = [d[0] for d in cur.description]
    return [dict(zip(cols, r)) for r in cur.fetchall()]


def write_text(path: str, content: str) -> None:
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    with open(path, "w") as f:
        f.write(content)


def dumps(obj: Any) -> str:
    return json.dumps(obj, indent=2)


def _num(x: Optional[float]) -> str:
    """Stat.bare_str's number format."""
    if x is None:
        return "None"
    if math.isnan(x):
        return "NaN"
    if int(x) == x:
        return str(int(x))
    return str(round(x, 3))


def bare_str(count: Optional[int], mn: Optional[float], mean: Optional[float], mx: Optional[float],
             total: Optional[float]) -> str:
    """HELM's Stat.bare_str: "min=…, mean=…, max=…, sum=… (count)" or "(0)"."""
    if count and count > 0:
        return f"min={_num(mn)}, mean={_num(mean)}, max={_num(mx)}, sum={_num(total)} ({count})"
    return "(0)"


def benchmarking_url(params: dict[str, str]) -> str:
    return "?" + urllib.parse.urlencode(params, quote_via=urllib.parse.quote)


def table_to_latex(table: dict, table_name: str, skip_blank_columns: bool = True) -> str:
    """LaTeX rendering of a table, as HELM's table_to_latex (0.0 renders blank, like HELM)."""
    header, rows = table["header"], table["rows"]
    shown = list(range(len(header)))
    if skip_blank_columns:
        shown = [i for i in shown if not all(row[i].get("value") is None for row in rows)]
    lines = [
        "\\begin{table*}[htp]",
        "\\resizebox{\\textwidth}{!}{",
        "\\begin{tabular}{l" + "r" * (len(shown) - 1) + "}",
        "\\toprule",
        " & ".join(str(header[i].get("value")) for i in shown) + " \\\\",
        "\\midrule",
    ]
    for row in rows:
        lines.append(" & ".join(str(row[i].get("display_value") or row[i].get("value") or "") for i in shown) + " \\\\")
    lines += [
        "\\bottomrule",
        "\\end{tabular}}",
        "\\caption{Results for " + table_name + "}",
        "\\label{fig:" + table_name + "}",
        "\\end{table*}",
    ]
    return "\n".join(lines).replace("%", "\\%")


# --------------------------------------------------------------------------- leaderboard tables

def build_group_tables(conn: duckdb.DuckDBPyConnection) -> dict[str, list[dict]]:
    """group name -> its tables (HELM Table dicts, without the LaTeX/JSON links), in file order."""
    tables = query(conn, "SELECT * FROM group_tables ORDER BY table_id")
    columns: dict[int, list[dict]] = {}
    for c in query(conn, "SELECT * FROM table_columns ORDER BY table_id, col_idx"):
        columns.setdefault(c["table_id"], []).append(c)
    rows: dict[int, list[dict]] = {}
    for r in query(conn, "SELECT * FROM table_rows ORDER BY table_id, row_pos"):
        rows.setdefault(r["table_id"], []).append(r)
    cells: dict[tuple[int, int, int], dict] = {
        (c["table_id"], c["row_pos"], c["col_idx"]): c for c in query(conn, "SELECT * FROM table_cells")
    }
    aggregates: dict[tuple[int, int], dict] = {
        (a["table_id"], a["row_pos"]): a for a in query(conn, "SELECT * FROM row_aggregates")
    }

    out: dict[str, list[dict]] = {}
    for t in tables:
        tid = t["table_id"]
        cols, trows = columns.get(tid, []), rows.get(tid, [])
        scenario = t["is_scenario_table"]
        strategies = list(t["aggregation_strategies"] or [])
        header = [dict(MODEL_HEADER)]
        for s in strategies:
            if s == "win_rate":
                header.append(dict(WIN_RATE_HEADER))
            elif s == "mean":
                header.append(dict(MEAN_SCORE_HEADER))
            else:
                raise ValueError(f"Unknown aggregation strategy found: {s}")
        for c in cols:
            h: dict[str, Any] = {"value": c["header_value"], "description": c["header_description"], "markdown": False}
            if c["lower_is_better"] is not None:
                h["lower_is_better"] = c["lower_is_better"]
            md = {"metric": c["metadata_metric"], "run_group": c["metadata_run_group"]}
            if c["metadata_perturbation"] is not None:
                md["perturbation"] = c["metadata_perturbation"]
            h["metadata"] = md
            header.append(h)

        def url(names: list[str]) -> str:
            return benchmarking_url({"group": t["url_group"], "subgroup": t["title"], "runSpecs": json.dumps(names)})

        out_rows = []
        for r in trows:
            model_cell: dict[str, Any] = {"value": r["display_name"], "description": ""}
            if scenario:
                names = list(r["run_spec_names"])
                model_cell["href"] = url(names)
                model_cell["markdown"] = False
                model_cell["run_spec_names"] = names
            else:
                model_cell["markdown"] = False
            row = [model_cell]
            agg = aggregates.get((tid, r["row_pos"]), {})
            for s in strategies:
                if s == "win_rate":
                    v, best = agg.get("mean_win_rate"), agg.get("mean_win_rate_is_best")
                    if v is not None and not agg.get("mean_win_rate_exact", True):
                        raise ValueError(f"table {t['table_name']}: mean win rate could not be computed exactly")
                else:
                    if agg.get("mean_score_invalid", True):
                        raise ValueError("Cannot mean columns with different values for lower_is_better")
                    v, best = agg.get("mean_score"), False
                cell: dict[str, Any] = {} if v is None else {"value": v}
                if best:
                    cell["style"] = dict(BOLD)
                cell["markdown"] = False
                row.append(cell)
            for c in cols:
                x = cells[(tid, r["row_pos"], c["col_idx"])]
                if x["n_runs"] == 0:
                    row.append({"description": "No matching runs", "markdown": False})
                    continue
                if x["n_matched"] == 0:
                    row.append({"description": f"{x['n_runs']} matching runs, but no matching metrics",
                                "markdown": False})
                    continue
                cell = {} if x["value"] is None else {"value": x["value"]}
                cell["description"] = bare_str(x["stat_count"], x["stat_min"], x["stat_mean"], x["stat_max"],
                                               x["stat_sum"])
                cell["style"] = dict(BOLD) if x["is_best"] else {}
                cell["markdown"] = False
                if not scenario:
                    cell["run_spec_names"] = list(x["run_spec_names"])
                row.append(cell)
            out_rows.append(row)

        links = []
        if scenario:
            all_names = [n for r in sorted(trows, key=lambda r: r["first_entry"]) for n in r["run_spec_names"]]
            if 2 <= len(all_names) <= 5:
                links.append({"text": "compare all", "href": url(all_names)})
        out.setdefault(t["group_name"], []).append(
            {"title": t["title"], "header": header, "rows": out_rows, "links": links, "name": t["table_name"]})
    return out


def build_index_tables(conn: duckdb.DuckDBPyConnection) -> list[dict]:
    """groups.json: one table per run-group category."""
    header = [
        {"value": "Group", "markdown": False, "metadata": {}},
        {"value": "Description", "markdown": False, "metadata": {}},
        {"value": "Adaptation method", "description": "Adaptation strategy (e.g., generation)", "markdown": False,
         "metadata": {}},
        {"value": "# instances", "description": "Number of instances evaluated on", "markdown": False, "metadata": {}},
        {"value": "# references", "description": "Number of references provided per instance", "markdown": False,
         "metadata": {}},
        {"value": "# prompt tokens", "description": "Total number of prompt tokens", "markdown": False,
         "metadata": {}},
        {"value": "# completion tokens", "description": "Total number of completion tokens", "markdown": False,
         "metadata": {}},
        {"value": "# models", "description": "Number of models we're evaluating", "markdown": False, "metadata": {}},
    ]

    def stat_cell(r: dict, p: str, use_sum: bool) -> dict:
        if not r[f"{p}_n"]:
            return {"markdown": False}
        v = r[f"{p}_sum"] if use_sum else r[f"{p}_mean"]
        cell: dict[str, Any] = {} if v is None else {"value": v}
        cell["description"] = bare_str(r[f"{p}_count"], r[f"{p}_min"], r[f"{p}_mean"], r[f"{p}_max"], r[f"{p}_sum"])
        cell["markdown"] = False
        return cell

    tables: list[dict] = []
    by_cat: dict[int, dict] = {}
    for r in query(conn, "SELECT * FROM index_rows ORDER BY category_pos, run_group_pos"):
        t = by_cat.get(r["category_pos"])
        if t is None:
            t = {"title": r["category"], "header": header, "rows": [], "links": []}
            by_cat[r["category_pos"]] = t
            tables.append(t)
        name_cell: dict[str, Any] = {} if r["display_name"] is None else {"value": r["display_name"]}
        name_cell["href"] = benchmarking_url({"group": r["group_name"]})
        name_cell["markdown"] = False
        desc_cell: dict[str, Any] = {} if r["description"] is None else {"value": r["description"]}
        desc_cell["markdown"] = True
        t["rows"].append([
            name_cell,
            desc_cell,
            # HELM joins a Python set (order depends on the hash seed); we sort
            {"value": ", ".join(r["methods"]), "markdown": False},
            stat_cell(r, "inst", False),
            stat_cell(r, "ref", False),
            stat_cell(r, "prompt", True),
            stat_cell(r, "completion", True),
            {"value": r["num_models"], "markdown": False},
        ])
    return tables


def build_groups_metadata(conn: duckdb.DuckDBPyConnection, target: str) -> dict:
    out = {}
    for r in query(conn, "SELECT name, display_name, description, taxonomy FROM schema_run_groups "
                         "WHERE target = ? ORDER BY run_group_pos", [target]):
        out[r["name"]] = {"display_name": r["display_name"], "description": r["description"],
                          "taxonomy": json.loads(r["taxonomy"]) if r["taxonomy"] is not None else None}
    return out


def build_schema_json(conn: duckdb.DuckDBPyConnection, target: str) -> dict:
    doc = json.loads(query(conn, "SELECT schema_json FROM schema_document WHERE target = ?", [target])[0]["schema_json"])
    models = []
    for m in query(conn, "SELECT * FROM schema_models ORDER BY model_pos"):
        field = {"name": m["name"], "display_name": m["display_name"], "short_display_name": m["display_name"],
                 "description": m["description"], "creator_organization": m["creator_organization_name"],
                 "access": m["access"], "todo": False, "release_date": m["release_date"],
                 "num_parameters": m["num_parameters"]}
        models.append({k: v for k, v in field.items() if v is not None})
    doc["models"] = models
    return doc


def _float_field(obj: Optional[dict], key: str) -> None:
    v = obj.get(key) if isinstance(obj, dict) else None
    if isinstance(v, int) and not isinstance(v, bool):
        obj[key] = float(v)


def helm_typed_run_spec(run_spec: dict) -> dict:
    """The run spec as HELM re-serializes it after structuring it into dataclasses: fields typed
    float (AdapterSpec.temperature and the two nested float parameters) become floats, e.g. a
    run_spec.json `"temperature": 0` is written back as `0.0`."""
    spec = json.loads(json.dumps(run_spec))
    adapter = spec.get("adapter_spec")
    _float_field(adapter, "temperature")
    if isinstance(adapter, dict):
        _float_field(adapter.get("image_generation_parameters"), "guidance_scale")
        _float_field(adapter.get("reeval_parameters"), "model_ability")
    return spec


def build_runs(conn: duckdb.DuckDBPyConnection) -> list[dict]:
    """runs.json entries {run_path, run_spec, stats} in read order (duplicates kept)."""
    runs = query(conn, "SELECT run_id, suite, run_name, run_path, run_spec FROM target_runs ORDER BY run_id")
    stats: dict[tuple[str, str], list[dict]] = {}
    for s in query(conn, """
            SELECT s.* FROM run_stats s
            WHERE s.suite IN (SELECT suite FROM summarize_target)
            ORDER BY s.suite, s.run_name, s.ordinal"""):
        name: dict[str, Any] = {"name": s["name"]}
        for k in ("split", "sub_split"):
            if s[k] is not None:
                name[k] = s[k]
        if s["perturbation"] is not None:
            name["perturbation"] = json.loads(s["perturbation"])
        stat: dict[str, Any] = {"name": name, "count": s["count"], "sum": s["sum"], "sum_squared": s["sum_squared"]}
        for k in ("min", "max", "mean", "variance", "stddev"):
            if s[k] is not None:
                stat[k] = s[k]
        stats.setdefault((s["suite"], s["run_name"]), []).append(stat)
    out = []
    for r in runs:
        entry: dict[str, Any] = {}
        if r["run_path"] is not None:
            entry["run_path"] = r["run_path"]
        entry["run_spec"] = helm_typed_run_spec(json.loads(r["run_spec"]))
        entry["stats"] = stats.get((r["suite"], r["run_name"]), [])
        out.append(entry)
    return out


def build_costs(conn: duckdb.DuckDBPyConnection) -> dict:
    costs: dict[Any, dict[str, Any]] = {}
    for r in query(conn, "SELECT * FROM cost_report ORDER BY deployment_first, field_first"):
        costs.setdefault(r["model_deployment"], {})[r["name"]] = r["total"]
    for c in costs.values():
        c.setdefault("num_prompt_tokens", 0)
        c.setdefault("num_completion_tokens", 0)
        c["total_tokens"] = c["num_prompt_tokens"] + c["num_completion_tokens"]
    return costs


# --------------------------------------------------------------------------- files

def run_release_path(output_path: str, mode: str, target: str) -> str:
    return os.path.join(output_path, "releases" if mode == "release" else "runs", target)


def group_table_stem(group: str, table: str, max_stem: Optional[int] = None) -> str:
    """The file stem of a group table's latex/json copy: `<group>_<table>`. medhelm 0.8.0 caps it at
    `max_stem` characters (path separators made `_`; a longer stem keeps its head and gains `_` and
    the first 16 hex digits of its SHA-1); HELM 0.5.16 (max_stem None) uses it as it is."""
    if max_stem is None:
        return f"{group}_{table}"
    stem = f"{group}_{table or 'table'}".replace(os.path.sep, "_")
    if len(stem) <= max_stem:
        return stem
    digest = hashlib.sha1(stem.encode("utf-8")).hexdigest()[:16]
    return f"{stem[:max(16, max_stem - len(digest) - 1)]}_{digest}"


def target_edition(conn: duckdb.DuckDBPyConnection):
    """The edition the summarize target's runs reproduce (one per target; a target of several, or
    of a suite run under two editions, reads as HELM 0.5.16's): it names the files."""
    suites = [r[0] for r in conn.execute("SELECT DISTINCT suite FROM summarize_target").fetchall()]
    found = set(suite_editions(conn, suites).values())
    only = found.pop() if len(found) == 1 else None
    return load_edition(only if only and "," not in only else None)


def write_summarize_outputs(conn: duckdb.DuckDBPyConnection, output_path: str, date: Optional[str] = None,
                            latex: bool = True) -> str:
    """Write every helm-summarize output file of the current summarize target; return its directory.
    Group-table file stems follow the target's edition (`group_table_stem`)."""
    target_rows = query(conn, "SELECT * FROM summarize_target ORDER BY suite_pos")
    mode, target = target_rows[0]["mode"], target_rows[0]["target"]
    suites = [r["suite"] for r in target_rows]
    max_stem = target_edition(conn).group_table_stem_max
    base = run_release_path(output_path, mode, target)
    os.makedirs(base, exist_ok=True)

    write_text(os.path.join(base, "schema.json"), dumps(build_schema_json(conn, target)))

    date = date or datetime.date.today().strftime("%Y-%m-%d")
    summary = ({"release": target, "suites": suites, "date": date} if mode == "release"
               else {"suites": suites, "suite": target, "date": date})
    write_text(os.path.join(base, "summary.json"), dumps(summary))

    runs = build_runs(conn)
    write_text(os.path.join(base, "runs.json"), dumps(runs))
    write_text(os.path.join(base, "run_specs.json"), dumps([r["run_spec"] for r in runs]))
    to_suites: dict[str, str] = {}
    for r in query(conn, "SELECT run_name, suite FROM target_runs ORDER BY run_id"):
        to_suites[r["run_name"]] = r["suite"]   # the last suite wins, position of the first
    write_text(os.path.join(base, "runs_to_run_suites.json"), dumps(to_suites))

    write_text(os.path.join(base, "groups.json"), dumps(build_index_tables(conn)))
    write_text(os.path.join(base, "groups_metadata.json"), dumps(build_groups_metadata(conn, target)))

    groups_path = os.path.join(base, "groups")
    os.makedirs(groups_path, exist_ok=True)
    for group, tables in build_group_tables(conn).items():
        os.makedirs(os.path.join(groups_path, "latex"), exist_ok=True)
        os.makedirs(os.path.join(groups_path, "json"), exist_ok=True)
        for table in tables:
            stem = group_table_stem(group, table["name"], max_stem)
            latex_path = os.path.join(groups_path, "latex", f"{stem}.tex")
            table["links"].append({"text": "LaTeX", "href": latex_path})
            if latex:
                write_text(latex_path, table_to_latex(table, f"{table['name']} ({group})"))
            json_path = os.path.join(groups_path, "json", f"{stem}.json")
            table["links"].append({"text": "JSON", "href": json_path})
            write_text(json_path, dumps(table))
        write_text(os.path.join(groups_path, group + ".json"), dumps(tables))

    write_text(os.path.join(base, "costs.json"), dumps(build_costs(conn)))
    write_analytics(conn, base)
    return base
