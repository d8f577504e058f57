"""Export the analytics SQL models (`sql/analytics/`) of the current summarize target: one CSV per
model under `<target dir>/analytics/`, and the paper's summary table (`model_summary`) as LaTeX too.

Numbers only: no prompt, completion or reference text, so the files are safe to share for every tier.
"""
from __future__ import annotations

import os

import duckdb

from medhelm_core.store import sql_str

from .sql_models import sql_model_files

ANALYTICS_LAYER = "analytics"
SUMMARY_COLUMNS = (("model", "Model"), ("win_rate", "Win rate"), ("win_sd", "Win SD"),
                   ("macro_avg", "Macro avg"), ("sd", "SD"))


def analytics_models() -> list[str]:
    return [name for name, path in sql_model_files().items() if path.parent.name == ANALYTICS_LAYER]


def write_analytics(conn: duckdb.DuckDBPyConnection, base: str) -> list[str]:
    """Write the exports into `<base>/analytics/`; return the files written."""
    folder = os.path.join(base, "analytics")
    os.makedirs(folder, exist_ok=True)
    written = []
    for name in analytics_models():
        path = os.path.join(folder, f"{name}.csv")
        conn.execute(f"COPY (SELECT * FROM {name}) TO {sql_str(path)} (HEADER, DELIMITER ',')")
        written.append(path)
    path = os.path.join(folder, "model_summary.tex")
    with open(path, "w", encoding="utf-8") as f:
        f.write(summary_latex(conn))
    written.append(path)
    return written


def summary_latex(conn: duckdb.DuckDBPyConnection) -> str:
    """`model_summary` as a booktabs table, 3 decimals (blank where a value is missing)."""
    cols = ", ".join(c for c, _ in SUMMARY_COLUMNS)
    rows = conn.execute(f"SELECT {cols} FROM model_summary ORDER BY win_rate DESC NULLS LAST, row_pos").fetchall()
    lines = ["\\begin{table}[htp]", "\\centering", "\\begin{tabular}{l" + "r" * (len(SUMMARY_COLUMNS) - 1) + "}",
             "\\toprule", " & ".join(h for _, h in SUMMARY_COLUMNS) + " \\\\", "\\midrule"]
    for row in rows:
        cells = [_latex_text(row[0])] + ["" if v is None else f"{v:.3f}" for v in row[1:]]
        lines.append(" & ".join(cells) + " \\\\")
    lines += ["\\bottomrule", "\\end{tabular}",
              "\\caption{Mean win rate, its SD over opponents, and the macro-average of benchmark scores "
              "(jury scores rescaled to [0, 1])}", "\\label{tab:model_summary}", "\\end{table}"]
    return "\n".join(lines) + "\n"


_LATEX_ESCAPES = {"\\": "\\textbackslash{}", "&": "\\&", "%": "\\%", "$": "\\$", "#": "\\#", "_": "\\_",
                  "{": "\\{", "}": "\\}"}


def _latex_text(text: str) -> str:
    return "".join(_LATEX_ESCAPES.get(c, c) for c in text)
