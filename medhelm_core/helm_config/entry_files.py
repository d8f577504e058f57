"""Run-entry conf files of either form: HELM's `.conf` (HOCON) or our YAML matrix."""
from __future__ import annotations

from pathlib import Path
from typing import Iterable

from medhelm_core.helm_config.matrix import load_matrix
from medhelm_core.helm_config.run_entries import RunEntry, parse_hocon, run_entries_from_hocon
from medhelm_core.errors import MedhelmError


def load_run_entries(path: str | Path) -> list[RunEntry]:
    """Read one run-entry conf file (HELM's .conf form, or our YAML matrix form)."""
    source = str(path)
    if Path(path).suffix in (".yaml", ".yml"):
        return load_matrix(path)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise MedhelmError(f"{source}: run-entry conf file not found") from None
    except UnicodeDecodeError as exc:
        raise MedhelmError(f"{source}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    return run_entries_from_hocon(parse_hocon(text, source), source)


def read_run_entries(paths: Iterable[str | Path]) -> list[RunEntry]:
    """HELM's `read_run_entries`: the entries of all files, concatenated in order."""
    out: list[RunEntry] = []
    for path in paths:
        out.extend(load_run_entries(path))
    return out
