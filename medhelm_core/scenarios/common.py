"""Shared helpers for the scenario modules: file checks, value normalisation, error texts.

The benchmark's literal text (prompt templates, descriptions, names) lives in each folder's
`benchmark.yaml` and reaches the code as `bench.text`; Python here only holds the logic.
"""
from __future__ import annotations

import csv
import os
import sys
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Iterator

from medhelm_core.errors import MedhelmError, first_line  # noqa: F401 - public helpers of benchmark folders
from medhelm_core.parts import scenario_json  # noqa: F401

if TYPE_CHECKING:  # for annotations only (nothing imported at run time)
    from medhelm_core.catalog import Benchmark


def require_arg(args: dict[str, Any], key: str, entry: str) -> Any:
    if key not in args or args[key] is None:
        raise MedhelmError(f"{entry}: missing required argument {key!r}")
    return args[key]


def require_path_arg(args: dict[str, Any], key: str, entry: str) -> str:
    value = require_arg(args, key, entry)
    if not isinstance(value, str):
        raise MedhelmError(f"{entry}: {key} must be a path string, got {value!r}")
    return value


def data_path_files(bench: Benchmark, args: dict[str, Any]) -> list[str]:
    """`files(bench, args)` of a scenario whose one data file is the run entry's `data_path`."""
    return [require_path_arg(args, "data_path", bench.name)]


def data_path_file(args: dict[str, Any], entry: str) -> str:
    """The run entry's `data_path`: present, a path string, an existing file (one-line errors)."""
    path = require_path_arg(args, "data_path", entry)
    require_file(path, entry, "data_path")
    return path


def require_file(path: str, entry: str, what: str, detail: str = "") -> None:
    """HELM's `check_file_exists` (os.path.exists), as a one-line MedhelmError.

    `what` names the run-entry argument (or config field) the path came from, e.g. "data_path".
    """
    suffix = f" ({detail})" if detail else ""
    if not os.path.exists(path):
        raise MedhelmError(f"{entry}: {what} file not found: {path}{suffix}")
    if os.path.isdir(path):
        raise MedhelmError(f"{entry}: {what} is a directory, expected a file: {path}{suffix}")


@contextmanager
def unlimited_csv_fields() -> Iterator[None]:
    """The SHC scenario modules call `csv.field_size_limit(sys.maxsize)` at import time.

    We raise the limit only while reading (and restore it), instead of changing it process-wide.
    """
    old = csv.field_size_limit(sys.maxsize)
    try:
        yield
    finally:
        csv.field_size_limit(old)


def py_value(value: Any) -> Any:
    """numpy scalars -> the equivalent Python scalar (so instances stay JSON-serialisable).

    Everything else (str, int, float incl. NaN, lists, None) is returned unchanged.
    """
    item = getattr(value, "item", None)
    if item is not None and type(value).__module__ == "numpy":
        return item()
    return value


def read_csv_frame(path: str, entry: str, what: str):
    """`pandas.read_csv(path)` with HELM's defaults; parse errors become MedhelmError."""
    import pandas as pd

    try:
        return pd.read_csv(path)
    except (ValueError, UnicodeDecodeError, OSError) as e:  # EmptyDataError/ParserError are ValueErrors
        raise MedhelmError(f"{entry}: cannot parse {what} file {path}: {first_line(e)}") from None


def missing_column(entry: str, path: str, column: str) -> MedhelmError:
    return MedhelmError(f"{entry}: column {column!r} missing in {path}")


def row_value(row: Any, column: str, entry: str, path: str) -> Any:
    """`row[column]` of a pandas row, or the one-line missing-column error."""
    try:
        return row[column]
    except KeyError:
        raise missing_column(entry, path, column) from None
