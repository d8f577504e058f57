"""The README's quickstart ("Quickstart: your model beside the published MedHELM leaderboard"), every
command verbatim, in a fresh copy of the checkout, offline. Only the environment differs from a user's:

* the three vendors (OpenAI for the model and the `gpt` judge, Anthropic for `claude`, Together for
  `llama`) are one loopback mock that speaks each one's wire format (tests/mock_vendor_plus.py) and
  answers judge prompts with parseable verdicts: `OPENAI_BASE_URL`, `ANTHROPIC_BASE_URL`,
  `TOGETHER_BASE_URL`, the SDKs' own variables;
* the benchmarks' data come from the local mirror (`MEDHELM_DATA_MIRROR`: ../shared/data/public plus
  the two scenarios only ../shared/oracle/extra has);
* gs://crfm-helm-public is a GCS emulator (`STORAGE_EMULATOR_HOST`) whose medhelm/benchmark_output holds
  a release v2.0.0 in the published layout (HELM 0.5.16's public-n50 output, its suite renamed).

Checked: the estimate sends nothing and gives the judges' share; the run asks the model and the three
judges once per instance (17 benchmarks × 10 instances) and every verdict parses; the import rebuilds
v2.0.0 cell for cell; the summary and the page (on the free port it printed) show the user's model and
the published ones in the same table; the docs' "DuckDB SQL" examples return rows on the result."""
import json
import os
import re
import subprocess
import time
import urllib.request
from pathlib import Path

import duckdb
import pytest

from tests.dagster_dev import stop_group
from tests.helm_clients import VendorMock, log_lines
from tests.oracle import PUBLIC, SHARED
from tests.ports import readme_ports_taken  # noqa: F401  (a fixture)
from tests.readme import ROOT, code_blocks, commands, printed_url, readme_checkout, strip_comment

pytest.importorskip("gcp_storage_emulator")
pytestmark = [pytest.mark.usefixtures("readme_ports_taken"),
              pytest.mark.skipif(not (PUBLIC / "benchmark_output").is_dir(), reason="golden files not available")]

QUICKSTART = "Quickstart: your model beside the published MedHELM leaderboard"
PUBLISHED_SUITE = PUBLIC / "benchmark_output" / "runs" / "public-n50"
RELEASE = "v2.0.0"
SERVER_URL = r"medhelm-server: \S+ -> (http://127\.0\.0\.1:\d+/)"
BENCHMARKS, INSTANCES = 17, 10
JURY_RUNS = 7   # the jury benchmarks: medication_qa, aci_bench, the two mtsamples, medi_qa, med_dialog ×2
SKIP = ("display_predictions.json", "display_requests.json", "instances.json", "scenario_state.json")


def published_tree(dest: Path) -> Path:
    """`runs/v2.0.0/` and `releases/v2.0.0/` as HELM publishes a release of one suite, from HELM's own
    output of the public tier (suite public-n50, renamed; the files the import does not read left out)."""
    def copy(src: Path, to: Path, renames: list[tuple[str, str]]) -> None:
        files = [src] if src.is_file() else [p for p in src.rglob("*") if p.is_file()]
        for p in files:
            if not p.name.endswith(SKIP):
                target = to if src.is_file() else to / p.relative_to(src)
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_text(_renamed(p.read_text(encoding="utf-8"), renames), encoding="utf-8")

    copy(PUBLISHED_SUITE, dest / "runs" / RELEASE, [("public-n50", RELEASE)])
    release = dest / "releases" / RELEASE
    for p in PUBLISHED_SUITE.iterdir():   # the suite's summary files are the release's
        if p.is_file() or p.name == "groups":
            copy(p, release / p.name, [("runs/public-n50/", f"releases/{RELEASE}/"), ("public-n50", RELEASE)])
    summary = json.loads((release / "summary.json").read_text())
    summary.pop("suite", None)
    (release / "summary.json").write_text(json.dumps({"release": RELEASE, **summary}, indent=2))
    assert summary["suites"] == [RELEASE]
    return dest


def _renamed(text: str, renames: list[tuple[str, str]]) -> str:
    for a, b in renames:
        text = text.replace(a, b)
    return text


def _get(url: str):
    with urllib.request.urlopen(url, timeout=30) as r:
        assert r.status == 200, url
        body = r.read().decode("utf-8")
    return json.loads(body) if "/api/" in url else body


def test_the_quickstart_runs_as_printed_and_shows_the_model_beside_the_published_leaderboard(tmp_path):
    from tests.gcs_emulator import Emulator

    [block] = code_blocks(QUICKSTART, "bash")
    cmds = [strip_comment(c) for c in commands(block)]
    assert cmds[0].startswith("export OPENAI_API_KEY=")
    assert "ANTHROPIC_API_KEY=" in cmds[0] and "TOGETHER_API_KEY=" in cmds[0]
    assert "--estimate-cost" in cmds[1] and "--budget" in cmds[2] and "--judges public" in cmds[2]
    assert cmds[3].startswith(".venv/bin/medhelm-import --source gs://crfm-helm-public/medhelm/benchmark_output ")
    assert cmds[-1].startswith(".venv/bin/medhelm-server ") and "--port 0" in cmds[-1]
    assert not any(re.search(r"\b(8765|3000|8000|55432)\b|/tmp/", c) for c in cmds)

    mirror = tmp_path / "mirror"
    mirror.mkdir()
    for src in [*(SHARED / "data" / "public").iterdir(), *(SHARED / "oracle" / "extra" / "mirror").iterdir()]:
        (mirror / src.name).symlink_to(src, target_is_directory=src.is_dir())
    published = published_tree(tmp_path / "published")
    gcs = Emulator(bucket="crfm-helm-public")
    mock = None
    proc = None
    try:
        gcs.upload_tree(published, "medhelm/benchmark_output")
        mock = VendorMock(ROOT / "tests" / "mock_vendor_plus.py", tmp_path / "vendor_requests.jsonl",
                          "--tools", str(SHARED / "tools"))
        env = {**{k: v for k, v in os.environ.items()
                  if not k.startswith(("MEDHELM_", "DAGSTER_", "HELM_", "STORAGE_EMULATOR", "GOOGLE_", "AWS_"))
                  and not k.endswith(("_API_KEY", "_BASE_URL"))},
               "OPENAI_BASE_URL": f"{mock.origin}/v1", "ANTHROPIC_BASE_URL": mock.origin,
               "TOGETHER_BASE_URL": f"{mock.origin}/v1",
               "MEDHELM_DATA_MIRROR": str(mirror),
               "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
               **gcs.env()}
        with readme_checkout() as work:
            # Each command as printed, in order; a failing one stops the script and names itself. The last,
            # the page, runs until stopped.
            script = ["set -uo pipefail"]
            for i, c in enumerate(cmds[:-1]):
                script += [f"echo '=== quickstart command {i + 1}' >&2",
                           f"{c} || {{ echo 'README quickstart command {i + 1} failed' >&2; exit 1; }}"]
            script += [f"echo '=== quickstart command {len(cmds)}' >&2", cmds[-1]]
            log = tmp_path / "quickstart.log"   # a file, not a pipe: the server keeps its output open
            started = time.monotonic()
            with open(log, "w") as sink:
                proc = subprocess.Popen(["bash", "-c", "\n".join(script)], cwd=work, env=env,
                                        start_new_session=True, stdout=sink, stderr=subprocess.STDOUT, text=True)
            url = None
            while url is None and proc.poll() is None and time.monotonic() - started < 900:
                url = printed_url(log, SERVER_URL, 5)
            out = log.read_text(errors="replace")
            assert url, f"the quickstart did not reach the page (exit {proc.poll()}):\n{out[-5000:]}"
            assert not url.endswith(":8000/")
            parts = re.split(r"^=== quickstart command (\d+)$", out, flags=re.M)
            steps = dict(zip(parts[1::2], parts[2::2]))   # command number -> what it printed

            # The page: one table with the user's model and the published ones.
            assert "<html" in _get(url)
            meta = _get(url + "api/meta")
            assert meta["target"] == f"mine-vs-{RELEASE}" and meta["suites"] == ["mine", RELEASE], meta
            top = _get(url + "api/groups")["top"]
            [first, *_] = _get(url + f"api/group?name={top}")["tables"]
            rows = [row[0]["value"] for row in first["rows"]]
            assert any("GPT-4.1 mini" in r for r in rows) and any("mock-gpt-a" in r for r in rows), rows

            # The estimate sent nothing and named the jury's share; the run asked each model and judge
            # request once, and every verdict parsed.
            assert "Judges' share:" in steps["2"], steps["2"][-3000:]
            requests = log_lines(mock.log)
            by_model: dict[str, int] = {}
            for rec in requests:
                assert rec["status"] == 200, rec
                by_model[rec["model"]] = by_model.get(rec["model"], 0) + 1
            judged = JURY_RUNS * INSTANCES
            assert by_model == {"gpt-4.1-mini-2025-04-14": BENCHMARKS * INSTANCES, "gpt-4o-2024-05-13": judged,
                                "claude-3-7-sonnet-20250219": judged,
                                "meta-llama/Llama-3.3-70B-Instruct-Turbo": judged}, by_model
            m = re.search(r"(\d+) runs: 0 reused, (\d+) new calls, \$", steps["3"])
            assert m and int(m.group(1)) == BENCHMARKS and int(m.group(2)) == len(requests), steps["3"][-3000:]
            assert f"{RELEASE}: valued cells equal " in steps["4"], steps["4"][-3000:]
            cells = re.search(r"valued cells equal (\d+)/(\d+)", steps["4"])
            assert cells and cells.group(1) == cells.group(2) and int(cells.group(2)) > 0
            assert (work / "benchmark_output" / "releases" / f"mine-vs-{RELEASE}" / "groups.json").exists()

            db = work / "benchmark_output" / "medhelm.duckdb"
            with duckdb.connect(str(db), read_only=True) as conn:
                statuses = dict(conn.execute("SELECT status, count(*) FROM judge_verdicts GROUP BY ALL").fetchall())
                assert statuses == {"ok": 3 * judged}, statuses
                for sql in code_blocks("DuckDB SQL", "sql"):   # the docs' examples, on this result
                    assert conn.execute(sql).fetchall(), sql
            elapsed = time.monotonic() - started
            print(f"quickstart: {elapsed:.0f} s from the first command to the page")
    finally:
        if proc is not None:
            stop_group(proc.pid)
        if mock is not None:
            mock.close()
        gcs.close()
