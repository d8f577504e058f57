"""EhrSqlAnnotator (HELM `annotation/ehr_sql_annotator.py`), a local annotator: it executes the gold
  and the predicted SQL against the eICU SQLite database and stores
  `{"predicted_result", "ground_truth_result", "query_error"}`:
  1. gold SQL = `references[0].text.strip()` (medhelm 0.8.0: `current_time`, any case, replaced by
     `gold_current_time`), `fetchall()`; `sqlite3.OperationalError`/`Warning` -> result `[]`;
  2. (HELM 0.5.16 only: `empty_gold_value_fallback`) an empty gold result with `extra_data["value"]`
     -> re-execute, `fetchone()`: a row -> the values cast to the row's Python types; no row or an
     OperationalError -> the values as they are;
  3. prediction = `completions[0].text.strip()`, the body of a `<sql>...</sql>` block if any,
     backticks removed, stripped, `^sql\\n` removed at every line start; empty -> query_error
     "No query generated"; else `fetchall()`, any exception -> `query_error = str(e)`.
  Every query runs in its own `with sqlite3.connect(db) as conn` block, as in HELM (which commits
  whatever a query changed). HELM runs them against the downloaded database itself, so a
  prediction that writes changes it for every later query of the suite; we run each run's queries
  against a private copy, so the data files are never modified (writes persist only within the run).
"""
from __future__ import annotations

import os
import re
import shutil
import sqlite3
import tempfile
import weakref
from typing import Any, Callable

from medhelm_core.catalog import Benchmark
from medhelm_core.errors import MedhelmError
from medhelm_core.parts import LocalAnnotatorDef

_SQL_BLOCK = re.compile(r"<\s*sql\s*>(.*?)<\/?\s*sql\s*>", re.DOTALL | re.IGNORECASE)
_SQL_PREFIX = re.compile(r"^sql\n", flags=re.MULTILINE)
_CURRENT_TIME = re.compile(r"current_time", flags=re.IGNORECASE)


def predicted_sql(completion_text: str) -> str:
    """The SQL HELM extracts from a completion."""
    text = completion_text.strip()
    match = _SQL_BLOCK.search(text)
    sql = match.group(1).strip() if match else text.strip()
    sql = sql.replace("`", "").strip()
    return _SQL_PREFIX.sub("", sql)


class EhrSqlSession:
    """Annotates one run's request states against a private copy of eicu.sqlite."""

    def __init__(self, database_path: Callable[[], str], name: str, no_query_error: str,
                 gold_current_time: str | None = None, empty_gold_value_fallback: bool = True):
        self.database_path = database_path
        self.name = name
        self.no_query_error = no_query_error
        self.gold_current_time = gold_current_time
        self.empty_gold_value_fallback = empty_gold_value_fallback
        self._db: str | None = None

    def database(self) -> str:
        if self._db is None:
            source = self.database_path()
            workdir = tempfile.mkdtemp(prefix="medhelm-ehrsql-")
            weakref.finalize(self, shutil.rmtree, workdir, True)
            self._db = os.path.join(workdir, os.path.basename(source))
            shutil.copyfile(source, self._db)
        return self._db

    def __call__(self, request_state: dict[str, Any]) -> dict[str, Any]:
        db = self.database()
        inst = request_state["instance"]
        refs = inst.get("references") or []
        if len(refs) != 1:
            raise MedhelmError(f"{self.name}: instance {inst.get('id')!r} has {len(refs)} references, expected 1")
        gold_sql = refs[0]["output"]["text"].strip()
        if self.gold_current_time is not None:
            gold_sql = _CURRENT_TIME.sub(lambda _: self.gold_current_time, gold_sql)
        gold: list = []
        try:
            with sqlite3.connect(db) as conn:
                gold = conn.cursor().execute(gold_sql).fetchall()
        except (sqlite3.OperationalError, sqlite3.Warning):
            pass  # HELM: hwarn("Ground truth SQL failed with error: ...")
        extra = inst.get("extra_data")
        if self.empty_gold_value_fallback and not gold and extra is not None and "value" in extra:
            values = list(extra["value"].values())
            with sqlite3.connect(db) as conn:
                cursor = conn.cursor()
                try:
                    cursor.execute(gold_sql)
                    row = cursor.fetchone()
                    gold = [type(row[i])(values[i]) for i in range(len(values))] if row else values
                except sqlite3.OperationalError:
                    gold = values
        completions = (request_state.get("result") or {}).get("completions") or []
        if len(completions) != 1:
            raise MedhelmError(f"{self.name}: instance {inst.get('id')!r} has {len(completions)} completions, expected 1")
        sql = predicted_sql(completions[0]["text"])
        predicted: list = []
        error: str | None = None
        if not sql:
            error = self.no_query_error
        else:
            try:
                with sqlite3.connect(db) as conn:
                    predicted = conn.cursor().execute(sql).fetchall()
            except Exception as e:  # HELM keeps the message of any failure
                error = str(e)
        return {"predicted_result": predicted, "ground_truth_result": gold, "query_error": error}


def annotator(bench: Benchmark, args: dict[str, Any]) -> LocalAnnotatorDef:
    if args:
        raise MedhelmError(f"EhrSqlAnnotator takes no arguments, got {sorted(args)}")
    spec = bench.text["scenario"]
    scenario = bench.module("scenario")
    session = EhrSqlSession(lambda: scenario.database_path(bench), spec["annotator_name"], spec["no_query_error"],
                            spec["gold_current_time"], spec["empty_gold_value_fallback"])
    return LocalAnnotatorDef(name=spec["annotator_name"], annotate=session)
