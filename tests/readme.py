"""The README's code blocks, as a test runs them: every command it prints must work as printed."""
from __future__ import annotations

import re
from pathlib import Path

README = Path(__file__).resolve().parents[1] / "README.md"


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
