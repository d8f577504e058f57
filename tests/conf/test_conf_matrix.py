"""Our compact YAML matrix reproduces HELM's public run entries exactly (as a multiset)."""
from collections import Counter
from pathlib import Path

import pytest

from medhelm_core.catalog import default_catalog
from medhelm_core.helm_config.entry_files import load_run_entries
from medhelm_core.errors import MedhelmError
from tests.oracle import SHARED

ROOT = Path(__file__).resolve().parents[2]


def test_public_matrix_equals_helms_public_conf():
    ours = load_run_entries(ROOT / "conf" / "medhelm_public.yaml")
    helm = load_run_entries(SHARED / "helm" / "run_entries_medhelm_public.conf")
    assert len(ours) == len(helm) == 221
    assert Counter((e.description, e.priority) for e in ours) == Counter((e.description, e.priority) for e in helm)


def test_matrix_errors_name_the_file_and_field(tmp_path):
    bad = tmp_path / "m.yaml"
    bad.write_text("benchmarks: [x]\nmodels: [{model: a/b, colour: red}]\n")
    with pytest.raises(MedhelmError, match=r"m\.yaml: models\.0\.colour"):
        load_run_entries(bad)
    bad.write_text("benchmarks: [x\n")
    with pytest.raises(MedhelmError, match=r"m\.yaml:\d+: invalid YAML"):
        load_run_entries(bad)


def test_any_model_matrix_is_the_public_benchmarks_as_helm_wildcards():
    """conf/medhelm_public_any_model.yaml: the public matrix's benchmarks, each HELM's `model=text`
    wildcard, which --models-to-run fills with the user's model (and which needs it, as helm-run)."""
    from medhelm_core.helm_config.expand import expand_confs

    import yaml
    public = yaml.safe_load((ROOT / "conf" / "medhelm_public.yaml").read_text())
    any_model = ROOT / "conf" / "medhelm_public_any_model.yaml"
    assert yaml.safe_load(any_model.read_text())["benchmarks"] == public["benchmarks"]
    entries = load_run_entries(any_model)
    assert [e.description for e in entries][:2] == ["medcalc_bench:model=text", "mtsamples_replicate:model=text"]
    assert "med_dialog:subset=icliniq,model=text" in [e.description for e in entries]
    runs = expand_confs([any_model], max_eval_instances=2, models_to_run=["openai/gpt-4.1-mini-2025-04-14"],
                        local_path=None, run_spec_functions=default_catalog().run_spec_functions)
    assert len(runs) == len(public["benchmarks"])
    assert {r.run_spec["adapter_spec"]["model_deployment"] for r in runs} == {"openai/gpt-4.1-mini-2025-04-14"}
    with pytest.raises(MedhelmError, match="--models-to-run must be set"):
        expand_confs([any_model], max_eval_instances=2, local_path=None,
                     run_spec_functions=default_catalog().run_spec_functions)
