"""Clinicians' ratings that analytics' judge_agreement holds each judge and the jury against: a CSV
named by `$MEDHELM_HUMAN_RATINGS`, with a header row and the columns

    run_name     HELM's run name of the rated answer (optional column, or empty: every run with the instance)
    instance_id  HELM's instance id (e.g. id123)
    criterion    the jury criterion rated (e.g. accuracy, completeness, clarity)
    rating       the rating, on the judges' scale (1-5)

written into the `human_ratings` input table before the SQL models run. A missing column or a rating
that is not a number is a one-line error naming the file and line."""
from __future__ import annotations

import csv
import os
from pathlib import Path

import duckdb

from medhelm_core.errors import MedhelmError

RATINGS_ENV = "MEDHELM_HUMAN_RATINGS"
REQUIRED = ("instance_id", "criterion", "rating")


def read_human_ratings(path: Path) -> list[tuple[str | None, str, str, float]]:
    try:
        with open(path, newline="", encoding="utf-8") as f:
            reader = csv.DictReader(f)
            missing = [c for c in REQUIRED if c not in (reader.fieldnames or [])]
            if missing:
                raise MedhelmError(f"{path}:1: human ratings need the columns {', '.join(REQUIRED)} "
                                   f"(and optionally run_name); missing {', '.join(missing)}")
            rows = []
            for line, row in enumerate(reader, start=2):
                try:
                    rating = float(row["rating"])
                except (TypeError, ValueError):
                    raise MedhelmError(f"{path}:{line}: rating {row['rating']!r} is not a number") from None
                if not row["instance_id"] or not row["criterion"]:
                    raise MedhelmError(f"{path}:{line}: instance_id and criterion must not be empty")
                rows.append(((row.get("run_name") or None), row["instance_id"], row["criterion"], rating))
            return rows
    except OSError as e:
        raise MedhelmError(f"{path}: cannot read the human ratings ({e.strerror})") from None


def write_human_ratings(conn: duckdb.DuckDBPyConnection) -> int:
    """Fill `human_ratings` from $MEDHELM_HUMAN_RATINGS (empty when it is not set); return the rows."""
    path = os.environ.get(RATINGS_ENV)
    rows = read_human_ratings(Path(path)) if path else []
    conn.execute("DELETE FROM human_ratings")
    if rows:
        conn.executemany("INSERT INTO human_ratings VALUES (?, ?, ?, ?)", rows)
    return len(rows)
