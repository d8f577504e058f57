"""The example suite, built once for every test of the page (test_server.py, test_hostile_page.py,
test_clinician_page.py, test_jury_page.py), a copy of it summarized with schema_medhelm.yaml, and the
headless browser (`browser`) and screenshot folder (`shots`) of the page tests."""
from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

import pytest

from tests.browser import chromium

ROOT = Path(__file__).resolve().parents[2]
RELEASE = "medhelm-example"


@pytest.fixture(scope="module")
def browser():
    """Headless Chromium (tests/browser.py), one a test module."""
    with chromium() as driver:
        yield driver


@pytest.fixture
def shots(tmp_path):
    """Where screenshots go: $MEDHELM_SCREENSHOT_DIR if set, else pytest's tmp directory."""
    d = Path(os.environ.get("MEDHELM_SCREENSHOT_DIR") or tmp_path)
    d.mkdir(parents=True, exist_ok=True)
    return d


@pytest.fixture(scope="session")
def example(tmp_path_factory):
    """The example suite run and summarized (auto schema) -> (output path, prod_env)."""
    from medhelm_cli import run_main, summarize_main
    from medhelm_core import demo_server

    tmp = tmp_path_factory.mktemp("server_example")
    server = demo_server.serve(0)
    old_cwd, old_home = os.getcwd(), os.environ.get("DAGSTER_HOME")
    try:
        port = server.server_address[1]
        prod_env = tmp / "prod_env"
        shutil.copytree(ROOT / "examples" / "prod_env", prod_env)
        deployments = prod_env / "model_deployments.yaml"
        deployments.write_text(re.sub(r"127\.0\.0\.1:\d+", f"127.0.0.1:{port}", deployments.read_text()))
        os.chdir(ROOT)
        os.environ["DAGSTER_HOME"] = str(tmp / "dagster_home")
        out = tmp / "out"
        assert run_main(["--conf-paths", "conf/example.conf", "--suite", "example", "--max-eval-instances", "10",
                         "--local-path", str(prod_env), "--output-path", str(out)]) == 0
        assert summarize_main(["--suite", "example", "--output-path", str(out), "--local-path", str(prod_env),
                               "--auto-generate-schema"]) == 0
        yield out, prod_env
    finally:
        server.shutdown()
        os.chdir(old_cwd)
        if old_home is None:
            os.environ.pop("DAGSTER_HOME", None)
        else:
            os.environ["DAGSTER_HOME"] = old_home


@pytest.fixture(scope="session")
def medhelm_schema_copy(example, tmp_path_factory):
    """A copy of the example summarized as a release with schema_medhelm.yaml (medhelm_scenarios + five
    categories); the suite's own (auto-schema) leaderboard stays in the file but is no longer the last
    summarize target."""
    from medhelm_cli import summarize_main

    out, prod_env = example
    copy = tmp_path_factory.mktemp("server_medhelm") / "out"
    shutil.copytree(out, copy, ignore=shutil.ignore_patterns("*.lock", ".dagster_home"))
    old_cwd, old_home = os.getcwd(), os.environ.get("DAGSTER_HOME")
    try:
        os.chdir(ROOT)
        os.environ["DAGSTER_HOME"] = str(copy.parent / "dagster_home")
        assert summarize_main(["--release", RELEASE, "--suites", "example", "--output-path", str(copy),
                               "--local-path", str(prod_env), "--schema-path", "schema/schema_medhelm.yaml"]) == 0
    finally:
        os.chdir(old_cwd)
        if old_home is None:
            os.environ.pop("DAGSTER_HOME", None)
        else:
            os.environ["DAGSTER_HOME"] = old_home
    return copy
