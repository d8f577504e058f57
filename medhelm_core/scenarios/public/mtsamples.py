"""MTSamples (HELM `mtsamples_procedures_scenario.py`, `mtsamples_replicate_scenario.py`).

The file list is a GitHub contents-API listing of one directory of raulista1997/benchmarkdata
(procedures: the default branch; replicate: `?ref=ebc104a`), in listing order, names ending in
`.txt`; each file comes from the raw host at HELM's pinned commit. A data mirror answers the
listing from `<dir>.tree.json` (git tree order) and cuts it at the API's 1,000 entries, as the
golden run did (`data_sources.github_listing`).

Per file (HELM's `requests.get(...).text`, written as UTF-8 and read back, then `.strip()`):
`extract_sections` takes, for PLAN:, SUMMARY:, FINDINGS:, the rest of the line after the header
when the header occurs in `text.upper()` (`text.split(header)[1]`: a lower-case-only header raises
IndexError and HELM skips the file); reference = first non-empty of plan, summary, findings (no
reference: file skipped). Input: procedures cut the text before PLAN:, then SUMMARY:, then
FINDINGS:; replicate only before PLAN:.
"""
from __future__ import annotations

import logging
from typing import Any

from medhelm_core import data_sources as ds
from medhelm_core.helm_types import TEST_SPLIT, instance, reference
from medhelm_core.scenarios.public._base import register_public, text

log = logging.getLogger(__name__)


def _dir(entry: str) -> ds.GitHubDir:
    data = text(entry)["data"]
    return ds.GitHubDir(entry, data["dirname"], data["api_url"], data["raw_base"],
                        tuple((data.get("api_headers") or {}).items()))


def _names(entry: str) -> tuple[list[str], Any]:
    names, listing = ds.github_listing(_dir(entry))
    suffix = text(entry)["scenario"]["file_suffix"]
    return [n for n in names if n.endswith(suffix)], listing


def extract_sections(content: str, headers: list[str]) -> list[str | None]:
    upper = content.upper()
    return [content.split(h)[1].split("\n", 1)[0].strip() if h in upper else None for h in headers]


def remove_sections(content: str, headers: list[str]) -> str:
    for h in headers:
        if h in content:
            content = content.split(h)[0].strip()
    return content


def _load(entry: str) -> list[dict]:
    spec = text(entry)["scenario"]
    gd = _dir(entry)
    names, _ = _names(entry)
    instances = []
    for name in names:
        content = ds.requests_text(ds.github_file(gd, name).read_bytes()).strip()
        try:
            sections = extract_sections(content, spec["sections"])
        except IndexError as e:  # HELM: print(f"Error processing {file_name}: {e}") and go on
            log.debug("%s: skipping %s: %s", entry, name, e)
            continue
        gold = next((s for s in sections if s), None)
        if not gold:
            continue
        instances.append(instance(remove_sections(content, spec["removed_sections"]), [reference(gold, True)],
                                  TEST_SPLIT))
    return instances


def _files(entry: str) -> list[str]:
    gd = _dir(entry)
    names, listing = _names(entry)
    return ([str(listing)] if listing is not None else []) + [str(ds.github_file(gd, n)) for n in names]


for _entry in ("mtsamples_procedures", "mtsamples_replicate"):
    register_public(_entry, lambda args, e=_entry: _load(e), lambda args, e=_entry: _files(e))
