"""The README's code blocks, as a test runs them: every command it prints must work as printed."""
from __future__ import annotations

import re
import shutil
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"


def section(heading: str) -> str:
    """The text under the `#`-heading that starts with `heading`, up to the next heading of the same
    or a higher level."""
    text = README.read_text(encoding="utf-8")
    m = re.search(rf"^(#+) {re.escape(heading)}[^\n]*\n", text, re.M)
    assert m, f"README has no heading {heading!r}"
    level = len(m.group(1))
    rest = text[m.end():]
    end = re.search(rf"^#{{1,{level}}} ", rest, re.M)
    return rest[: end.start()] if end else rest


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
