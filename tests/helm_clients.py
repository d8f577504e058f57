"""HELM 0.5.16's own model clients beside ours, against ../shared/tools/mock_vendor_server.py.

HELM's side runs in a child process (`python -m tests.helm_clients ...`) on the whole `helm/`
package extracted from its wheel (tests/helm_reference.py): its clients are built by HELM's own
AutoClient from a prod_env (credentials.conf + model_deployments.yaml), as helm-run builds them,
with helm-run's SQLite cache, empty. The child sends each request once and writes, per request, HELM's RequestResult
(as scenario_state.json holds it) and the mock's log lines of that request. Our side runs in the test
process through `medhelm_core.clients.client_for_deployment`. The project never imports HELM.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import stat
import subprocess
import sys
import tempfile
import time
import types
import urllib.request
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# Headers that carry the credentials (the mock logs them as "<redacted>"), plus SigV4's date: which of
# them a request sends is part of the wire contract; the other headers depend on the HTTP library.
AUTH_HEADERS = frozenset({"api-key", "authorization", "x-api-key", "x-goog-api-key", "ocp-apim-subscription-key",
                          "x-amz-security-token", "x-amz-date", "x-amz-content-sha256"})
# Values that are the wall clock, never reproducible.
CLOCK_KEYS = ("request_time", "request_datetime")


# -------------------------------------------------------------------------------------------------
# HELM's package and the mock
# -------------------------------------------------------------------------------------------------

def extract_helm_package(folder: Path) -> Path:
    """The wheel's whole `helm/` package under `folder` (returned, to put on sys.path)."""
    from tests.helm_reference import helm_wheel

    folder.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(helm_wheel()) as wheel:
        wheel.extractall(folder, [n for n in wheel.namelist() if n.startswith("helm/")])
    return folder


def _stub_cattrs() -> None:
    """HELM's registries read their YAML with `cattrs.structure` (not one of our test dependencies):
    dacite (which HELM's model-metadata registry itself uses) does the same for these dataclasses."""
    try:
        import cattrs  # noqa: F401
        return
    except ImportError:
        pass
    import dacite

    module = types.ModuleType("cattrs")
    module.structure = lambda raw, cls: dacite.from_dict(cls, raw)
    sys.modules["cattrs"] = module


def _stub_together() -> None:
    """HELM's together_client module imports Together's SDK at the top (for TogetherChatClient);
    TogetherClient itself speaks plain HTTP. Without the SDK, names to import are enough."""
    try:
        import together  # noqa: F401
        return
    except ImportError:
        pass
    module, module_types = types.ModuleType("together"), types.ModuleType("together.types")
    module.Together = type("Together", (), {})
    module_types.ChatCompletionResponse = type("ChatCompletionResponse", (), {})
    module_types.CompletionResponse = type("CompletionResponse", (), {})
    module.types = module_types
    sys.modules["together"], sys.modules["together.types"] = module, module_types


# HELM's TogetherClient posts to a hard-coded https://api.together.xyz/api/inference; the child points
# it at the URL in this variable (the mock's).
TOGETHER_ENDPOINT_ENV = "MEDHELM_TEST_TOGETHER_ENDPOINT"


class VendorMock:
    """mock_vendor_server.py (or `script` speaking its arguments) on a free loopback port, logging
    every request to `log`."""

    def __init__(self, script: Path, log: Path, *extra_args: str):
        self.log = log
        self._dir = tempfile.TemporaryDirectory()
        port_file = Path(self._dir.name) / "port"
        self.proc = subprocess.Popen([sys.executable, str(script), "--port", "0", "--port-file", str(port_file),
                                      "--log-jsonl", str(log), "--max-seconds", "3000", *extra_args],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.time() + 20
        while not (port_file.exists() and port_file.read_text().strip()):
            if time.time() > deadline or self.proc.poll() is not None:
                raise RuntimeError("mock_vendor_server did not start")
            time.sleep(0.05)
        self.port = int(port_file.read_text())
        self.origin = f"http://127.0.0.1:{self.port}"

    def stats(self) -> dict:
        with urllib.request.urlopen(f"{self.origin}/stats", timeout=10) as r:
            return json.loads(r.read())

    def close(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        self._dir.cleanup()


def log_lines(log: Path) -> list[dict]:
    if not log.exists():
        return []
    return [json.loads(line) for line in log.read_text(encoding="utf-8").splitlines() if line.strip()]


def vendor_env(env_json: Path, port: int) -> dict[str, str]:
    """The SDK environment of the oracle's `prod_env/env.json` with its `{port}`."""
    return {k: str(v).replace("{port}", str(port)) for k, v in json.loads(env_json.read_text()).items()}


def make_writable(folder: Path) -> None:
    """A copy of the read-only oracle, writable (its folders and files)."""
    for p in [folder, *folder.rglob("*")]:
        p.chmod(p.stat().st_mode | stat.S_IWUSR)


def repoint(folder: Path, port: int) -> None:
    """Every `127.0.0.1:<port>` of every file under `folder` -> the mock's port."""
    make_writable(folder)
    for p in folder.rglob("*"):
        if p.is_file():
            text = p.read_text(encoding="utf-8")
            p.write_text(re.sub(r"127\.0\.0\.1:\d+", f"127.0.0.1:{port}", text), encoding="utf-8")


def copy_prod_env(source: Path, dest: Path, port: int, extra_deployments: str = "",
                  extra_credentials: str = "") -> Path:
    """The oracle's prod_env at `dest`, pointed at the mock, with `extra_deployments` (YAML list items)
    and `extra_credentials` (HOCON lines) appended to its files."""
    shutil.copytree(source, dest)
    repoint(dest, port)
    for name, extra in (("model_deployments.yaml", extra_deployments), ("credentials.conf", extra_credentials)):
        if extra:
            path = dest / name
            path.write_text(path.read_text(encoding="utf-8").rstrip("\n") + "\n" + extra, encoding="utf-8")
    repoint(dest, port)
    return dest


# -------------------------------------------------------------------------------------------------
# What is compared
# -------------------------------------------------------------------------------------------------

def wire_request(rec: dict) -> dict:
    """What HELM and we must send identically: endpoint, path, query, JSON body, auth header names."""
    return {"wire": rec.get("wire"), "method": rec.get("method"), "path": rec.get("path"),
            "query": rec.get("query") or {}, "body": rec.get("body"),
            "auth_headers": sorted(h for h in (rec.get("headers") or {}) if h.lower() in AUTH_HEADERS)}


def wire_key(rec: dict) -> str:
    return json.dumps(wire_request(rec), sort_keys=True, ensure_ascii=False)


def without_clock(result: dict) -> dict:
    """A RequestResult dict with the wall-clock values replaced by a marker (which keys exist still counts)."""
    return {k: ("<clock>" if k in CLOCK_KEYS else v) for k, v in result.items()}


# -------------------------------------------------------------------------------------------------
# HELM's side (child process)
# -------------------------------------------------------------------------------------------------

def run_helm_clients(helm_folder: Path, prod_env: Path, cases: list[dict], log: Path, env: dict,
                     timeout: float = 600) -> dict:
    """HELM's clients on `cases` ([{"id", "request"}]) in a child process; returns
    {id: {"result": dict | None, "error": str | None, "records": [mock log lines]}}."""
    work = Path(tempfile.mkdtemp(prefix="helm-clients-"))
    try:
        (work / "cases.json").write_text(json.dumps(cases), encoding="utf-8")
        cmd = [sys.executable, "-m", "tests.helm_clients", str(helm_folder), str(prod_env), str(work / "cases.json"),
               str(log), str(work / "out.json"), str(work / "storage")]
        r = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout)
        if r.returncode != 0:
            raise RuntimeError(f"HELM's clients failed (rc {r.returncode}):\n{r.stderr[-5000:]}")
        return json.loads((work / "out.json").read_text(encoding="utf-8"))
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _helm_main(helm_folder: str, prod_env: str, cases_path: str, log: str, out_path: str, storage: str) -> None:
    import traceback

    sys.path.insert(0, helm_folder)
    _stub_cattrs()
    from helm.benchmark.config_registry import register_builtin_configs_from_helm_package, \
        register_configs_from_directory
    from helm.clients.auto_client import AutoClient
    from helm.common.cache_backend_config import SqliteCacheBackendConfig
    from helm.common.general import asdict_without_nones, get_credentials
    from helm.common.request import Request

    if os.environ.get(TOGETHER_ENDPOINT_ENV):
        _stub_together()
        from helm.clients import together_client

        together_client.TogetherClient.INFERENCE_ENDPOINT = os.environ[TOGETHER_ENDPOINT_ENV]
    # As helm-run: the packaged configs, then --local-path's.
    register_builtin_configs_from_helm_package()
    register_configs_from_directory(prod_env)
    # helm-run's cache (SQLite, empty): a client that asks twice with one cache key (the Responses
    # API's num_completions loop) sends one request, as under helm-run.
    Path(storage, "cache").mkdir(parents=True, exist_ok=True)
    auto = AutoClient(get_credentials(prod_env), storage, SqliteCacheBackendConfig(str(Path(storage, "cache"))))
    out = {}
    log_path = Path(log)
    for case in json.loads(Path(cases_path).read_text(encoding="utf-8")):
        before = len(log_lines(log_path))
        entry: dict = {"result": None, "error": None}
        try:
            # The client as AutoClient builds it, without AutoClient's retry loop (one try, as ours).
            client = auto._get_client(case["request"]["model_deployment"])
            result = client.make_request(Request(**case["request"]))
            entry["result"] = json.loads(json.dumps(asdict_without_nones(result)))
        except Exception as e:  # noqa: BLE001 - reported to the test, which decides
            entry["error"] = f"{type(e).__name__}: {e}\n{traceback.format_exc()[-3000:]}"
        entry["records"] = log_lines(log_path)[before:]
        out[case["id"]] = entry
    Path(out_path).write_text(json.dumps(out), encoding="utf-8")


if __name__ == "__main__":
    _helm_main(*sys.argv[1:7])
