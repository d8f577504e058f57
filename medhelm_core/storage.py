"""Where the tables live: one storage setting for every command and the Dagster resource.

    --storage URL   (medhelm-run, medhelm-summarize, medhelm-import, medhelm-server, medhelm-export)
    $MEDHELM_STORAGE (the same, for Dagster runs and any command without the flag)

Values: `duckdb:PATH`, a DuckDB file anywhere; without a setting, `duckdb:<output-path>/medhelm.duckdb`
(the embedded default). HELM's files (`runs/`, `groups/`, the page's exports) stay under the output
path whichever storage holds the tables. The shared store of several machines (`ducklake:…`, a
DuckLake catalog on PostgreSQL) is the next storage kind here; until then such a URL is refused with
one line.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from medhelm_core.errors import MedhelmError

ENV = "MEDHELM_STORAGE"
DB_FILENAME = "medhelm.duckdb"


@dataclass(frozen=True)
class Storage:
    """A resolved storage setting: `kind` 'duckdb' and the database file's path."""

    kind: str
    path: Path

    def __str__(self) -> str:
        return f"{self.kind}:{self.path}"


def resolve_storage(url: Optional[str], output_path: str | Path, flag: str = "--storage") -> Storage:
    """The storage of a command: its flag's URL, else $MEDHELM_STORAGE, else the output path's file."""
    if not url and os.environ.get(ENV):
        url, flag = os.environ[ENV], f"${ENV}"
    if not url:
        return Storage("duckdb", Path(output_path) / DB_FILENAME)
    return parse_storage(url, flag)


def parse_storage(url: str, flag: str = "--storage") -> Storage:
    scheme, sep, rest = url.partition(":")
    if not sep or scheme not in ("duckdb", "ducklake"):
        raise MedhelmError(f"{flag} {url!r}: expected duckdb:PATH (a DuckDB file)")
    if scheme == "ducklake":
        raise MedhelmError(f"{flag} {url!r}: the shared DuckLake store is not available in this version; "
                           f"use duckdb:PATH")
    if not rest.strip():
        raise MedhelmError(f"{flag} {url!r}: duckdb: needs the database file's path, e.g. duckdb:results/medhelm.duckdb")
    path = Path(rest).expanduser()
    if path.is_dir():
        raise MedhelmError(f"{flag} {url!r}: {path} is a folder; name the database file, e.g. duckdb:{path / DB_FILENAME}")
    return Storage("duckdb", path)


def add_storage_argument(parser) -> None:
    parser.add_argument("--storage", default=None, metavar="URL",
                        help=f"where the tables live: duckdb:PATH (default: duckdb:<output-path>/{DB_FILENAME}; "
                             f"${ENV})")
