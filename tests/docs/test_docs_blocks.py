"""The tests that run the README's commands run the docs' commands too: every ```bash block of README.md
and docs/**/*.md lies in a section that some test reads through tests/readme.py (`code_blocks(heading,
…)` / `section(heading)`), so a block added without a test fails here. A synopsis that is not meant to
run belongs in a ```text block."""
import ast
from pathlib import Path

from tests.readme import ROOT, doc_files, fences, find_section, headings

SHELL = {"bash", "sh", "shell", "zsh"}
READERS = {"code_blocks", "section", "find_section"}


def _shell_blocks() -> list[tuple[Path, int, str]]:
    """(file, offset, first line) of every shell block."""
    out = []
    for path in doc_files():
        text = path.read_text(encoding="utf-8")
        for start, _end, info in fences(text):
            if info.split()[0].lower() in SHELL if info else False:
                body = text[start:].split("\n", 2)
                out.append((path, start, body[1] if len(body) > 1 else ""))
    return out


def _read_headings() -> dict[str, list[str]]:
    """heading -> the test files that read its section (first argument of a reader call: a string, or a
    module-level name bound to one)."""
    found: dict[str, list[str]] = {}
    for path in sorted((ROOT / "tests").rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        names = {t.id: node.value.value for node in tree.body if isinstance(node, ast.Assign)
                 and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str)
                 for t in node.targets if isinstance(t, ast.Name)}
        for node in ast.walk(tree):
            if not (isinstance(node, ast.Call) and node.args):
                continue
            func = node.func.id if isinstance(node.func, ast.Name) else getattr(node.func, "attr", None)
            if func not in READERS:
                continue
            arg = node.args[0]
            heading = arg.value if isinstance(arg, ast.Constant) else names.get(getattr(arg, "id", None))
            if isinstance(heading, str):
                found.setdefault(heading, []).append(str(path.relative_to(ROOT)))
    return found


def _nearest_heading(path: Path, offset: int) -> tuple[int, str]:
    """The offset and text of the last heading before `offset` (-1 when there is none)."""
    marks = [m for m in headings(path.read_text(encoding="utf-8")) if m.start() < offset]
    return (marks[-1].start(), marks[-1].group(2)) if marks else (-1, "(no heading)")


def test_every_shell_block_is_run_by_a_test():
    """A block counts as run when the heading it sits directly under is one a test reads (a test that
    reads a page's title does not cover the blocks of the page's sections)."""
    read = _read_headings()
    sections = {(s.path, s.start) for s in map(find_section, read)}
    assert len(sections) >= 8, sorted(read)
    blocks = _shell_blocks()
    assert len(blocks) >= 10
    untested = []
    for path, offset, first in blocks:
        start, title = _nearest_heading(path, offset)
        if (path, start) not in sections:
            untested.append(f"{path.relative_to(ROOT)} under {title!r}: {first!r}")
    assert not untested, ("shell blocks that no test reads (give each a test that reads its heading through "
                          "tests/readme.py and runs it, or make a synopsis a ```text block):\n" + "\n".join(untested))


def test_every_heading_a_test_reads_is_there_once_with_its_blocks():
    for heading, readers in _read_headings().items():
        found = find_section(heading)   # asserts: present, and unique across README.md and docs/
        assert fences(found.text), \
            f"{heading!r} (read by {readers}) resolves to {found.path.name}, which has no code block"
