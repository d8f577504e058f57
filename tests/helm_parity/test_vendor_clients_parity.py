"""End to end through the vendor clients (issue 39): `medhelm-run` + `medhelm-summarize` on the inputs of
../shared/oracle/vendor-clients (HELM 0.5.16 through its Stanford-gateway, Azure OpenAI, Anthropic,
Gemini, Responses API and Bedrock clients), against ../shared/tools/mock_vendor_server.py on loopback,
laid out and run as that oracle's README says. Asserted: prompts, completions, annotations, per-instance
stats, stats, display files and every leaderboard cell equal HELM's (two deployments of one model
give two rows of one name: paired by occurrence), and per endpoint the set of distinct requests we
send (path, query, whole JSON body, auth header names) equals the oracle's mock_requests.jsonl.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import pytest

from tests.helm_clients import VendorMock, log_lines, make_writable, repoint, vendor_env, wire_key
from tests.oracle import SHARED, VENDOR, VENDOR_MOCK_SERVER, load, run_dirs
from tests.parity import assert_display_files_equal, assert_leaderboard_equal, assert_stats_equal, scenario_states

BIN = Path(sys.executable).parent
SUITES = {"vendor-cfg": "work/conf/vendor_cfg.conf", "vendor-private": "work/conf/vendor_private.conf"}
SUMMARIZE = {"vendor-cfg": ["--auto-generate-schema"],
             "vendor-private": ["--schema-path", str(SHARED / "helm" / "schema_medhelm.yaml")]}
N = 10


def run_args(suite: str, *extra: str) -> list[str]:
    """The oracle harness's helm-run arguments."""
    return ["--conf-paths", SUITES[suite], "--suite", suite, "--max-eval-instances", str(N), "--num-threads", "4",
            "--num-train-trials", "1", "--priority", "2", "--output-path", "benchmark_output",
            "--local-path", "work/prod_env", *extra]


def _cli(root: Path, env: dict, command: str, args: list[str], timeout: float = 900) -> subprocess.CompletedProcess:
    r = subprocess.run([str(BIN / command), *args], cwd=root, env=env, capture_output=True, text=True,
                       timeout=timeout)
    assert r.returncode == 0, f"{command} {' '.join(args)} -> rc {r.returncode}\n{r.stdout[-3000:]}\n{r.stderr[-5000:]}"
    return r


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """inputs/* -> work/, the mock on a free port (every file of work/prod_env re-pointed at it), the
    SDK environment of env.json, then both suites and both summaries, from the folder."""
    root = tmp_path_factory.mktemp("vendor-clients")
    shutil.copytree(VENDOR / "inputs", root / "work")
    make_writable(root / "work")
    mock = VendorMock(VENDOR_MOCK_SERVER, root / "mock_requests.jsonl")
    try:
        repoint(root / "work" / "prod_env", mock.port)
        env = {**os.environ, **vendor_env(root / "work" / "prod_env" / "env.json", mock.port),
               "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
               "DAGSTER_HOME": str(root / "dagster_home")}
        for k in ("HELM_CREDENTIALS", "MEDHELM_STORAGE", "OPENAI_BASE_URL", "AWS_PROFILE", "AWS_REGION",
                  "AWS_DEFAULT_REGION", "AWS_SESSION_TOKEN", "GOOGLE_GENAI_USE_VERTEXAI"):
            env.pop(k, None)
        (root / "dagster_home").mkdir()
        for suite in SUITES:
            _cli(root, env, "medhelm-run", run_args(suite, "--no-progress"))
        calls_first = len(log_lines(mock.log))
        for suite, extra in SUMMARIZE.items():
            _cli(root, env, "medhelm-summarize", ["--suite", suite, "--output-path", "benchmark_output", *extra])
        yield {"root": root, "out": root / "benchmark_output", "gold": VENDOR / "benchmark_output", "mock": mock,
               "env": env, "calls_first": calls_first}
    finally:
        mock.close()


GOLDEN_RUNS = [(s, d.name) for s in SUITES for d in run_dirs(VENDOR, s)]


def test_the_oracle_has_44_runs():
    assert len(GOLDEN_RUNS) == 44


@pytest.mark.parametrize("suite,run", GOLDEN_RUNS, ids=[r for _, r in GOLDEN_RUNS])
def test_run_files_equal_helm(built, suite, run):
    gold, ours = built["gold"] / "runs" / suite / run, built["out"] / "runs" / suite / run
    g_states, o_states = scenario_states(gold, ours, N)
    for g, o in zip(g_states["request_states"], o_states["request_states"]):
        assert o["instance"] == g["instance"]                      # same ids sampled, same order
        assert o["request"] == g["request"]                        # byte-identical prompt, same fields
        assert o["result"]["completions"] == g["result"]["completions"]
        assert {k for k in o["result"] if k not in ("request_time", "request_datetime")} == \
            {k for k in g["result"] if k not in ("request_time", "request_datetime")}
        assert o.get("annotations") == g.get("annotations")        # judge prompts and parsed verdicts
    for name in ("per_instance_stats.json", "stats.json"):
        assert_stats_equal(load(gold / name), load(ours / name), per_instance=name.startswith("per"))
    assert_display_files_equal(gold, ours)


@pytest.mark.parametrize("suite", list(SUITES))
def test_every_leaderboard_cell_equals_helm(built, suite):
    gold, ours = built["gold"] / "runs" / suite, built["out"] / "runs" / suite
    assert assert_leaderboard_equal(gold, ours) > 0
    for name in ("groups_metadata.json", "runs_to_run_suites.json"):
        assert load(ours / name) == load(gold / name), name


def _requests_by_endpoint(records: list[dict]) -> dict:
    out: dict = defaultdict(set)
    for rec in records:
        out[(rec.get("wire"), rec.get("path"))].add(wire_key(rec))
    return dict(out)


def test_distinct_requests_per_endpoint_equal_helms(built):
    """Per endpoint (wire format + path): the same distinct requests as HELM sent (mock_requests.jsonl)."""
    gold = _requests_by_endpoint(log_lines(VENDOR / "mock_requests.jsonl"))
    ours = _requests_by_endpoint(log_lines(built["mock"].log)[:built["calls_first"]])
    assert sorted(ours) == sorted(gold)
    for endpoint, requests in gold.items():
        missing, extra = requests - ours[endpoint], ours[endpoint] - requests
        assert not missing and not extra, (
            f"{endpoint}: {len(missing)} of HELM's requests not sent, {len(extra)} sent that HELM did not;"
            f" first missing: {sorted(missing)[:1]}; first extra: {sorted(extra)[:1]}")
    assert all(r.get("status") == 200 for r in log_lines(built["mock"].log))


def test_second_run_makes_zero_model_calls(built):
    before = len(log_lines(built["mock"].log))
    for suite in SUITES:
        _cli(built["root"], built["env"], "medhelm-run", run_args(suite, "--no-progress"))
    assert len(log_lines(built["mock"].log)) == before


def test_estimate_cost_prices_every_deployment(built):
    """`--estimate-cost` (no call; a fresh output folder, so every call is new) prints a price for every
    model and judge deployment of these confs."""
    import yaml

    before = len(log_lines(built["mock"].log))
    deployments = {d["name"] for d in yaml.safe_load((VENDOR / "inputs" / "prod_env" / "model_deployments.yaml")
                                                       .read_text())["model_deployments"]}
    r = _cli(built["root"], built["env"], "medhelm-run",
             ["--conf-paths", *SUITES.values(), "--suite", "vendor-estimate", "--max-eval-instances", str(N),
              "--output-path", "estimate_output", "--local-path", "work/prod_env", "--estimate-cost"])
    text = r.stdout + r.stderr
    assert "By deployment:" in text, text[-3000:]
    table = text.split("By deployment:", 1)[1].split("\n\n", 1)[0].splitlines()[3:]
    usd = {}
    for row in table:
        cells = row.split()
        usd.setdefault(cells[0], []).append(cells[-1])
    assert set(usd) == deployments, text[-3000:]
    unpriced = sorted(name for name, values in usd.items() if any(v == "n/a" for v in values))
    assert not unpriced, f"no price for {unpriced}:\n{text[-1500:]}"
    assert all(float(v) > 0 for values in usd.values() for v in values), text[-3000:]
    assert len(log_lines(built["mock"].log)) == before
