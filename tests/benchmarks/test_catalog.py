"""The benchmark catalog: a benchmark is one folder, found by looking (built-in, or given by path)."""
import json
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from medhelm_core.catalog import BUILTIN_ROOT, DEFAULT_EDITION, Catalog, deep_merge, load_catalog
from medhelm_core.errors import MedhelmError

ROOT = Path(__file__).resolve().parents[2]

TOY_YAML = """\
tier: public
run_spec:
  name: toy_yesno
  groups: [toy_yesno]
  scenario_class: example.toy.ToyYesNoScenario
  adapter_method: multiple_choice_joint
  adapter:
    instructions: Answer A for yes or B for no.
    input_noun: Question
    output_noun: Answer
    max_train_instances: 0
  metric_bundle: exact_match
scenario:
  name: toy_yesno
  description: Yes/no questions read from the folder's own CSV.
  tags: [question_answering]
  definition_path: toy
helm_metadata:
  name: toy_yesno
  display_name: Toy yes/no
  description: Yes/no questions read from the folder's own CSV.
  taxonomy: {task: question answering, what: toy, when: any, who: any, language: English}
  main_metric: exact_match
  main_split: test
editions:
  medhelm-0.8.0:
    run_spec:
      adapter:
        instructions: Reply with A (yes) or B (no).
"""

TOY_RUN_SPEC = """\
from medhelm_core.runspecs.public import build_public_run_spec


def run_spec(bench):
    return build_public_run_spec(bench)
"""

TOY_SCENARIO = """\
import csv

from medhelm_core.helm_types import TEST_SPLIT, instance, reference
from medhelm_core.scenarios.public.base import no_args as check  # noqa: F401


def files(bench, args):
    return [bench.folder / "questions.csv"]


def load(bench, args):
    with open(bench.folder / "questions.csv", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    return [instance(r["question"], [reference("yes", r["answer"] == "yes"), reference("no", r["answer"] == "no")],
                     TEST_SPLIT) for r in rows]
"""


def toy_folder(parent: Path, name: str = "toy_yesno") -> Path:
    folder = parent / name
    folder.mkdir(parents=True)
    (folder / "benchmark.yaml").write_text(TOY_YAML.replace("toy_yesno", name))
    (folder / "run_spec.py").write_text(TOY_RUN_SPEC)
    (folder / "scenario.py").write_text(TOY_SCENARIO)
    (folder / "questions.csv").write_text("question,answer\nIs aspirin an NSAID?,yes\nIs insulin oral?,no\n"
                                          "Is the heart a muscle?,yes\n")
    return folder


def test_built_in_folders_are_complete():
    cat = load_catalog()
    tiers = [b.tier for b in cat.benchmarks.values()]
    # helm-0.5.16 (the default): the 38 MedHELM folders plus healthqa_br and mmlu_clinical_afr (HELM 0.5.16 has
    # them, outside MedHELM's schema); medhelm 0.8.0 adds sct_bench, health_bench(_professional), medxpert_qa_text,
    # health_admin_bench and the three synt_* benchmarks.
    assert {t: tiers.count(t) for t in set(tiers)} == {"public": 18, "gated": 7, "private": 15}
    assert set(cat.elsewhere) >= {"sct_bench", "medxpert_qa_text", "synt_family_disclosure"}
    newer = load_catalog((), "medhelm-0.8.0")
    assert set(newer.benchmarks) - set(cat.benchmarks) == set(cat.elsewhere) and not newer.elsewhere
    classes = [b.scenario_class for b in cat.benchmarks.values()]
    assert len(classes) == len(set(classes)), "one scenario class per folder"
    for name, bench in cat.benchmarks.items():
        assert bench.folder == BUILTIN_ROOT / bench.tier / name
        assert (bench.folder / "run_spec.py").is_file() and (bench.folder / "scenario.py").is_file(), name
        assert callable(cat.run_spec_functions[name])
        if bench.annotator_class:
            assert bench.annotator_class in cat.annotators, name
    # Every metric class a folder names is implemented (by the library or by a folder's metric.py).
    for bench in cat.benchmarks.values():
        rs = bench.text["run_spec"]
        for cls in rs.get("metric_classes", []) + ([rs["metric_class"]] if "metric_class" in rs else []):
            assert cls in cat.metrics, (bench.name, cls)


def test_catalog_reads_no_benchmark_code_until_asked():
    code = ("import sys; from medhelm_core.catalog import load_catalog; c = load_catalog(); "
            "print(sum(m.startswith('medhelm_benchmarks') for m in sys.modules)); c.benchmark('ehr_sql').module('scenario');"
            "print(sum(m.startswith('medhelm_benchmarks') for m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT).stdout
    assert out.split() == ["0", "1"]


def test_a_folder_given_by_path_joins_the_catalog(tmp_path):
    toy_folder(tmp_path / "mine")
    cat = Catalog([BUILTIN_ROOT, tmp_path / "mine"])
    bench = cat.benchmark("toy_yesno")
    assert bench.tier == "public" and bench.edition == DEFAULT_EDITION
    spec = cat.run_spec_functions["toy_yesno"]()
    assert spec["name"] == "toy_yesno" and spec["adapter_spec"]["instructions"] == "Answer A for yes or B for no.\n"
    assert [m["class_name"].rsplit(".", 1)[1] for m in spec["metric_specs"]] == [
        "BasicGenerationMetric", "BasicReferenceMetric", "InstancesPerSplitMetric"]
    instances = cat.scenario("example.toy.ToyYesNoScenario").load({})
    assert [i["input"]["text"] for i in instances][0] == "Is aspirin an NSAID?"
    with pytest.raises(MedhelmError, match="toy_yesno: ToyYesNoScenario takes no arguments"):
        cat.scenario("example.toy.ToyYesNoScenario").load({"x": 1})
    # A run entry with an argument the folder's run_spec does not take is refused, as HELM's are.
    with pytest.raises(TypeError):
        cat.run_spec_functions["toy_yesno"](language="en")


def test_an_edition_overlays_the_folders_values(tmp_path):
    toy_folder(tmp_path)
    helm = Catalog([tmp_path]).run_spec_functions["toy_yesno"]()
    fork = Catalog([tmp_path], edition="medhelm-0.8.0").run_spec_functions["toy_yesno"]()
    assert fork["adapter_spec"]["instructions"] == "Reply with A (yes) or B (no).\n"
    assert {**fork["adapter_spec"], "instructions": None} == {**helm["adapter_spec"], "instructions": None}
    assert {k: v for k, v in fork.items() if k != "adapter_spec"} == {k: v for k, v in helm.items() if k != "adapter_spec"}
    assert deep_merge({"a": {"b": 1, "c": [1]}, "d": 2}, {"a": {"c": [2]}}) == {"a": {"b": 1, "c": [2]}, "d": 2}


def test_user_folders_default_to_the_private_tier(tmp_path):
    folder = toy_folder(tmp_path)
    (folder / "benchmark.yaml").write_text(TOY_YAML.replace("tier: public\n", ""))
    assert Catalog([tmp_path]).benchmark("toy_yesno").tier == "private"


def test_bad_folders_get_one_line_errors(tmp_path):
    toy_folder(tmp_path / "dup", name="ehr_sql")
    with pytest.raises(MedhelmError, match=r"benchmark ehr_sql is defined twice: .*public/ehr_sql and .*dup/ehr_sql"):
        Catalog([BUILTIN_ROOT, tmp_path / "dup"])
    broken = toy_folder(tmp_path / "broken")
    (broken / "benchmark.yaml").write_text("run_spec: [unclosed\n")
    with pytest.raises(MedhelmError, match=r"benchmark file .*broken/toy_yesno/benchmark.yaml is not valid YAML"):
        Catalog([tmp_path / "broken"])
    partial = toy_folder(tmp_path / "partial")
    (partial / "run_spec.py").unlink()
    with pytest.raises(MedhelmError, match=r"benchmark toy_yesno .*: run_spec.py must define run_spec\(\)"):
        Catalog([tmp_path / "partial"]).run_spec_functions["toy_yesno"]
    # Only the entry looked up is loaded: the built-in entries still expand beside it.
    assert Catalog([BUILTIN_ROOT, tmp_path / "partial"]).run_spec_functions["pubmed_qa"]()["name"] == "pubmed_qa"
    broken_code = toy_folder(tmp_path / "code")
    (broken_code / "scenario.py").write_text("def load(bench, args)\n    return []\n")
    with pytest.raises(MedhelmError, match=r"code/toy_yesno/scenario.py:1: "):
        Catalog([tmp_path / "code"]).scenarios
    (broken_code / "scenario.py").write_text("import no_such_module_here\n")
    with pytest.raises(MedhelmError, match=r"scenario.py: cannot be loaded: ModuleNotFoundError: No module named"):
        Catalog([tmp_path / "code"]).scenarios
    # Only the folder asked for is loaded: a broken folder of one's own does not break the others.
    mixed = Catalog([BUILTIN_ROOT, tmp_path / "code"])
    assert mixed.scenario("helm.benchmark.scenarios.pubmed_qa_scenario.PubMedQAScenario").tier == "public"
    assert mixed.tier_of("example.toy.ToyYesNoScenario") == "public"
    with pytest.raises(MedhelmError, match="benchmark folder not found"):
        Catalog([tmp_path / "nowhere"])
    with pytest.raises(MedhelmError, match="scenario class nope.Nope is not implemented"):
        Catalog([tmp_path / "dup"]).scenario("nope.Nope")


def test_a_new_benchmark_is_one_folder_plus_its_conf_line(tmp_path, monkeypatch):
    """The toy benchmark runs end to end from a temp folder: medhelm-run --benchmark-path, then the leaderboard."""
    from medhelm_cli import run_main, summarize_main
    from medhelm_core import demo_server

    toy_folder(tmp_path / "benchmarks")
    conf = tmp_path / "toy.conf"
    conf.write_text('entries: [{description: "toy_yesno:model=demo/model-a", priority: 1}]\n')
    server = demo_server.serve(0)
    try:
        prod_env = tmp_path / "prod_env"
        shutil.copytree(ROOT / "examples" / "prod_env", prod_env)
        deployments = prod_env / "model_deployments.yaml"
        port = server.server_address[1]
        deployments.write_text(re.sub(r"127\.0\.0\.1:\d+", f"127.0.0.1:{port}", deployments.read_text()))
        monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "dagster_home"))
        out = tmp_path / "out"
        assert run_main(["--conf-paths", str(conf), "--suite", "toy", "--max-eval-instances", "10",
                         "--local-path", str(prod_env), "--output-path", str(out),
                         "--benchmark-path", str(tmp_path / "benchmarks")]) == 0
        assert summarize_main(["--suite", "toy", "--output-path", str(out), "--local-path", str(prod_env),
                               "--auto-generate-schema"]) == 0
    finally:
        server.shutdown()
    run = out / "runs" / "toy" / "toy_yesno:model=demo_model-a"
    states = json.loads((run / "scenario_state.json").read_text())["request_states"]
    assert len(states) == 3
    assert states[0]["request"]["prompt"].startswith("Answer A for yes or B for no.\n\nQuestion: Is aspirin an NSAID?\n")
    per_instance = json.loads((run / "per_instance_stats.json").read_text())
    exact = [s["mean"] for p in per_instance for s in p["stats"] if s["name"]["name"] == "exact_match"]
    assert len(exact) == 3 and all(v in (0, 1) for v in exact)
    stats = {s["name"]["name"]: s for s in json.loads((run / "stats.json").read_text())
             if not s["name"].get("perturbation") and s["name"]["split"] == "test"}
    assert stats["exact_match"]["mean"] == pytest.approx(sum(exact) / 3)
    groups = json.loads((out / "runs" / "toy" / "groups.json").read_text())
    assert any(t["title"] == "Toy yes/no" or "toy_yesno" in json.dumps(t) for t in groups)


def _every_folder() -> list:
    """(edition, run-entry name) of every built-in folder, each under the editions it exists in."""
    out = [("helm-0.5.16", name) for name in load_catalog().benchmarks]
    out += [("medhelm-0.8.0", name) for name in load_catalog((), "medhelm-0.8.0").benchmarks
            if name not in load_catalog().benchmarks]
    return out


@pytest.mark.parametrize("edition, name", _every_folder())
def test_each_folder_keeps_the_plug_in_contract(edition, name):
    """A folder's modules load, and every function the catalog calls takes the typed `bench: Benchmark`
    first (the plug-in API a new folder copies)."""
    import inspect

    from medhelm_core.catalog import Benchmark

    bench = load_catalog((), edition).benchmarks[name]
    called = {"run_spec": ["run_spec"], "scenario": ["load", "files", "check", "metadata", "helm_metadata"],
              "annotator": ["annotator"]}
    found = 0
    for part, functions in called.items():
        module = bench.module(part)
        if module is None:
            assert part == "annotator", (name, part)
            continue
        for fn_name in functions:
            fn = getattr(module, fn_name, None)
            if fn is None:
                assert fn_name not in ("run_spec", "load", "files"), (name, fn_name)
                continue
            params = list(inspect.signature(fn).parameters.values())  # (annotations as written: helper
            # modules the catalog itself imports name Benchmark for type checkers only)
            assert params and params[0].name == "bench" and params[0].annotation in (Benchmark, "Benchmark"), \
                (name, fn_name, params[:1])
            found += 1
    assert found >= 3
