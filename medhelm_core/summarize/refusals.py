"""The refusal patterns analytics' `refusals` table matches completions against: the built-in list
(`conf/refusal_patterns.yaml`), plus the user's file of the same form named by
`$MEDHELM_REFUSAL_PATTERNS`. Written into the `refusal_patterns` input table before the SQL models
run; a pattern DuckDB's regular expressions cannot compile is a one-line error naming its file."""
from __future__ import annotations

import os
from pathlib import Path

import duckdb

from medhelm_core.errors import MedhelmError
from medhelm_core.resources import SETTINGS_DIR
from medhelm_core.yamlio import safe_load

BUILTIN_PATTERNS = SETTINGS_DIR / "refusal_patterns.yaml"
PATTERNS_ENV = "MEDHELM_REFUSAL_PATTERNS"


def _read(path: Path) -> list[str]:
    try:
        doc = safe_load(path.read_text(encoding="utf-8")) or {}
    except OSError as e:
        raise MedhelmError(f"{path}: cannot read the refusal patterns ({e.strerror})") from None
    patterns = doc.get("patterns") if isinstance(doc, dict) else None
    if not isinstance(patterns, list) or not all(isinstance(p, str) and p for p in patterns):
        raise MedhelmError(f"{path}: expected `patterns:` followed by a list of non-empty strings")
    return patterns


def refusal_pattern_files() -> list[Path]:
    extra = os.environ.get(PATTERNS_ENV)
    return [BUILTIN_PATTERNS] + ([Path(extra)] if extra else [])


def write_refusal_patterns(conn: duckdb.DuckDBPyConnection) -> list[str]:
    """Fill `refusal_patterns`; return the patterns."""
    patterns: list[str] = []
    for path in refusal_pattern_files():
        for pattern in _read(path):
            try:
                conn.execute("SELECT regexp_matches('', ?)", [pattern])
            except duckdb.Error as e:
                raise MedhelmError(f"{path}: refusal pattern {pattern!r} is not a valid regular expression: "
                                   f"{str(e).splitlines()[0]}") from None
            patterns.append(pattern)
    conn.execute("DELETE FROM refusal_patterns")
    conn.executemany("INSERT INTO refusal_patterns VALUES (?)", [[p] for p in dict.fromkeys(patterns)])
    return patterns
