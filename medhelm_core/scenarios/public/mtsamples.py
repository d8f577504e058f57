"""MTSamples (HELM `mtsamples_procedures_scenario.py`, `mtsamples_replicate_scenario.py`): the
loader shared by the mtsamples_procedures and mtsamples_replicate folders.

The file list is a GitHub contents-API listing of one directory of raulista1997/benchmarkdata
(procedures: the default branch; replicate: `?ref=ebc104a`), in listing order, names ending in
`.txt`; each file comes from the raw host at HELM's pinned commit. A data mirror answers the
listing from `<dir>.tree.json` (git tree order) and cuts it at the API's 1,000 entries, as the
golden run did (`data_sources.github_listing`).

Per file (HELM's `requests.get(...).text`, written as UTF-8 and read back, then `.strip()`):
`extract_sections` takes, for PLAN:, SUMMARY:, FINDINGS:, the rest of the line after the header
when the header occurs in `text.upper()` (`text.split(header)[1]`: a lower-case-only header raises
IndexError and HELM skips the file); reference = first non-empty of plan, summary, findings (no
reference: file skipped). Input: the text cut before each of `scenario.removed_sections` (see
each folder's scenario.py).
"""
from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from medhelm_core import data_sources as ds
from medhelm_core.helm_types import TEST_SPLIT, instance, reference

if TYPE_CHECKING:  # for annotations only (nothing imported at run time)
    from medhelm_core.catalog import Benchmark

log = logging.getLogger(__name__)


def github_dir(bench: Benchmark) -> ds.GitHubDir:
    data = bench.text["data"]
    return ds.GitHubDir(bench.name, data["dirname"], data["api_url"], data["raw_base"],
                        tuple((data.get("api_headers") or {}).items()))


def names(bench: Benchmark) -> tuple[list[str], Any]:
    """The listed file names ending in `scenario.file_suffix`, and the listing file (or None)."""
    listed, listing = ds.github_listing(github_dir(bench))
    suffix = bench.text["scenario"]["file_suffix"]
    return [n for n in listed if n.endswith(suffix)], listing


def extract_sections(content: str, headers: list[str]) -> list[str | None]:
    upper = content.upper()
    return [content.split(h)[1].split("\n", 1)[0].strip() if h in upper else None for h in headers]


def remove_sections(content: str, headers: list[str]) -> str:
    for h in headers:
        if h in content:
            content = content.split(h)[0].strip()
    return content


def load(bench: Benchmark) -> list[dict]:
    spec = bench.text["scenario"]
    gd = github_dir(bench)
    file_names, _ = names(bench)
    instances = []
    for name in file_names:
        content = ds.requests_text(ds.github_file(gd, name).read_bytes()).strip()
        try:
            sections = extract_sections(content, spec["sections"])
        except IndexError as e:  # HELM: print(f"Error processing {file_name}: {e}") and go on
            log.debug("%s: skipping %s: %s", bench.name, name, e)
            continue
        gold = next((s for s in sections if s), None)
        if not gold:
            continue
        instances.append(instance(remove_sections(content, spec["removed_sections"]), [reference(gold, True)],
                                  TEST_SPLIT))
    return instances


def files(bench: Benchmark) -> list[str]:
    gd = github_dir(bench)
    file_names, listing = names(bench)
    return ([str(listing)] if listing is not None else []) + [str(ds.github_file(gd, n)) for n in file_names]
