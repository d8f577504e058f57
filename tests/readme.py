"""The README's and the docs' code blocks, as a test runs them: every command they print must work as
printed. A test names a block by the heading it sits under; the heading may be in README.md or in any
page of docs/ (the README keeps the set-up and the quickstart, the rest is in docs/)."""
from __future__ import annotations

import re
import shutil
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator, NamedTuple

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
DOCS = ROOT / "docs"
HEADING = re.compile(r"^(#{1,6}) +(.+?)(?: +#+)? *$", re.M)
FENCE = re.compile(r"^[ \t]*(`{3,}|~{3,})([^\n]*)$", re.M)


def doc_files() -> list[Path]:
    """README.md, then every Markdown page of docs/ (sorted)."""
    return [README, *sorted(DOCS.rglob("*.md"))]


def fences(text: str) -> list[tuple[int, int, str]]:
    """The fenced code blocks of `text`: (start, end, info string, e.g. "bash")."""
    out: list[tuple[int, int, str]] = []
    fence = None
    for m in FENCE.finditer(text):
        if fence is None:
            fence = m
        elif m.group(1)[0] == fence.group(1)[0] and len(m.group(1)) >= len(fence.group(1)) and not m.group(2).strip():
            out.append((fence.start(), m.end(), fence.group(2).strip()))
            fence = None
    return out


def headings(text: str) -> list[re.Match]:
    """The Markdown headings of `text`, those inside fenced code blocks left out."""
    fenced = fences(text)
    return [m for m in HEADING.finditer(text) if not any(a <= m.start() < b for a, b, _ in fenced)]


class Section(NamedTuple):
    path: Path
    start: int   # offset of the heading line
    end: int     # offset of the next heading of the same or a higher level (or the end of the file)
    text: str    # what lies under the heading line


def find_section(heading: str) -> Section:
    """The section whose heading is `heading` exactly, else the one whose heading starts with it; in
    README.md and docs/**/*.md together, where it must be the only one."""
    exact, prefixed = [], []
    for path in doc_files():
        text = path.read_text(encoding="utf-8")
        marks = headings(text)
        for i, m in enumerate(marks):
            title = m.group(2)
            if not title.startswith(heading):
                continue
            level = len(m.group(1))
            end = next((n.start() for n in marks[i + 1:] if len(n.group(1)) <= level), len(text))
            line_end = text.index("\n", m.start()) + 1 if "\n" in text[m.start():] else len(text)
            found = Section(path, m.start(), end, text[line_end:end])
            (exact if title == heading else prefixed).append(found)
    where = lambda found: [f"{s.path.relative_to(ROOT)}" for s in found]  # noqa: E731
    assert len(exact) <= 1, f"heading {heading!r} is in {where(exact)}: make it unique"
    if exact:
        return exact[0]
    assert prefixed, f"README.md and docs/ have no heading {heading!r}"
    assert len(prefixed) == 1, f"{len(prefixed)} headings start with {heading!r} ({where(prefixed)}): make it unique"
    return prefixed[0]


def section(heading: str) -> str:
    """The text under the `#`-heading that is (or starts with) `heading`, in README.md or docs/, up to the
    next heading of the same or a higher level."""
    return find_section(heading).text


def code_blocks(heading: str, lang: str) -> list[str]:
    return re.findall(rf"```{lang}\n(.*?)```", section(heading), re.S)


def commands(block: str) -> list[str]:
    """One string per command: continuation lines joined, comments and blank lines dropped."""
    out: list[str] = []
    pending = ""
    for line in block.splitlines():
        if not pending and (not line.strip() or line.lstrip().startswith("#")):
            continue
        if line.rstrip().endswith("\\"):
            pending += line.rstrip()[:-1] + " "
            continue
        out.append((pending + line).strip())
        pending = ""
    return out


def strip_comment(command: str) -> str:
    """The command without its trailing `# ...` comment (outside quotes)."""
    quote = None
    for i, ch in enumerate(command):
        if quote:
            quote = None if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        elif ch == "#" and (i == 0 or command[i - 1].isspace()):
            return command[:i].rstrip()
    return command


@contextmanager
def readme_checkout() -> Iterator[Path]:
    """A fresh copy of the checkout as a clone has it (tracked and unignored files only: nothing the
    user's own runs left), with the set-up's .venv (and .venv-ducklake) and ../shared beside it, so a
    README block runs there as printed and finds none of the user's servers, folders or answers. It
    lives in a folder of its own that others may enter (pytest's tmp_path is private), since as root
    scripts/postgres.sh runs the server as the postgres user, on a folder inside the copy."""
    from tests.dagster_dev import fresh_checkout
    from tests.oracle import SHARED

    tmp = Path(tempfile.mkdtemp(prefix="medhelm-readme-"))
    tmp.chmod(0o755)
    try:
        work = fresh_checkout(tmp)
        if (ROOT / ".venv-ducklake").exists():
            (work / ".venv-ducklake").symlink_to(ROOT / ".venv-ducklake")
        (tmp / "shared").symlink_to(SHARED)   # ../shared of the copy, as beside a clone
        yield work
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def printed_url(log: Path, pattern: str, timeout_s: float) -> str | None:
    """The first URL the `pattern` (a regex with one group) finds in `log`, waiting for it to appear."""
    deadline = time.time() + timeout_s
    while True:
        m = re.search(pattern, log.read_text(errors="replace")) if log.exists() else None
        if m or time.time() > deadline:
            return m.group(1) if m else None
        time.sleep(0.5)
