"""`medhelm-server`: the MedHELM leaderboard page, read from `<output-path>/medhelm.duckdb`.

    data.py     read-only DuckDB access: leaderboard tables (helm-summarize's, via summarize/write.py),
                run drill-down, reproduced-vs-published comparison, plot data, redaction
    jury.py     the judges' views: ranks per jury variant (judge ablation) and, per instance, every
                judge's score and explanation beside the clinicians' ratings
    app.py      the stdlib HTTP server: JSON under /api/, the page under /
    guard.py    which requests it answers: Host and Origin checks (DNS rebinding, cross-origin reads)
    export.py   a shareable static copy with private-tier text redacted, written all or nothing
    cli.py      `medhelm-server [--suite S | --release R] …` and `medhelm-server export --out DIR`
    static/     the page (plain HTML/CSS/JS, no external resources)
"""
from medhelm_core.summarize.format import helm_number

__all__ = ["helm_number"]
