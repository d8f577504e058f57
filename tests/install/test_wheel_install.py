"""A non-editable install works away from the checkout.

The wheel is built (offline, with this venv's setuptools) and installed with `--no-deps` into a fresh
venv that borrows this venv's dependencies through a `.pth` file. Everything then runs from a temporary
directory outside the checkout with PYTHONPATH unset: the library must find its SQL models, schema and
built-in settings as package data (medhelm_core/resources), and the shipped example (scripts/example.sh:
demo model server, medhelm-run on conf/example.conf, medhelm-summarize) must build its leaderboard.
"""
from __future__ import annotations

import json
import os
import re
import select
import shutil
import subprocess
import sys
import sysconfig
from importlib.metadata import version
from pathlib import Path

import duckdb
import pytest

from medhelm_core.store import DB_FILENAME

ROOT = Path(__file__).resolve().parents[2]

# What `pip install .` from a clean checkout sees (an in-tree build would also write build/ and
# *.egg-info into the checkout, and stale build/lib files would end up in the wheel).
_NOT_SOURCES = shutil.ignore_patterns(".git", ".venv", "venv", "build", "dist", "*.egg-info", "__pycache__", "*.pyc",
                                      ".pytest_cache", "benchmark_output", ".dagster_home", ".tmp_dagster_home_*",
                                      "*.duckdb", "*.duckdb.wal", "*.duckdb.lock", "*.duckdb.want")

# Run inside the new venv: where the packages come from, and the package data they read.
_PROBE = """
import json, sys
import medhelm_cli, medhelm_dagster, medhelm_core
from medhelm_core import resources as r
from medhelm_core.jury.judges import annotator_models_from_config
from medhelm_core.ratelimit import SettingsRegistry
from medhelm_core.summarize.schema import load_schema
print(json.dumps({
    "medhelm_core": medhelm_core.__file__, "medhelm_dagster": medhelm_dagster.__file__,
    "medhelm_cli": medhelm_cli.__file__, "sys_path": sys.path,
    "meta_path": [repr(f) for f in sys.meta_path],
    "sql": sorted(p.name for p in r.SQL_DIR.glob("*.sql")),
    "files": {str(p): p.is_file() for p in (r.DEFAULT_SCHEMA_PATH, r.DEFAULT_DEPLOYMENTS_SETTINGS_PATH,
                                           r.DEFAULT_JUDGES_CONFIG, r.DEFAULT_MODEL_METADATA_PATH)},
    "schema_groups": len(load_schema(r.DEFAULT_SCHEMA_PATH)["run_groups"]),
    "judges": list(annotator_models_from_config(None)),
    "settings_layers": [str(p) for p in SettingsRegistry.load().paths],
}))
"""


def _run(cmd, cwd, env, timeout=300):
    proc = subprocess.run([str(c) for c in cmd], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0, f"{cmd}: exit {proc.returncode}\n{proc.stdout[-3000:]}\n{proc.stderr[-5000:]}"
    return proc.stdout


def _within(path: str | Path, folder: Path) -> bool:
    return Path(path).resolve().is_relative_to(folder.resolve())


def test_wheel_install_runs_the_example_outside_the_checkout(tmp_path):
    setuptools_version = version("setuptools")
    if int(setuptools_version.split(".")[0]) < 77:
        pytest.skip(f"building the wheel offline needs setuptools>=77 in this venv (found {setuptools_version}): "
                    "pip install -e '.[dev]'")
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "PYTHONHOME", "PYTHONSTARTUP", "VIRTUAL_ENV", "__PYVENV_LAUNCHER__")}
    env.update(PYTHONNOUSERSITE="1", PIP_NO_INDEX="1", PIP_DISABLE_PIP_VERSION_CHECK="1", PIP_NO_INPUT="1",
               DAGSTER_HOME=str(tmp_path / "dagster_home"), DAGSTER_DISABLE_TELEMETRY="1")

    # 1. Build the wheel from a copy of the sources, with no build isolation (no download).
    src, wheels = tmp_path / "src", tmp_path / "wheels"
    shutil.copytree(ROOT, src, symlinks=True, ignore=_NOT_SOURCES)
    _run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index", "-w", wheels, src],
         cwd=tmp_path, env=env)
    [wheel] = wheels.glob("medhelm_build-*.whl")

    # 2. A fresh venv: this venv's site-packages on its path (a path line in a .pth file, so this venv's own
    #    .pth files, among them the editable install's finder, are not run), the wheel installed without deps.
    venv = tmp_path / "venv"
    _run([sys.executable, "-m", "venv", "--without-pip", venv], cwd=tmp_path, env=env)
    vbin = venv / "bin"
    vpy = vbin / "python"
    site_packages = Path(_run([vpy, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                              cwd=tmp_path, env=env).strip())
    deps = dict.fromkeys(sysconfig.get_paths()[k] for k in ("purelib", "platlib"))
    (site_packages / "_medhelm_test_deps.pth").write_text("".join(f"{p}\n" for p in deps))
    _run([sys.executable, "-m", "pip", "--python", vpy, "install", "--no-deps", "--no-index", wheel],
         cwd=tmp_path, env=env)

    # 3. A user's directory outside the checkout: the example's inputs only.
    user = tmp_path / "user"
    (user / "conf").mkdir(parents=True)
    shutil.copy(ROOT / "conf" / "example.conf", user / "conf" / "example.conf")
    shutil.copytree(ROOT / "examples", user / "examples")
    env["PATH"] = f"{vbin}{os.pathsep}{env.get('PATH', '')}"

    probe = json.loads(_run([vpy, "-c", _PROBE], cwd=user, env=env))
    assert all(_within(probe[p], venv) for p in ("medhelm_core", "medhelm_dagster", "medhelm_cli")), probe
    assert not any(Path(p).resolve() == ROOT for p in probe["sys_path"] if p), probe["sys_path"]
    assert not any("editable" in f.lower() for f in probe["meta_path"]), probe["meta_path"]
    assert probe["sql"] == sorted(p.name for p in (ROOT / "medhelm_core" / "resources" / "sql").glob("*.sql"))
    assert all(probe["files"].values()) and all(_within(p, venv) for p in probe["files"]), probe["files"]
    assert probe["schema_groups"] > 0 and probe["judges"] == ["gpt", "llama", "claude"]
    assert len(probe["settings_layers"]) == 1 and _within(probe["settings_layers"][0], venv)

    # 4. The example, as scripts/example.sh runs it, with the new venv's commands.
    server = subprocess.Popen([vbin / "medhelm-demo-server", "--port", "0"], cwd=user, env=env, text=True,
                              stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    try:
        ready, _, _ = select.select([server.stdout], [], [], 60)
        banner = server.stdout.readline() if ready else ""
        port = re.search(r"127\.0\.0\.1:(\d+)", banner)
        assert port, f"demo server did not start: {banner!r}"
        deployments = user / "examples" / "prod_env" / "model_deployments.yaml"
        deployments.write_text(re.sub(r"127\.0\.0\.1:\d+", f"127.0.0.1:{port.group(1)}", deployments.read_text()))
        _run([vbin / "medhelm-run", "--conf-paths", "conf/example.conf", "--suite", "example",
              "--max-eval-instances", "10", "--local-path", "examples/prod_env", "--output-path", "out"],
             cwd=user, env=env)
        _run([vbin / "medhelm-summarize", "--suite", "example", "--output-path", "out",
              "--local-path", "examples/prod_env", "--auto-generate-schema"], cwd=user, env=env)
    finally:
        server.terminate()
        try:
            server.wait(timeout=10)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
        server.stdout.close()

    suite = user / "out" / "runs" / "example"
    assert json.loads((suite / "groups.json").read_text())[0]["rows"]
    assert sorted(p.name for p in (suite / "groups").glob("*.json"))
    table = json.loads((suite / "groups" / "all_scenarios.json").read_text())[0]
    assert {row[0]["value"] for row in table["rows"]} == {"Demo model A", "Demo model B"}
    assert any(cell.get("value") is not None for row in table["rows"] for cell in row[1:])
    with duckdb.connect(str(user / "out" / DB_FILENAME), read_only=True) as conn:
        assert conn.execute("SELECT count(*) FROM row_aggregates").fetchone()[0] > 0
        assert conn.execute("SELECT count(*) FROM table_cells WHERE value IS NOT NULL").fetchone()[0] > 0
