"""Run-entry confs, run names (HELM's helm-run front half) and model deployments / credentials."""
from __future__ import annotations

import os
import textwrap
from pathlib import Path

import pytest
import yaml
from pydantic import SecretStr

from medhelm_core.helm_config import (
    Credentials,
    Deployment,
    ModelRegistry,
    api_key_env_var,
    check_models_to_run,
    dry_run_names,
    load_credentials,
    load_deployments,
    load_model_registry,
    parse_description,
    parse_hocon,
    read_run_entries,
    resolve_api_key,
    resolve_base_url,
    run_entries_to_run_specs,
)
from medhelm_core.helm_config.deployments import ModelMetadata
from medhelm_core.helm_config.entry_files import load_run_entries
from medhelm_core.helm_config.run_entries import RunEntry
from medhelm_core.helm_types import adapter_spec, generation_adapter_spec, run_spec, scenario_spec
from medhelm_core.errors import MedhelmError

SHARED = Path(os.environ.get("MEDHELM_SHARED", "/work/shared"))
HELM_CONFS = SHARED / "helm"
ORACLE = SHARED / "oracle"
CONF_COUNTS = {"public": 221, "gated": 143, "private_stanford": 338, "dspy": 64}

needs_shared = pytest.mark.skipif(not HELM_CONFS.is_dir(), reason="shared/helm confs not available")
needs_oracle = pytest.mark.skipif(not ORACLE.is_dir(), reason="shared/oracle not available")


# --------------------------------------------------------------------------------------------
# Fake run-spec functions: they return the names HELM's functions return
# (run_specs/medhelm_run_specs.py), with a MedHELM-like adapter spec (max_train_instances=0).
# --------------------------------------------------------------------------------------------


def _spec(name: str, group: str, **adapter_fields) -> dict:
    adapter = generation_adapter_spec(max_train_instances=0, max_tokens=adapter_fields.pop("max_tokens", 10),
                                      stop_sequences=adapter_fields.pop("stop_sequences", []))
    adapter.update(adapter_fields)
    return run_spec(name, scenario_spec("fake.Scenario"), adapter, [], [group])


def _plain(prefix: str, name: str | None = None):
    def fn(**kwargs):
        return _spec(name or prefix, name or prefix)

    return fn


def clear(condition, data_path):
    return _spec(f"clear:condition={condition}", "clear")


def ehrshot(subject, data_path, max_length=100000):
    return _spec(f"ehrshot:subject={subject}", "ehrshot")


def head_qa(language="en", category=None):
    return _spec(f"head_qa:language={language},category={category}", "head_qa")


def med_dialog(subset, jury_config_path=None):
    return _spec(f"med_dialog,subset={subset}", "med_dialog")


def n2c2_ct_matching(data_path, subject):
    return _spec(f"n2c2_ct_matching:subject={subject}", "n2c2_ct_matching")


def medcalc_bench(version=None):
    return _spec("medcalc_bench" if version is None else f"medcalc_bench:version={version}", "medcalc_bench")


def shc_ptbm_med(data_path):
    return _spec("shc_ptbm_med", "shc_ptbm_med")


def mental_health(data_path, jury_config_path=None):
    return _spec("mental_health", "mental_health")


def _configurable(config_path):
    # HELM's medhelm_configurable_benchmark names the run after the YAML's `name`. The oracle
    # confs say work/benchmarks/...; those files are under oracle/synthetic/inputs/benchmarks/.
    path = ORACLE / "synthetic" / "inputs" / Path(config_path).relative_to("work")
    name = yaml.safe_load(path.read_text())["name"]
    return _spec(name, name)


FUNCTIONS = {
    "clear": clear,
    "ehrshot": ehrshot,
    "head_qa": head_qa,
    "med_dialog": med_dialog,
    "n2c2_ct_matching": n2c2_ct_matching,
    "medcalc_bench": medcalc_bench,
    "shc_ptbm_med": shc_ptbm_med,
    "mental_health": mental_health,
    "medhelm_med_qa": _plain("medhelm_med_qa", "med_qa"),
    "medhelm_med_mcqa": _plain("medhelm_med_mcqa", "med_mcqa"),
    "medhelm_configurable_benchmark": _configurable,
}
for _prefix in [
    "aci_bench", "chw_care_plan", "dischargeme", "ehr_sql", "medalign", "medbullets", "medec", "medhallu",
    "medi_qa", "medication_qa", "mimic_bhc", "mimic_rrs", "mimiciv_billing_code", "mtsamples_procedures",
    "mtsamples_replicate", "pubmed_qa", "race_based_med", "starr_patient_instructions", "shc_bmt_med",
    "shc_cdi_med", "shc_conf_med", "shc_ent_med", "shc_gip_med", "shc_privacy_med", "shc_proxy_med",
    "shc_sei_med", "shc_sequoia_med",
]:
    FUNCTIONS[_prefix] = _plain(_prefix)


def _deployment(name: str, model: str | None = None, **extra) -> Deployment:
    return Deployment(name=name, model_name=model,
                      client_spec={"class_name": "helm.clients.openai_client.OpenAIClient", "args": {}}, **extra)


def registry_for(entries: list[RunEntry]) -> ModelRegistry:
    """A registry serving each (model, model_deployment) pair the entries name."""
    registry = ModelRegistry()
    seen = set()
    for entry in entries:
        args = parse_description(entry.description).args
        pair = (args["model"], args["model_deployment"])
        if pair not in seen:
            seen.add(pair)
            registry.register_deployment(_deployment(pair[1], pair[0]))
    return registry


def names(entries, registry=None, **kwargs) -> list[str]:
    registry = registry if registry is not None else registry_for(entries)
    return [r.name for r in run_entries_to_run_specs(entries, registry=registry, run_spec_functions=FUNCTIONS,
                                                     **kwargs)]


def entry(description: str, priority: int | None = 1, groups=None) -> RunEntry:
    return RunEntry(description=description, priority=priority, groups=groups)


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return path


# --------------------------------------------------------------------------------------------
# Conf files
# --------------------------------------------------------------------------------------------


@needs_shared
@pytest.mark.parametrize("name,count", sorted(CONF_COUNTS.items()))
def test_medhelm_confs_load(name, count):
    entries = load_run_entries(HELM_CONFS / f"run_entries_medhelm_{name}.conf")
    assert len(entries) == count
    assert all(e.priority == 1 and e.groups is None for e in entries)
    assert all(e.description.count(":") >= 1 for e in entries)
    # line numbers point at the entry itself
    lines = (HELM_CONFS / f"run_entries_medhelm_{name}.conf").read_text().splitlines()
    for e in entries[:5] + entries[-5:]:
        assert e.description in lines[e.line - 1]


@needs_shared
def test_read_run_entries_concatenates_in_order():
    paths = [HELM_CONFS / f"run_entries_medhelm_{n}.conf" for n in ("public", "dspy")]
    entries = read_run_entries(paths)
    assert len(entries) == 221 + 64
    assert entries[0].source == str(paths[0]) and entries[-1].source == str(paths[1])


def test_hocon_features(tmp_path):
    conf = write(tmp_path, "x.conf", r'''
        // a comment
        {
          entries: [
            # hash comment
            {description: "a:k=v", priority: 2}   // trailing comment
            {"description": "b:x=\"q\"\u0041", priority = 3,}
            {description: "c:k=1", groups: [g2, "g1"]},
            {description: """d:raw\n""", priority: 1, unknown_key: 5},
          ],
          other.dotted.key: true
        }
    ''')
    entries = load_run_entries(conf)
    assert entries[0].description == "a:k=v" and entries[0].priority == 2
    assert entries[1].description == 'b:x="q"A' and entries[1].priority == 3
    assert entries[2].groups == ["g2", "g1"] and entries[2].priority is None
    assert entries[3].description == "d:raw\\n"
    assert [e.line for e in entries] == [6, 7, 8, 9]


def test_hocon_object_concatenation_merges_like_pyhocon():
    tree = parse_hocon('entries: [\n  {description: "a", priority: 1} {description: "b"}\n  {description: "c"}\n]')
    assert tree == {"entries": [{"description": "b", "priority": 1}, {"description": "c"}]}
    assert tree["entries"].item_lines == [2, 3]


def test_hocon_values():
    tree = parse_hocon('a: 1\nb: 1.5\nc: -2\nd: TRUE\ne: null\nf: foo bar  baz\ng.h: "x"\ng.i: [1, 2,\n 3]\n'
                       'j { k: 1 }\nj { l: 2 }\n')
    assert tree == {"a": 1, "b": 1.5, "c": -2, "d": True, "e": None, "f": "foo bar  baz",
                    "g": {"h": "x", "i": [1, 2, 3]}, "j": {"k": 1, "l": 2}}
    assert isinstance(tree["a"], int) and isinstance(tree["b"], float)
    assert parse_hocon("[1, 2]") == [1, 2]


@pytest.mark.parametrize("body,line,fragment", [
    ('entries: [\n  {description: "a", priority: 1}\n  {description: "b" priority: 1}\n]\n', 3, "between fields"),
    ('entries: [\n  {description: "a", priority: 1} [1]\n]\n', 2, "concatenate"),
    ('entries: [\n  {description: "a", priority: 1}\n  "x" {description: "b"}\n]\n', 3, "concatenate"),
    ('entries: [\n  {description: "a, priority: 1},\n]\n', 2, "unterminated"),
    ('entries: [\n  {description: "a",, priority: 1},\n]\n', 2, "unexpected ','"),
    ('entries: [\n  {description: "a", priority: 1},,\n]\n', 2, "unexpected ','"),
    ('entries: [\n  {description: "a", priority: 1},\n', 3, "missing ']' for the array opened at line 1"),
    ('entries: [\n  {description: "a", priority: 1\n]\n', 3, "unexpected ']'"),
    ('entries: [\n  {description: "a", priority: "1"},\n]\n', 2, "priority"),
    ('entries: [\n  {priority: 1},\n]\n', 2, "description"),
    ('entries: [\n  {description: 5},\n]\n', 2, "description"),
    ('entries: [\n  "not an object",\n]\n', 2, "must be an object"),
    ('entries: [\n  {description: ${X}},\n]\n', 2, "substitutions"),
    ('include "other.conf"\nentries: []\n', 1, "include"),
    ('entries: [\n  {description "a"},\n]\n', 2, "expected ':' or '='"),
    ('entries: [\n  {description: "a\\q"},\n]\n', 2, "invalid escape"),
    ('foo: []\n', 1, "missing 'entries'"),
    ('entries: 5\n', 1, "must be a list"),
    ('entries: [\n  {description: "a"}\n]\n}\n', 4, "unexpected '}'"),
])
def test_malformed_conf_reports_file_and_line(tmp_path, body, line, fragment):
    conf = write(tmp_path, "bad.conf", body)
    with pytest.raises(MedhelmError) as err:
        load_run_entries(conf)
    message = str(err.value)
    assert message.startswith(f"{conf}:{line}: "), message
    assert fragment in message, message


def test_missing_conf_file(tmp_path):
    with pytest.raises(MedhelmError, match="not found"):
        load_run_entries(tmp_path / "nope.conf")


# --------------------------------------------------------------------------------------------
# Descriptions
# --------------------------------------------------------------------------------------------


def test_parse_description_grammar():
    parsed = parse_description("ehrshot:max_length=100000,subject=x,t=0.5,p=/a=b:c,e=1e3,s= 7")
    assert parsed.name == "ehrshot"
    assert parsed.args == {"max_length": 100000, "subject": "x", "t": 0.5, "p": "/a=b:c", "e": 1000.0, "s": 7}
    assert type(parsed.args["max_length"]) is int
    assert list(parsed.args) == ["max_length", "subject", "t", "p", "e", "s"]
    assert parse_description("medec").args == {}
    # a repeated key keeps its first position and its last value (dict semantics)
    assert list(parse_description("x:a=1,b=2,a=3").args.items()) == [("a", 3), ("b", 2)]


@pytest.mark.parametrize("description", ["x:", "x:a=1,,b=2", "x:a=1,b"])
def test_parse_description_errors(description):
    with pytest.raises(MedhelmError, match="expected <key>=<value>"):
        parse_description(description)


def test_bad_description_error_has_conf_line(tmp_path):
    conf = write(tmp_path, "c.conf", 'entries: [\n  {description: "medec:model", priority: 1},\n]\n')
    with pytest.raises(MedhelmError) as err:
        names(load_run_entries(conf), registry=ModelRegistry())
    assert str(err.value).startswith(f"{conf}:2: ")


# --------------------------------------------------------------------------------------------
# Run names
# --------------------------------------------------------------------------------------------

GPT4O = "model=openai/gpt-4o-2024-05-13,model_deployment=stanfordhealthcare/gpt-4o-2024-05-13"
GPT4O_NAME = "model=openai_gpt-4o-2024-05-13,model_deployment=stanfordhealthcare_gpt-4o-2024-05-13"
R1 = "model=deepseek-ai/deepseek-r1,model_deployment=stanfordhealthcare/deepseek-r1"
R1_NAME = "model=deepseek-ai_deepseek-r1,model_deployment=stanfordhealthcare_deepseek-r1"

# helm-output-summarize.md §1.2 worked examples (elided parts filled from the MedHELM confs).
WORKED_EXAMPLES = [
    (f"medcalc_bench:{GPT4O}", f"medcalc_bench:{GPT4O_NAME}"),
    (f"medcalc_bench:num_output_tokens=4000,{R1}", f"medcalc_bench:num_output_tokens=4000,{R1_NAME}"),
    (f"med_dialog:num_output_tokens=4000,subset=icliniq,{R1}",
     f"med_dialog,subset=icliniq:num_output_tokens=4000,{R1_NAME}"),
    (f"ehrshot:max_length=100000,subject=guo_readmission,{GPT4O},data_path=/share/pi/nigam/data/medhelm/ehrshot/meds/",
     f"ehrshot:subject=guo_readmission,{GPT4O_NAME}"),
    (f"clear:condition=alcohol_dependence,max_eval_instances=100,{GPT4O},"
     "data_path=/share/pi/nigam/suhana/medhelm/data/CLEAR/human_labeled/",
     f"clear:condition=alcohol_dependence,max_eval_instances=100,{GPT4O_NAME}"),
    (f"head_qa:{GPT4O}", f"head_qa:language=en,category=None,{GPT4O_NAME}"),
    (f"medhelm_med_qa:{GPT4O}", f"med_qa:{GPT4O_NAME}"),
]


@pytest.mark.parametrize("description,expected", WORKED_EXAMPLES)
def test_worked_examples(description, expected):
    runs = run_entries_to_run_specs([entry(description)], max_eval_instances=1000, registry=registry_for(
        [entry(description)]), run_spec_functions=FUNCTIONS)
    assert [r.name for r in runs] == [expected]


@needs_shared
def test_worked_examples_are_in_the_medhelm_confs():
    descriptions = {e.description for n in CONF_COUNTS for e in
                    load_run_entries(HELM_CONFS / f"run_entries_medhelm_{n}.conf")}
    assert {d for d, _ in WORKED_EXAMPLES} <= descriptions


def test_adapter_spec_effects():
    d = f"clear:condition=alcohol_dependence,max_eval_instances=100,{GPT4O},data_path=/x"
    (run,) = run_entries_to_run_specs([entry(d)], max_eval_instances=7, num_train_trials=3,
                                      registry=registry_for([entry(d)]), run_spec_functions=FUNCTIONS)
    a = run.run_spec["adapter_spec"]
    assert a["model"] == "openai/gpt-4o-2024-05-13"
    assert a["model_deployment"] == "stanfordhealthcare/gpt-4o-2024-05-13"
    assert a["max_eval_instances"] == 100          # the expander's value wins over the CLI's
    assert a["num_train_trials"] == 1              # forced: max_train_instances == 0
    d2 = f"medcalc_bench:num_output_tokens=4000,{R1}"
    (run,) = run_entries_to_run_specs([entry(d2)], max_eval_instances=7, num_train_trials=3,
                                      registry=registry_for([entry(d2)]), run_spec_functions=FUNCTIONS)
    assert run.run_spec["adapter_spec"]["max_tokens"] == 4000
    assert run.run_spec["adapter_spec"]["max_eval_instances"] == 7


def test_num_train_trials_applies_when_max_train_instances_nonzero():
    def fewshot():
        return run_spec("fewshot", scenario_spec("s"), adapter_spec(method="generation"), [], ["fewshot"])

    registry = ModelRegistry()
    registry.register_deployment(_deployment("org/m"))
    (run,) = run_entries_to_run_specs([entry("fewshot:model=org/m")], num_train_trials=3, registry=registry,
                                      run_spec_functions={"fewshot": fewshot})
    assert run.run_spec["adapter_spec"]["num_train_trials"] == 3
    assert run.run_spec["adapter_spec"]["max_train_instances"] == 5
    (run,) = run_entries_to_run_specs([entry("fewshot:model=org/m,max_train_instances=0")], num_train_trials=3,
                                      registry=registry, run_spec_functions={"fewshot": fewshot})
    assert run.run_spec["adapter_spec"]["num_train_trials"] == 1
    assert run.name == "fewshot:model=org_m,max_train_instances=0"


@needs_shared
def test_all_medhelm_confs_expand():
    all_names = []
    for n, count in CONF_COUNTS.items():
        entries = load_run_entries(HELM_CONFS / f"run_entries_medhelm_{n}.conf")
        got = names(entries, max_eval_instances=1000)
        assert len(got) == count
        all_names += got
    assert len(all_names) == 766
    for name in all_names:
        assert "/" not in name
        assert ",model=" in name or ":model=" in name
        assert ",model_deployment=" in name
    # the shc_* gpt-4o duplicates differ by num_output_tokens, so names stay unique
    assert len(set(all_names)) == len(all_names)
    assert ("shc_ptbm_med:model=openai_gpt-4o-2024-05-13,"
            "model_deployment=stanfordhealthcare_shc_gpt-4o-2024-05-13") in all_names
    assert ("shc_ptbm_med:num_output_tokens=4000,model=openai_gpt-4o-2024-05-13,"
            "model_deployment=stanfordhealthcare_shc_gpt-4o-2024-05-13") in all_names


def _oracle_run_dirs(suite_path: Path) -> list[str]:
    return sorted(p.name for p in suite_path.iterdir()
                  if p.is_dir() and p.name not in ("eval_cache", "groups"))


@needs_oracle
def test_oracle_public_names():
    inputs = ORACLE / "public" / "inputs"
    got = dry_run_names([inputs / "conf" / "public.conf"], max_eval_instances=50,
                        local_path=inputs / "prod_env", run_spec_functions=FUNCTIONS)
    assert len(got) == 28
    assert sorted(got) == _oracle_run_dirs(ORACLE / "public" / "benchmark_output" / "runs" / "public-n50")
    # helm-run order is conf order
    assert got[0] == "aci_bench:model=mockai_mock-gpt-a,model_deployment=mockai_mock-gpt-a"
    assert got[2] == "head_qa:language=en,category=None,model=mockai_mock-gpt-a,model_deployment=mockai_mock-gpt-a"


@needs_oracle
@pytest.mark.parametrize("conf,suite", [
    ("private.conf", "oracle-private"),
    ("configurable.conf", "oracle-cfg"),
])
def test_oracle_synthetic_names(conf, suite):
    inputs = ORACLE / "synthetic" / "inputs"
    got = dry_run_names([inputs / "conf" / conf], max_eval_instances=50, local_path=inputs / "prod_env",
                        run_spec_functions=FUNCTIONS)
    assert sorted(got) == _oracle_run_dirs(ORACLE / "synthetic" / "benchmark_output" / "runs" / suite)
    runs = run_entries_to_run_specs(read_run_entries([inputs / "conf" / conf]), max_eval_instances=50,
                                    registry=load_model_registry(inputs / "prod_env"), run_spec_functions=FUNCTIONS)
    for run in runs:
        a = run.run_spec["adapter_spec"]
        assert a["max_eval_instances"] == 50 and a["num_train_trials"] == 1
        assert a["model"] == a["model_deployment"]


@needs_oracle
def test_oracle_configurable_subset():
    inputs = ORACLE / "synthetic" / "inputs"
    got = dry_run_names([inputs / "conf" / "configurable_exact_match.conf"], local_path=inputs / "prod_env",
                        run_spec_functions=FUNCTIONS)
    assert got == ["EXACT-MATCH-DEMO:model=mockai_mock-gpt-a,model_deployment=mockai_mock-gpt-a",
                   "EXACT-MATCH-DEMO:model=mockai_mock-gpt-b,model_deployment=mockai_mock-gpt-b"]


def _two_model_registry() -> ModelRegistry:
    registry = ModelRegistry()
    for model in ("org/a", "org/b"):
        registry.register_metadata(ModelMetadata(name=model, creator_organization_name="o", display_name=model,
                                                 description=model, access="open", tags=["TEXT_MODEL_TAG"]))
        registry.register_deployment(_deployment(f"host/{model.split('/')[1]}", model))
    return registry


def test_priority_filter():
    entries = [entry("medec:model=org/a", priority=1), entry("medec:model=org/b", priority=2),
               entry("medec:model=org/a,max_eval_instances=3", priority=None)]
    registry = _two_model_registry()
    assert names(entries, registry) == ["medec:model=org_a", "medec:model=org_b", "medec:model=org_a,max_eval_instances=3"]
    assert names(entries, registry, priority=1) == ["medec:model=org_a", "medec:model=org_a,max_eval_instances=3"]
    assert names(entries, registry, priority=0) == ["medec:model=org_a,max_eval_instances=3"]


def test_default_deployment_is_looked_up():
    registry = _two_model_registry()
    (run,) = run_entries_to_run_specs([entry("medec:model=org/a")], registry=registry, run_spec_functions=FUNCTIONS)
    assert run.name == "medec:model=org_a"
    assert run.run_spec["adapter_spec"]["model_deployment"] == "host/a"
    # the LAST non-deprecated deployment of the model is the default
    registry.register_deployment(_deployment("host2/a", "org/a"))
    registry.register_deployment(_deployment("host3/a", "org/a", deprecated=True))
    (run,) = run_entries_to_run_specs([entry("medec:model=org/a")], registry=registry, run_spec_functions=FUNCTIONS)
    assert run.run_spec["adapter_spec"]["model_deployment"] == "host2/a"


def _registry_with(deployment: str, model: str) -> ModelRegistry:
    registry = ModelRegistry()
    registry.register_deployment(_deployment(deployment, model))
    return registry


def test_model_with_three_parts_sets_deployment():
    registry = _registry_with("host/org/a", "org/a")
    (run,) = run_entries_to_run_specs([entry("medec:model=host/org/a")], registry=registry,
                                      run_spec_functions=FUNCTIONS)
    assert run.name == "medec:model=org_a"
    assert run.run_spec["adapter_spec"]["model"] == "org/a"
    assert run.run_spec["adapter_spec"]["model_deployment"] == "host/org/a"


def test_model_all_is_appended_when_model_is_absent():
    # no model= in the description: HELM appends the model=all expander LAST
    assert names([entry("medec:model_deployment=host/a")], _registry_with("host/a", "org/a")) == [
        "medec:model_deployment=host_a,model=org_a"]
    # model=all covers every known model; host/a does not serve org/b
    with pytest.raises(MedhelmError, match="for a different model 'org/a'"):
        names([entry("medec:model_deployment=host/a")], _two_model_registry())
    # deprecated models are left out of model groups
    registry = _two_model_registry()
    registry.metadata["org/b"].tags.append("DEPRECATED_MODEL_TAG")
    assert names([entry("medec:max_eval_instances=2")], registry) == ["medec:max_eval_instances=2,model=org_a"]


def test_models_to_run_rewrites_and_filters():
    registry = _two_model_registry()
    # entry without model: one copy per model to run, model= added LAST
    got = names([entry("medec:max_eval_instances=5")], registry, models_to_run=["org/b", "org/a"])
    assert got == ["medec:max_eval_instances=5,model=org_b", "medec:max_eval_instances=5,model=org_a"]
    # entry with a concrete model: kept, filtered by adapter_spec.model or model_deployment
    entries = [entry("medec:model=org/a"), entry("medec:model=org/b")]
    assert names(entries, registry, models_to_run=["org/b"]) == ["medec:model=org_b"]
    assert names(entries, registry, models_to_run=["host/a"]) == ["medec:model=org_a"]
    # a model group is replaced in place
    assert names([entry("medec:model=text,max_eval_instances=1")], registry, models_to_run=["org/a"]) == [
        "medec:model=org_a,max_eval_instances=1"]


def test_check_models_to_run():
    registry = _two_model_registry()
    check_models_to_run([entry("medec:model=org/a")], None, registry)
    check_models_to_run([entry("medec")], ["org/a", "host/b"], registry)
    with pytest.raises(MedhelmError, match="Unknown model 'org/zzz'"):
        check_models_to_run([entry("medec")], ["org/zzz"], registry)
    with pytest.raises(MedhelmError, match="expands to multiple models"):
        check_models_to_run([entry("medec:model=all")], None, registry)
    with pytest.raises(MedhelmError, match="run expander is omitted"):
        check_models_to_run([entry("medec"), entry("medec:max_eval_instances=1")], None, registry)


def test_entry_groups_and_groups_to_run():
    registry = _two_model_registry()
    got = run_entries_to_run_specs([entry("medec:model=org/a", groups=["zeta", "alpha"]),
                                    entry("medbullets:model=org/a", groups=[])],
                                   registry=registry, run_spec_functions=FUNCTIONS)
    assert got[0].name == "medec:model=org_a,groups=alpha-zeta"
    assert got[0].run_spec["groups"] == ["medec", "zeta", "alpha"]
    assert got[1].name == "medbullets:model=org_a"
    # groups_to_run looks at the run spec's own groups, before the entry's are added
    assert names([entry("medec:model=org/a", groups=["x"]), entry("medbullets:model=org/a")], registry,
                 groups_to_run=["medbullets", "x"]) == ["medbullets:model=org_a"]


def test_expander_name_rules():
    registry = _two_model_registry()
    got = names([entry("med_dialog:subset=a,model=org/a"),
                 entry("med_dialog:subset=a,eval_split=test,model=org/a,temperature=0.7"),
                 entry("medec:stop=hash,model=org/a"),
                 entry("medec:instructions=none,model=org/a"),
                 entry("medec:max_train_instances=zero,model=org/a,num_outputs=default")], registry)
    assert got == [
        "med_dialog,subset=a:model=org_a",
        "med_dialog,subset=a:eval_split=test,model=org_a",
        "medec,stop=hash:model=org_a",          # `stop` always appends with ","
        "medec,instructions=none:model=org_a",
        "medec:max_train_instances=0,model=org_a,num_outputs=1",
    ]
    runs = run_entries_to_run_specs([entry("medec:model=org/a,temperature=0.7,stop=hash")], registry=registry,
                                    run_spec_functions=FUNCTIONS)
    a = runs[0].run_spec["adapter_spec"]
    assert a["temperature"] == 0.7 and a["stop_sequences"] == ["###"] and a["instance_prefix"] == "###\n\n"


def test_sweeping_expander_multiplies_runs():
    registry = _two_model_registry()
    got = names([entry("medec:max_train_instances=melt,model=org/a")], registry)
    assert got == [f"medec:max_train_instances={n},model=org_a" for n in (0, 1, 5)]


def test_expander_errors():
    registry = _two_model_registry()
    with pytest.raises(MedhelmError, match="'data_augmentation' is not supported"):
        names([entry("medec:data_augmentation=all,model=org/a")], registry)
    with pytest.raises(MedhelmError, match="Split must be"):
        names([entry("medec:eval_split=train,model=org/a")], registry)
    with pytest.raises(MedhelmError, match="Unknown run spec name: 'nope'"):
        names([entry("nope:model=org/a")], registry)
    with pytest.raises(MedhelmError, match="cannot take arguments"):
        names([entry("medcalc_bench:colour=red,model=org/a")], registry)
    with pytest.raises(MedhelmError, match="unknown model deployment 'host/zzz'"):
        names([entry("medec:model=org/a,model_deployment=host/zzz")], registry)
    with pytest.raises(MedhelmError, match="no default model deployment found for model 'org/zzz'"):
        names([entry("medec:model=org/zzz")], registry)


def test_tag_driven_alterations():
    registry = ModelRegistry()
    for model, tags in [("anthropic/claude-x", ["ANTHROPIC_CLAUDE_3_MODEL_TAG"]),
                        ("org/buggy", ["BUGGY_TEMP_0_TAG"]), ("google/medlm-large", [])]:
        registry.register_metadata(ModelMetadata(name=model, creator_organization_name="o", display_name=model,
                                                 description=model, access="limited", tags=tags))
        registry.register_deployment(_deployment(model, model))

    def spec():
        return _spec("s", "s", stop_sequences=["\n", " ", "###"])

    runs = run_entries_to_run_specs([entry("s:model=anthropic/claude-x"), entry("s:model=org/buggy"),
                                     entry("s:model=google/medlm-large")], registry=registry,
                                    run_spec_functions={"s": spec})
    assert runs[0].run_spec["adapter_spec"]["stop_sequences"] == ["###"]
    assert runs[1].run_spec["adapter_spec"]["temperature"] == pytest.approx(1e-4)
    assert runs[2].name == "s:model=google_medlm-large,stop=none"
    assert runs[2].run_spec["adapter_spec"]["stop_sequences"] == []


def test_error_location_for_conf_entries(tmp_path):
    conf = write(tmp_path, "c.conf", 'entries: [\n  {description: "medec:model=org/a", priority: 1},\n'
                                     '  {description: "medec:model=org/zzz", priority: 1},\n]\n')
    with pytest.raises(MedhelmError) as err:
        names(load_run_entries(conf), _two_model_registry())
    assert str(err.value).startswith(f"{conf}:3: ")


# --------------------------------------------------------------------------------------------
# Deployments and credentials
# --------------------------------------------------------------------------------------------

SECRET = "sk-TOPSECRET-123456"


@needs_oracle
def test_load_oracle_deployments():
    prod_env = ORACLE / "public" / "inputs" / "prod_env"
    deployments = load_deployments(prod_env)
    d = deployments["stanfordhealthcare/gpt-4o-2024-05-13"]
    assert d.model_name == "openai/gpt-4o-2024-05-13"
    assert d.host_organization == "stanfordhealthcare"
    assert d.max_sequence_length == 128000
    assert d.client_spec.class_name == "helm.clients.openai_client.OpenAIClient"
    assert d.client_spec.args["openai_model_name"] == "gpt-4o-2024-05-13"
    registry = load_model_registry(prod_env)
    assert registry.get_model_metadata("mockai/mock-gpt-a").display_name == "Mock mock-gpt-a"
    # the built-in layer carries HELM's metadata for the MedHELM models ...
    assert "OPENAI_CHATGPT_MODEL_TAG" in registry.get_model_metadata("openai/gpt-4o-2024-05-13").tags
    # ... without it, deployments whose model has no metadata get HELM's placeholder metadata
    bare = load_model_registry(prod_env, include_builtin=False)
    assert bare.get_model_metadata("openai/gpt-4o-2024-05-13").tags == ["TEXT_MODEL_TAG",
                                                                         "FULL_FUNCTIONALITY_TEXT_MODEL_TAG"]
    credentials = load_credentials(prod_env, env={})
    assert resolve_api_key(d, credentials, env={}).get_secret_value() == "sk-mock-not-a-secret"
    assert resolve_base_url(d, credentials) == "http://127.0.0.1:37905/v1"


def test_builtin_hook_is_loaded(tmp_path):
    registry = load_model_registry(tmp_path)
    # HELM's built-in deployments for the models the MedHELM confs name (medhelm_core/helm_config/)
    assert registry.deployments["stanfordhealthcare/gpt-4o-2024-05-13"].model_name == "openai/gpt-4o-2024-05-13"
    assert any("medhelm_core/resources/helm_registry/model_deployments.yaml" in f for f in registry.deployment_files)
    with pytest.raises(MedhelmError) as err:
        registry.get_deployment("org/nope")
    assert "'org/nope'" in str(err.value) and str(tmp_path / "model_deployments.yaml") in str(err.value)


def test_local_deployments_override_and_model_name_default(tmp_path):
    write(tmp_path, "model_deployments.yaml", """
        model_deployments:
          - name: org/m
            client_spec: {class_name: "helm.clients.openai_client.OpenAIClient", deployment: ignored}
            extra_key: ignored
          - name: org/m
            model_name: org/other
            client_spec: {class_name: "helm.clients.openai_client.OpenAIClient"}
    """)
    registry = load_model_registry(tmp_path)
    assert registry.deployments["org/m"].model_name == "org/other"
    assert [d.model_name for d in registry.deployment_list if d.name == "org/m"] == ["org/m", "org/other"]


def test_deployment_secret_args_are_hidden(tmp_path):
    write(tmp_path, "model_deployments.yaml", f"""
        model_deployments:
          - name: org/m
            client_spec:
              class_name: "helm.clients.openai_client.OpenAIClient"
              args: {{api_key: "{SECRET}", base_url: "http://x/v1"}}
    """)
    d = load_deployments(tmp_path)["org/m"]
    for text in (str(d), repr(d), str(d.client_spec.args), repr(load_model_registry(tmp_path))):
        assert SECRET not in text
    assert resolve_api_key(d, Credentials(), env={}).get_secret_value() == SECRET


def test_deployment_validation_error_hides_secret(tmp_path):
    write(tmp_path, "model_deployments.yaml", f"""
        model_deployments:
          - model_name: org/m
            max_sequence_length: lots
            client_spec:
              class_name: "helm.clients.openai_client.OpenAIClient"
              args: {{api_key: "{SECRET}"}}
    """)
    with pytest.raises(MedhelmError) as err:
        load_deployments(tmp_path)
    message = str(err.value)
    assert SECRET not in message
    assert "model_deployments[0]" in message and "name" in message and "max_sequence_length" in message


def test_deployment_yaml_syntax_error_hides_secret(tmp_path):
    (tmp_path / "model_deployments.yaml").write_text(
        f'model_deployments:\n  - name: org/m\n    client_spec: {{args: {{api_key: "{SECRET}"}}\n  bad: [\n')
    with pytest.raises(MedhelmError) as err:
        load_deployments(tmp_path)
    assert SECRET not in str(err.value) and str(tmp_path / "model_deployments.yaml") in str(err.value)


def test_credentials_loading_and_secrecy(tmp_path):
    write(tmp_path, "credentials.conf", f"""
        # credentials
        mockaiApiKey: "{SECRET}"
        orgBaseUrl: "http://base/v1"
        deployments {{
          "other/llama-3.3-70b": "{SECRET}-dep"
        }}
    """)
    credentials = load_credentials(tmp_path, env={})
    for text in (str(credentials), repr(credentials), repr(credentials.values), f"{credentials}"):
        assert SECRET not in text
    assert "mockaiApiKey" in repr(credentials)
    mock = _deployment("mockai/m", "mockai/m")
    assert resolve_api_key(mock, credentials, env={}).get_secret_value() == SECRET
    other = _deployment("other/llama-3.3-70b", "meta/llama")
    assert resolve_api_key(other, credentials, env={}).get_secret_value() == SECRET + "-dep"
    assert resolve_base_url(_deployment("org/x"), credentials) == "http://base/v1"
    # HELM_CREDENTIALS holds the credentials text itself and wins over the file
    env_creds = load_credentials(tmp_path, env={"HELM_CREDENTIALS": 'mockaiApiKey: "from-env"'})
    assert resolve_api_key(mock, env_creds, env={}).get_secret_value() == "from-env"
    assert env_creds.source == "$HELM_CREDENTIALS"


def test_api_key_environment_fallbacks(tmp_path):
    d = _deployment("stanfordhealthcare/gpt-4o", "openai/gpt-4o")
    empty = load_credentials(tmp_path, env={})
    assert api_key_env_var("stanfordhealthcare") == "MEDHELM_API_KEY_STANFORDHEALTHCARE"
    assert api_key_env_var("my-org.x") == "MEDHELM_API_KEY_MY_ORG_X"
    env = {"MEDHELM_API_KEY_STANFORDHEALTHCARE": "k-org", "OPENAI_API_KEY": "k-openai"}
    assert resolve_api_key(d, empty, env=env).get_secret_value() == "k-org"
    assert resolve_api_key(d, empty, env={"OPENAI_API_KEY": "k-openai"}).get_secret_value() == "k-openai"
    # credentials beat the environment
    creds = Credentials(values={"stanfordhealthcareApiKey": SecretStr("k-cred")})
    assert resolve_api_key(d, creds, env=env).get_secret_value() == "k-cred"
    # OPENAI_API_KEY only applies to OpenAI clients
    other = Deployment(name="acme/m", client_spec={"class_name": "x.AcmeClient"})
    with pytest.raises(MedhelmError) as err:
        resolve_api_key(other, empty, env={"OPENAI_API_KEY": "k-openai"})
    assert "OPENAI_API_KEY" not in str(err.value)
    # ... and only to OpenAI itself: an OpenAI client pointed at another vendor never gets it
    anthropic = Deployment(name="stanfordhealthcare/claude", client_spec={
        "class_name": "helm.clients.openai_client.OpenAIClient", "args": {"base_url": "https://api.anthropic.com/v1/"}})
    with pytest.raises(MedhelmError) as err:
        resolve_api_key(anthropic, empty, env={"OPENAI_API_KEY": "k-openai"})
    assert "OPENAI_API_KEY" not in str(err.value)
    for url in ("https://api.openai.com/v1", "http://127.0.0.1:8000/v1"):
        own = Deployment(name="o/m", client_spec={"class_name": "helm.clients.openai_client.OpenAIClient",
                                                  "args": {"base_url": url}})
        assert resolve_api_key(own, empty, env={"OPENAI_API_KEY": "k-openai"}).get_secret_value() == "k-openai"


def test_missing_api_key_error(tmp_path):
    write(tmp_path, "credentials.conf", f'otherApiKey: "{SECRET}"\n')
    credentials = load_credentials(tmp_path, env={})
    d = _deployment("stanfordhealthcare/gpt-4o", "openai/gpt-4o")
    with pytest.raises(MedhelmError) as err:
        resolve_api_key(d, credentials, env={})
    message = str(err.value)
    assert "'stanfordhealthcare/gpt-4o'" in message
    assert "stanfordhealthcareApiKey" in message and str(tmp_path / "credentials.conf") in message
    assert "$MEDHELM_API_KEY_STANFORDHEALTHCARE" in message and "$OPENAI_API_KEY" in message
    assert SECRET not in message


def test_credentials_parse_error_is_redacted(tmp_path):
    write(tmp_path, "credentials.conf", f'aApiKey: "{SECRET}\\q"\n')
    with pytest.raises(MedhelmError) as err:
        load_credentials(tmp_path, env={})
    assert str(err.value).startswith(f"{tmp_path / 'credentials.conf'}:1: ")
    assert SECRET not in str(err.value) and "\\q" not in str(err.value)
    write(tmp_path, "credentials.conf", f'aApiKey: {SECRET} : x\n')
    with pytest.raises(MedhelmError) as err:
        load_credentials(tmp_path, env={})
    assert SECRET not in str(err.value)
