"""`--metric-device`: the device SummarizationMetric's run-spec args record, as HELM writes it
(`auto`: cuda when torch sees a GPU, else cpu), and `cuda` on a CPU machine computing BERTScore and
SummaC in a real `medhelm-run` (tiny local models in a Hugging Face cache, offline, the mock server),
or refusing before any call when their weights are not here."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from medhelm_core.errors import MedhelmError
from medhelm_core.hf_hub import torch_device_name
from medhelm_core.runspecs.metric_bundles import (
    basic_metric_specs,
    summarization_metric_args,
    summarization_metric_specs,
    with_metric_device,
)
from tests.oracle import SYNTHETIC
from tests.parity import lay_out_inputs

ROOT = Path(__file__).resolve().parents[2]
ENTRY = ("medhelm_configurable_benchmark:model=mockai/mock-gpt-a,model_deployment=mockai/mock-gpt-a,"
         "config_path=work/benchmarks/rouge_demo/config.yaml")
RUN = "ROUGE-DEMO:model=mockai_mock-gpt-a,model_deployment=mockai_mock-gpt-a"  # HELM's name, any device
GPU_STATS = ("summac", "BERTScore-P", "BERTScore-R", "BERTScore-F")


def _spec(metric_specs):
    return {"name": "r", "metric_specs": metric_specs}


def _devices(spec):
    return [m["args"].get("device") for m in spec["metric_specs"] if "device" in m["args"]]


def test_the_device_is_written_as_asked_and_auto_is_helms_rule_here():
    spec = _spec(summarization_metric_specs(summarization_metric_args("t")))
    assert _devices(spec) == ["cpu"]
    assert _devices(with_metric_device(spec, "cuda")) == ["cuda"]
    assert _devices(with_metric_device(spec, "cpu")) == ["cpu"]
    torch = pytest.importorskip("torch")
    assert torch_device_name() == ("cuda" if torch.cuda.is_available() else "cpu")
    assert _devices(with_metric_device(spec, "auto")) == [torch_device_name()]
    assert _devices(spec) == ["cpu"]  # the spec given is left as it was
    plain = _spec(basic_metric_specs([]))
    assert with_metric_device(plain, "cuda") == plain  # no SummarizationMetric: nothing to write
    with pytest.raises(MedhelmError, match="--metric-device 'gpu': expected one of auto, cpu, cuda"):
        with_metric_device(spec, "gpu")


RUN_IT = r'''
import sys
from medhelm_cli import run_main
sys.exit(run_main(sys.argv[1:]))
'''


def _medhelm_run(root: Path, hf_home: Path, nltk_data: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "HF_HOME": str(hf_home), "NLTK_DATA": str(nltk_data), "HF_HUB_OFFLINE": "1",
           "TRANSFORMERS_OFFLINE": "1", "DAGSTER_HOME": str(root / "dagster_home"),
           "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-c", RUN_IT, "--run-entries", ENTRY, "--suite", "s",
                           "--max-eval-instances", "5", "--local-path", "work/prod_env", "-o", "out", *args],
                          cwd=root, env=env, capture_output=True, text=True, timeout=900)


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    pytest.importorskip("bert_score")
    from tests.metrics.tiny_bert import save_tiny_distilbert, save_tiny_vitc, save_untrained_punkt

    folder = tmp_path_factory.mktemp("models")
    save_tiny_distilbert(folder / "hf")
    save_tiny_vitc(folder / "hf")
    save_untrained_punkt(folder / "nltk")
    return folder


def test_cuda_on_a_cpu_machine_computes_bertscore_and_summac(tmp_path, models, mock_server):
    lay_out_inputs(SYNTHETIC / "inputs", tmp_path, mock_server.base_url)
    r = _medhelm_run(tmp_path, models / "hf", models / "nltk", "--metric-device", "cuda")
    assert r.returncode == 0, r.stderr[-3000:]
    run = tmp_path / "out" / "runs" / "s" / RUN
    spec = json.loads((run / "run_spec.json").read_text())
    assert _devices(spec) == ["cuda"]
    per_instance = _by_instance(run / "per_instance_stats.json")  # HELM writes an entry per metric and instance
    assert len(per_instance) == 5
    for stats in per_instance.values():
        assert all(n in stats for n in GPU_STATS), sorted(stats)
    stats = {s["name"]["name"]: s for s in json.loads((run / "stats.json").read_text())}
    for name in GPU_STATS:  # run-level: the mean over instances (of the one train trial)
        values = [v[name] for v in per_instance.values()]
        assert stats[name]["mean"] == pytest.approx(sum(values) / len(values), abs=1e-12)
    assert len({v["summac"] for v in per_instance.values()}) > 1  # the score follows the text
    # Every other per-instance stat is that of HELM's own run of this entry (made with device cpu)
    gold = _by_instance(SYNTHETIC / "benchmark_output" / "runs" / "oracle-cfg" / RUN / "per_instance_stats.json")
    for instance_id, stats in per_instance.items():
        ours = {k: v for k, v in stats.items() if k not in GPU_STATS + ("inference_runtime",)}
        theirs = {k: v for k, v in gold[instance_id].items() if k != "inference_runtime"}
        assert ours == theirs


def _by_instance(path: Path) -> dict[str, dict[str, float]]:
    out: dict[str, dict[str, float]] = {}
    for entry in json.loads(path.read_text()):
        out.setdefault(entry["instance_id"], {}).update({s["name"]["name"]: s["sum"] for s in entry["stats"]})
    return out


def test_without_the_weights_the_run_refuses_before_any_call(tmp_path, models, mock_server):
    lay_out_inputs(SYNTHETIC / "inputs", tmp_path, mock_server.base_url)
    mock_server.reset()
    r = _medhelm_run(tmp_path, tmp_path / "empty_hf", models / "nltk", "--metric-device", "cuda")
    assert r.returncode != 0
    line = r.stderr.strip().splitlines()[-1]
    assert RUN.split(":")[0] in line and str(tmp_path / "empty_hf") in line and "--metric-device cpu" in line, line
    assert mock_server.stats()["total_requests"] == 0
    assert not (tmp_path / "out" / "runs" / "s" / RUN / "per_instance_stats.json").exists()


def _python(code: str) -> str:
    """`code` run by a fresh interpreter (torch not imported yet); its stdout."""
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    return out.stdout


def test_auto_is_asked_in_a_child_process_and_gives_torchs_own_answer():
    """The suite's process never imports torch (180 MB, 1.5 s) to learn the device; the child's answer
    is the one torch gives in this process."""
    pytest.importorskip("torch")
    code = ("import sys; from medhelm_core import hf_hub\n"
            "hf_hub._cpu_only_torch = lambda: False   # as on a CUDA build\n"
            "hf_hub.start_torch_device_probe(); assert 'probe' in hf_hub._device\n"
            "name = hf_hub.torch_device_name()\n"
            "assert 'torch' not in sys.modules, 'torch imported here'\n"
            "import torch; assert name == ('cuda' if torch.cuda.is_available() else 'cpu'), name\n"
            "print(name)")
    assert _python(code).strip() in ("cpu", "cuda")


def test_a_failing_child_falls_back_to_asking_here():
    pytest.importorskip("torch")
    code = ("import sys; from medhelm_core import hf_hub\n"
            "hf_hub._cpu_only_torch = lambda: False\n"
            "hf_hub._DEVICE_PROBE = 'raise SystemExit(3)'\n"
            "name = hf_hub.torch_device_name()\n"
            "assert 'torch' in sys.modules, 'not asked here'\n"
            "import torch; assert name == ('cuda' if torch.cuda.is_available() else 'cpu'), name")
    _python(code)


def test_a_build_of_torch_without_gpu_libraries_is_cpu_without_importing_it():
    pytest.importorskip("torch")
    code = ("import sys; from medhelm_core import hf_hub\n"
            "cpu_only = hf_hub._cpu_only_torch(); name = hf_hub.torch_device_name()\n"
            "assert 'torch' not in sys.modules\n"
            "import torch; print(cpu_only, name, hasattr(torch._C, '_cuda_getDeviceCount'), torch.cuda.is_available())")
    cpu_only, name, compiled, available = _python(code).split()
    if cpu_only == "True":
        assert (compiled, available, name) == ("False", "False", "cpu")
    assert name == ("cuda" if available == "True" else "cpu")
