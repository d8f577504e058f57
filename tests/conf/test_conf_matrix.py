"""Our compact YAML matrix reproduces HELM's public run entries exactly (as a multiset)."""
from collections import Counter
from pathlib import Path

import pytest

from medhelm_core.conf.entry_files import load_run_entries
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
