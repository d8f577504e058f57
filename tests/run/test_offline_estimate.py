"""Offline-first estimate and preflight (issue 43): `--estimate-cost` downloads nothing (a benchmark whose
data is not mirrored or cached is counted from its recorded size, said in one line), the deployments,
keys and judges are checked before any data is read, and a download that cannot happen is one line
(no hub retries). The recorded sizes are measured again here from the real data."""
from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

from medhelm_core.catalog import default_catalog
from medhelm_core.run.recorded_sizes import SIZE_FILE, measure_size, recorded_size
from medhelm_core.yamlio import safe_load
from tests.oracle import SHARED

ROOT = Path(__file__).resolve().parents[2]
MEDHELM_RUN = ROOT / ".venv" / "bin" / "medhelm-run"
MIRROR = SHARED / "data" / "public"
MODEL = "openai/gpt-4o-2024-05-13"   # the recorded sizes' reference deployment: its tokenizer counted them
ANY_MODEL_CONF = ROOT / "conf" / "medhelm_public_any_model.yaml"
KEY_VARS = ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "TOGETHER_API_KEY", "HELM_CREDENTIALS", "MEDHELM_API_KEY_OPENAI")


def _env(tmp_path: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("MEDHELM_", "DAGSTER_", "HF_")) and k not in KEY_VARS}
    # A hub that answers nothing (a closed loopback port): the same here as on an air-gapped machine.
    return {**env, "DAGSTER_HOME": str(tmp_path / "dagster_home"), "HF_ENDPOINT": "http://127.0.0.1:9",
            "HF_HOME": str(tmp_path / "hf_home"), **extra}


def _medhelm_run(tmp_path: Path, *args: str, **env: str) -> tuple[subprocess.CompletedProcess, float]:
    t0 = time.monotonic()
    r = subprocess.run([str(MEDHELM_RUN), *args, "--output-path", str(tmp_path / "out")], cwd=tmp_path,
                       env=_env(tmp_path, **env), capture_output=True, text=True, timeout=600)
    return r, time.monotonic() - t0


def _row(printed: str, run_prefix: str) -> list[str]:
    [line] = [ln for ln in printed.splitlines() if ln.startswith(run_prefix)]
    return line.split()


def test_the_estimate_downloads_nothing_and_counts_absent_data_from_recorded_sizes(tmp_path):
    r, seconds = _medhelm_run(tmp_path, "--conf-paths", str(ANY_MODEL_CONF), "--models-to-run", MODEL,
                              "--judges", "public", "--suite", "mine", "--max-eval-instances", "10",
                              "--estimate-cost")
    assert r.returncode == 0, r.stderr[-2000:]
    out = r.stdout
    assert "Retrying" not in r.stderr and "Traceback" not in r.stderr
    assert not (tmp_path / "out").exists()  # nothing cached, nothing written
    medication_qa = safe_load((ROOT / "medhelm_core/benchmarks/public/medication_qa" / SIZE_FILE).read_text())
    [rec] = medication_qa["sizes"]
    # model row: 10 calls (of 689), prompt tokens = 10 x the recorded mean, marked approximate
    cells = _row(out, f"medication_qa:model={MODEL.replace('/', '_')}")
    assert cells[3] == "10" and cells[5] == f"~{round(10 * rec['mean_prompt_tokens']):,}"
    # each judge: 10 calls around an answer of the model's max_tokens (512)
    lines = out.splitlines()
    i = next(i for i, ln in enumerate(lines) if ln.startswith("medication_qa:model="))
    judge = lines[i + 1].split()
    assert judge[:3] == ["+", "jury", "judge"] and judge[4] == "10"
    assert judge[6] == f"~{round(10 * (rec['mean_judge_prompt_tokens'] + 512)):,}"
    # one line for the recorded ones, one for those with neither data nor record
    [recorded] = [ln for ln in lines if "estimated from recorded sizes" in ln]
    assert "medication_qa" in recorded and "aci_bench" in recorded
    [absent] = [ln for ln in lines if ln.startswith("Not estimated:")]
    assert "med_dialog,subset=icliniq" in absent
    # what would stop the run, said before it, without reading any data: the three judges' keys and the model's
    stops = [ln for ln in lines if ln.startswith("Before a run can start:")]
    assert "$OPENAI_API_KEY" in stops[0] and "$TOGETHER_API_KEY" in stops[0] and "$ANTHROPIC_API_KEY" in stops[0]
    assert any("no API key for model deployment" in ln and MODEL in ln for ln in stops[1:])
    assert seconds < 120, seconds  # a loose guard against retries (each hub retry series takes ~40 s)


def test_with_the_data_mirrored_the_estimate_counts_the_real_prompts_close_to_the_record(tmp_path):
    r, _ = _medhelm_run(tmp_path, "--run-entries", f"medication_qa:model={MODEL}", "--suite", "s",
                        "--max-eval-instances", "1000", "--estimate-cost", MEDHELM_DATA_MIRROR=str(MIRROR))
    assert r.returncode == 0, r.stderr[-2000:]
    assert "recorded sizes" not in r.stdout
    cells = _row(r.stdout, "medication_qa:model=")
    [rec] = safe_load((ROOT / "medhelm_core/benchmarks/public/medication_qa" / SIZE_FILE).read_text())["sizes"]
    assert int(cells[3]) == rec["eval_instances"]
    real = int(cells[5].replace(",", ""))  # the same prompts, the same tokenizer: the record's mean x n
    assert abs(real - rec["mean_prompt_tokens"] * rec["eval_instances"]) <= 0.05 * rec["eval_instances"]


def test_the_recorded_sizes_are_what_the_data_measures(monkeypatch, tmp_path):
    """Every size.yaml record of a public benchmark whose data is in ../shared/data/public, measured again
    (scripts/record_benchmark_sizes.py wrote them)."""
    from medhelm_core.helm_config.expand import expand_confs
    from medhelm_core.run.workspace import Workspace

    monkeypatch.setenv("MEDHELM_DATA_MIRROR", str(MIRROR))
    ws = Workspace(tmp_path / "out", tmp_path / "prod_env")
    runs = expand_confs([ROOT / "conf" / "medhelm_public.yaml"], local_path=None,
                        run_spec_functions=default_catalog().run_spec_functions)
    checked = set()
    for run in runs:
        sspec = run.run_spec["scenario_spec"]
        rec = recorded_size(ws.catalog, sspec)
        key = repr((sspec["class_name"], sorted(sspec["args"].items())))
        if rec is None or key in checked:
            continue
        checked.add(key)
        with ws.data_scope():
            measured = measure_size(ws, run.run_spec)
        doc = safe_load(rec.source.read_text())
        assert measured in doc["sizes"], (rec.source, measured)
    assert len(checked) >= 14


def test_a_run_checks_keys_and_deployments_before_reading_any_data(tmp_path):
    """No key, no data mirrored: the key is named, and nothing was downloaded or cached first."""
    r, _ = _medhelm_run(tmp_path, "--run-entries", f"medcalc_bench:model={MODEL}", "--suite", "s",
                        "--max-eval-instances", "5")
    assert r.returncode == 2, r.stderr[-2000:]
    assert len(r.stderr.strip().splitlines()) == 1 and "no API key" in r.stderr
    assert not (tmp_path / "out" / "scenarios").exists()


def test_a_dataset_that_cannot_be_downloaded_is_one_line_without_hub_retries(tmp_path):
    r, seconds = _medhelm_run(tmp_path, "--run-entries", f"medcalc_bench:model={MODEL}", "--suite", "s",
                              "--max-eval-instances", "5", OPENAI_API_KEY="sk-test-not-a-key")
    assert r.returncode == 2, r.stderr[-2000:]
    [line] = r.stderr.strip().splitlines()
    assert "medcalc_bench: cannot download huggingface.co/datasets/ncbi/MedCalc-Bench" in line
    assert "cannot be reached" in line and "MEDHELM_DATA_MIRROR" in line
    assert "Retrying" not in r.stderr
    assert seconds < 60, seconds


def test_recorded_size_matching_by_args():
    """A record's args must all equal the spec's (med_dialog's subsets); path arguments are not recorded."""

    catalog = default_catalog()
    head_qa = {"class_name": "helm.benchmark.scenarios.headqa_scenario.HeadQAScenario",
               "args": {"language": "en", "category": None}}
    rec = recorded_size(catalog, head_qa)
    assert rec is not None and rec.eval_instances > 0
    assert recorded_size(catalog, {**head_qa, "args": {"language": "es", "category": None}}) is None


def test_a_key_that_cannot_be_sent_in_a_header_stops_the_run_before_any_call(tmp_path):
    """A pasted placeholder with an ellipsis (`sk-…`) would fail every request: said once, up front, and
    the key itself is not shown."""
    r, _ = _medhelm_run(tmp_path, "--run-entries", f"medcalc_bench:model={MODEL}", "--suite", "s",
                        "--max-eval-instances", "5", OPENAI_API_KEY="sk-\u2026secret")
    assert r.returncode == 2, r.stderr[-2000:]
    [line] = r.stderr.strip().splitlines()
    assert "cannot be sent in an HTTP header (character 4 of 10, not shown)" in line and "secret" not in line
