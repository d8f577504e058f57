"""No fixed ports (issue 43): the README's old ports are held busy while every test that starts a
server runs (`tests.ports.readme_ports_taken`), and no command of the README or the docs names one of
them."""
import re
import socket
from pathlib import Path

from tests.ports import README_PORTS, is_busy, ports_busy

ROOT = Path(__file__).resolve().parents[1]
# The tests that start the README's servers (the demo model server, Dagster's UI, PostgreSQL) or run
# the README's commands that do.
SERVER_TESTS = ["tests/helm_parity/test_readme_quickstart.py", "tests/helm_parity/test_readme_quickstart_public.py",
                "tests/helm_parity/test_example.py",
                "tests/helm_parity/test_demo_server_stops.py", "tests/dagster_defs/test_readme_dagster.py",
                "tests/dagster_defs/test_dagster_postgres.py", "tests/test_ducklake.py"]


def test_the_readme_ports_are_held_while_a_server_test_runs():
    with ports_busy() as held:
        assert all(is_busy(p) for p in README_PORTS)
        for port in held:   # listening: a client connects (and would then wait for an answer)
            with socket.create_connection(("127.0.0.1", port), timeout=5):
                pass
    for path in SERVER_TESTS:
        assert "readme_ports_taken" in (ROOT / path).read_text(), path


def test_no_readme_command_names_a_fixed_port_or_a_shared_folder():
    from tests.readme import code_blocks, commands, doc_files, fences, strip_comment

    for heading in ("Dagster", "Dagster on PostgreSQL", "The shared store (DuckLake)",
                    "Quickstart: your model beside the published MedHELM leaderboard"):
        assert code_blocks(heading, "bash"), heading
    for path in doc_files():   # every shell block of README.md and docs/
        text = path.read_text(encoding="utf-8")
        for start, end, info in fences(text):
            if (info.split() or [""])[0] not in ("bash", "sh", "shell"):
                continue
            block = text[start:end].split("\n", 1)[1].rsplit("```", 1)[0]
            for c in map(strip_comment, commands(block)):
                assert not re.search(r"\b(8765|3000|55432|55433|8000)\b|/tmp/", c), (path.name, c)
