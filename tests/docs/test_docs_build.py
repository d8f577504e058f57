"""The documentation site builds, strictly (`mkdocs.yml`: a broken link, a missing anchor, a link MkDocs
cannot place or a page left out of the navigation is an error), and the check can fail: the same build
of a copy of docs/ with one broken link or anchor does. Every relative link of the README points at a
file of the checkout and, where it names one, at an anchor of that page."""
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.readme import README, ROOT, fences, headings

MKDOCS = ROOT / ".venv" / "bin" / "mkdocs"
pytestmark = pytest.mark.skipif(not MKDOCS.exists(), reason="no mkdocs in .venv: bash scripts/setup.sh ([docs] extra)")


def _build(project: Path, site: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    return subprocess.run([str(MKDOCS), "build", "--strict", "-d", str(site)], cwd=project, env=env,
                          capture_output=True, text=True, timeout=300)


def _copy(tmp_path: Path) -> Path:
    project = tmp_path / "project"
    shutil.copytree(ROOT / "docs", project / "docs")
    shutil.copy2(ROOT / "mkdocs.yml", project / "mkdocs.yml")
    shutil.copy2(README, project / "README.md")   # the quickstart is included from it
    return project


def test_the_docs_build_strictly(tmp_path):
    r = _build(ROOT, tmp_path / "site")
    assert r.returncode == 0, r.stderr[-4000:]
    assert "WARNING" not in r.stderr, r.stderr[-4000:]
    site = tmp_path / "site"
    assert (site / "index.html").exists() and (site / "search" / "search_index.json").exists()
    for page in ("getting-started", "concepts", "how-to/dagster", "reference/commands", "reference/tables"):
        assert (site / page / "index.html").exists(), page


@pytest.mark.parametrize("broken", ["[a page that is not there](no-such-page.md)",
                                    "[an anchor that is not there](concepts.md#no-such-heading)",
                                    "[a file outside docs/](../README.md)"])
def test_a_broken_link_fails_the_build(tmp_path, broken):
    project = _copy(tmp_path)
    page = project / "docs" / "getting-started.md"
    page.write_text(page.read_text(encoding="utf-8") + f"\nSee {broken}.\n", encoding="utf-8")
    r = _build(project, tmp_path / "site")
    out = r.stdout + r.stderr
    assert r.returncode != 0, out[-3000:]
    assert "Aborted" in out and "Doc file 'getting-started.md' contains a link" in out, out[-3000:]


def test_a_page_left_out_of_the_navigation_fails_the_build(tmp_path):
    project = _copy(tmp_path)
    (project / "docs" / "orphan.md").write_text("# An orphan\n", encoding="utf-8")
    r = _build(project, tmp_path / "site")
    out = r.stdout + r.stderr
    assert r.returncode != 0 and "orphan.md" in out, out[-3000:]


def slug(title: str) -> str:
    """A heading's anchor as GitHub and MkDocs' toc make it (the same for the headings used here)."""
    text = re.sub(r"`([^`]*)`", r"\1", title).strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(page: Path) -> set[str]:
    return {slug(m.group(2)) for m in headings(page.read_text(encoding="utf-8"))}


def test_every_relative_link_of_the_readme_resolves():
    text = README.read_text(encoding="utf-8")
    outside = [(a, b) for a, b, _ in fences(text)]
    links = [m for m in re.finditer(r"\]\(([^)\s]+)\)", text) if not any(a <= m.start() < b for a, b in outside)]
    relative = [m.group(1) for m in links if not re.match(r"[a-z][a-z0-9+.-]*:", m.group(1))]
    assert len(relative) >= 10, relative     # the README ends with links into docs/
    for link in relative:
        path, _, anchor = link.partition("#")
        target = (README.parent / path).resolve() if path else README
        assert target.exists(), f"README.md links to {link}: no such file"
        if anchor:
            assert anchor in anchors(target), f"README.md links to {link}: {path or 'README.md'} has no such heading"


def test_the_readme_links_every_page_of_the_navigation():
    import yaml

    nav = yaml.safe_load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"))["nav"]

    def pages(items):
        for item in items:
            for value in item.values():
                yield from (pages(value) if isinstance(value, list) else [value])

    text = README.read_text(encoding="utf-8")
    missing = [p for p in pages(nav) if f"(docs/{p})" not in text and f"(docs/{p}#" not in text]
    assert not missing, f"README.md's documentation list lacks {missing}"
