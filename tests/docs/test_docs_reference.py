"""The command reference (docs/reference/commands.md) documents every flag: each command's section has
a table whose first column names the flags, and they are exactly those its `--help` prints (a new flag
without a row, or a row for a flag that is gone, fails). The scripts' options are checked against the
scripts themselves."""
import re
import subprocess
from pathlib import Path

import pytest

from tests.readme import ROOT, find_section

BIN = ROOT / ".venv" / "bin"
COMMANDS = {  # reference heading -> the command line whose --help it documents
    "`medhelm-run`": ["medhelm-run"],
    "`medhelm-summarize`": ["medhelm-summarize"],
    "`medhelm-server`": ["medhelm-server"],
    "`medhelm-export`": ["medhelm-export"],
    "`medhelm-import`": ["medhelm-import"],
    "`medhelm-demo-server`": ["medhelm-demo-server"],
}
FLAG = re.compile(r"(?<![\w-])(--[a-z][a-z0-9-]*|-[a-zA-Z])(?![\w-])")


def help_flags(argv: list[str]) -> set[str]:
    r = subprocess.run([str(BIN / argv[0]), *argv[1:], "--help"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    options = r.stdout.split("options:", 1)[1]
    flags = set()
    for line in options.splitlines():   # an option's own lines start with its flags (help text is indented deeper)
        m = re.match(r"^  (-\S.*?)(?:  +\S.*)?$", line)
        if m:
            flags |= {f for f in FLAG.findall(m.group(1)) if f not in ("-h", "--help")}
    return flags


def table_flags(heading: str) -> set[str]:
    """The flags named in the first column of the section's first table whose header says `flag` or `option`."""
    text = find_section(heading).text
    rows = [line for line in text.splitlines() if line.startswith("|")]
    assert rows and rows[0].split("|")[1].strip() in ("flag", "option"), f"{heading}: no flag table"
    flags: set[str] = set()
    for row in rows[2:]:
        first = row.split("|")[1]
        flags |= {f for span in re.findall(r"`([^`]+)`", first) for f in FLAG.findall(span)}
    return flags


@pytest.mark.parametrize("heading", list(COMMANDS))
def test_the_reference_names_every_flag_of_the_command(heading):
    documented, helped = table_flags(heading), help_flags(COMMANDS[heading])
    assert helped, heading
    undocumented, gone = sorted(helped - documented), sorted(documented - helped)
    assert not undocumented, f"{heading}: flags without a row in docs/reference/commands.md: {undocumented}"
    assert not gone, f"{heading}: rows for flags the command does not have: {gone}"


def test_the_demo_servers_subcommands_take_the_documented_flags():
    documented = table_flags("`medhelm-demo-server`")
    for sub in ("start", "status", "stop"):
        assert help_flags(["medhelm-demo-server", sub]) <= documented, sub


def test_medhelm_server_export_is_medhelm_export():
    assert help_flags(["medhelm-server", "export"]) == help_flags(["medhelm-export"])


def _script_options(path: Path) -> set[str]:
    """The options a script's argument loop recognises (`--opt)` or `--opt|-o)` case arms)."""
    arms = re.findall(r"^\s*((?:-[-\w]+\|?)+)\)", path.read_text(encoding="utf-8"), re.M)
    return {f for arm in arms for f in arm.split("|") if f}


@pytest.mark.parametrize("script", ["setup.sh", "reproduce.sh"])
def test_the_reference_names_every_option_of_the_scripts(script):
    options = _script_options(ROOT / "scripts" / script)
    assert options, script
    assert table_flags(f"`scripts/{script}`") == options
