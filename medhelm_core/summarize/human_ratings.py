"""Clinicians' ratings that analytics' judge_agreement holds each judge and the jury against, in the
MedHELM authors' format (som-shahlab/medhelm, `data/annotations/medhelm_human_annotation.csv`): a CSV
with a header row and the columns

    username, specialty, team, entry_id   who rated, and the entry in their annotation tool
    instance_id                           HELM's instance id (e.g. id148)
    dataset_name                          the benchmark: the jury metric's scenario_name (e.g. aci_bench)
    model_key                             the model name with '/' as '_' (e.g. openai_gpt-4o-2024-05-13)
    user_label                            the anonymised label the raters saw (e.g. Model A)
    accuracy, completeness, clarity       the ratings, 1-5 (empty: not rated on that dimension)
    question, answer                      the prompt and the rated answer

`medhelm-import --human-ratings CSV` loads them into the store's `human_ratings` table (all of them
replaced, in one transaction), keeping the file order (`file_row`). Only instance_id, dataset_name,
model_key and the three ratings are required; the other columns are kept when present. A missing
column, an empty item field or a rating that is not a number on the 1-5 scale is a one-line error
naming the file and line, and nothing is written."""
from __future__ import annotations

import csv
from dataclasses import dataclass, field
from pathlib import Path

import duckdb

from medhelm_core.errors import MedhelmError
from medhelm_core.store import in_transaction, insert_rows

ITEM = ("dataset_name", "model_key", "instance_id")
DIMENSIONS = ("accuracy", "completeness", "clarity")
REQUIRED = ("instance_id", "dataset_name", "model_key") + DIMENSIONS
OPTIONAL = ("username", "specialty", "team", "entry_id", "user_label", "question", "answer")
COLUMNS = ["file_row", "username", "specialty", "team", "entry_id", "instance_id", "dataset_name", "model_key",
           "user_label", "accuracy", "completeness", "clarity", "question", "answer", "source"]
SCALE = (1.0, 5.0)
SHOWN = 5   # unmatched items named in the one line, the rest counted


def _rating(path: Path, line: int, column: str, text: str | None) -> float | None:
    text = (text or "").strip()
    if not text:
        return None
    try:
        value = float(text)
    except ValueError:
        raise MedhelmError(f"{path}:{line}: {column} {text!r} is not a number") from None
    if not (SCALE[0] <= value <= SCALE[1]):   # NaN too: the ratings are on the judges' 1-5 scale
        raise MedhelmError(f"{path}:{line}: {column} {text!r} is not on the 1-5 scale")
    return value


def read_human_ratings(path: str | Path) -> list[dict]:
    """The file's rows as `human_ratings` rows (COLUMNS), in file order."""
    path = Path(path)
    try:
        # utf-8-sig: the authors' file starts with a byte-order mark
        with open(path, newline="", encoding="utf-8-sig") as f:
            reader = csv.reader(f)
            header = [c.strip() for c in next(reader, [])]
            missing = [c for c in REQUIRED if c not in header]
            if missing:
                raise MedhelmError(f"{path}:1: human ratings need the columns {', '.join(REQUIRED)} (the MedHELM "
                                   f"authors' format); missing {', '.join(missing)}")
            rows = []
            start = reader.line_num + 1   # a quoted field may span lines: name the line the row starts on
            for fields in reader:
                line, start = start, reader.line_num + 1
                if not fields:   # a blank line
                    continue
                if len(fields) != len(header):
                    raise MedhelmError(f"{path}:{line}: {len(fields)} fields where the header has {len(header)}")
                row = dict(zip(header, fields))
                empty = [c for c in ITEM if not row[c].strip()]
                if empty:
                    raise MedhelmError(f"{path}:{line}: {', '.join(empty)} must not be empty")
                out = {"file_row": len(rows) + 1, "source": str(path)}
                out.update({c: row[c].strip() for c in ITEM})
                out.update({c: _rating(path, line, c, row[c]) for c in DIMENSIONS})
                out.update({c: row.get(c) for c in OPTIONAL})
                rows.append(out)
            return rows
    except OSError as e:
        raise MedhelmError(f"{path}: cannot read the human ratings ({e.strerror})") from None
    except (csv.Error, UnicodeDecodeError) as e:
        raise MedhelmError(f"{path}: not a readable CSV ({e})") from None


def write_human_ratings(conn: duckdb.DuckDBPyConnection, rows: list[dict]) -> None:
    """Replace `human_ratings` with `rows`, all or nothing."""
    with in_transaction(conn):
        conn.execute("DELETE FROM human_ratings")
        # a rating left empty is None, which the frame holds as NaN and DuckDB reads as NULL
        insert_rows(conn, "human_ratings", COLUMNS,
                    [tuple(r.get(c) for c in COLUMNS) for r in rows])


def _tables(conn: duckdb.DuckDBPyConnection) -> set[str]:
    return {r[0] for r in conn.execute("SELECT table_name FROM information_schema.tables "
                                       "WHERE table_schema = 'main' AND table_catalog = current_database()").fetchall()}


def judged_items_sql(conn: duckdb.DuckDBPyConnection) -> str:
    """A query of every judged instance in the store as (dataset_name, model_key, instance_id, suite):
    the annotations of our own runs and of the releases imported with their completions, the annotator
    being the benchmark (the jury's scenario_name) and the run spec's model the model."""
    have = _tables(conn)
    parts = [f"SELECT DISTINCT suite, run_name, instance_id, annotator FROM {t}"
             for t in ("annotations", "published_annotation_entries") if t in have]
    if not parts:
        return ("SELECT CAST(NULL AS VARCHAR) AS dataset_name, CAST(NULL AS VARCHAR) AS model_key, "
                "CAST(NULL AS VARCHAR) AS instance_id, CAST(NULL AS VARCHAR) AS suite WHERE false")
    return (f"SELECT DISTINCT a.annotator AS dataset_name, replace(r.run_spec ->> '$.adapter_spec.model', '/', '_') "
            f"AS model_key, a.instance_id, a.suite FROM ({' UNION '.join(parts)}) a "
            f"JOIN runs r ON r.suite = a.suite AND r.run_name = a.run_name")


@dataclass
class RatingsReport:
    path: str
    ratings: int
    items: int
    unmatched_ratings: int
    unmatched_items: list[str]          # dataset_name/model_key/instance_id, in file order
    suites: list[str] = field(default_factory=list)   # the suites holding the matched items

    def summary_line(self) -> str:
        return (f"human ratings: {self.ratings} ratings of {self.items} items from {self.path} "
                f"into human_ratings; {self.ratings - self.unmatched_ratings} match judged instances"
                + (f" of {', '.join(self.suites)}" if self.suites else ""))

    def unmatched_line(self, prog: str) -> str | None:
        """One line counting and naming the ratings of items that no judged instance matches."""
        if not self.unmatched_ratings:
            return None
        shown = ", ".join(self.unmatched_items[:SHOWN])
        more = len(self.unmatched_items) - SHOWN
        return (f"{prog}: {self.unmatched_ratings} of {self.ratings} ratings match no judged instance (of our "
                f"runs, or of a release imported --with-completions): {shown}"
                + (f" and {more} more items" if more > 0 else ""))


def ratings_report(conn: duckdb.DuckDBPyConnection, path: str | Path, rows: list[dict]) -> RatingsReport:
    """Which of the loaded ratings' items match a judged instance in the store, and in which suites."""
    judged = judged_items_sql(conn)
    items = conn.execute("SELECT count(*) FROM (SELECT DISTINCT dataset_name, model_key, instance_id "
                         "FROM human_ratings)").fetchone()[0]
    unmatched = conn.execute(
        f"SELECT dataset_name || '/' || model_key || '/' || instance_id AS item, count(*) AS n FROM human_ratings h "
        f"WHERE NOT EXISTS (SELECT 1 FROM ({judged}) j WHERE j.dataset_name = h.dataset_name "
        f"AND j.model_key = h.model_key AND j.instance_id = h.instance_id) "
        f"GROUP BY ALL ORDER BY min(file_row)").fetchall()
    suites = [r[0] for r in conn.execute(
        f"SELECT DISTINCT j.suite FROM ({judged}) j JOIN human_ratings h USING (dataset_name, model_key, instance_id) "
        f"ORDER BY 1").fetchall()]
    return RatingsReport(str(path), len(rows), items, sum(n for _, n in unmatched), [i for i, _ in unmatched],
                         suites)


def load_human_ratings(conn: duckdb.DuckDBPyConnection, path: str | Path,
                       rows: list[dict] | None = None) -> RatingsReport:
    """Read the CSV (every error before anything is written; `rows`: already read), replace
    `human_ratings` with it and report which of its items match a judged instance in the store."""
    rows = read_human_ratings(path) if rows is None else rows
    write_human_ratings(conn, rows)
    return ratings_report(conn, path, rows)
