"""The benchmark × model grid: a run's cell from its HELM name, holes, and refusal of two runs on one cell."""
import pytest

from medhelm_core.errors import MedhelmError
from medhelm_core.run.grid import Cell, benchmark_of, cell_of, check_cells_unique, model_of, runs_at
from medhelm_core.run.workspace import RunRef, Workspace


@pytest.mark.parametrize("run_name, benchmark", [
    ("medcalc_bench:model=openai_gpt-4o,model_deployment=openai_gpt-4o", "medcalc_bench"),
    ("med_dialog,subset=icliniq:num_output_tokens=4000,model=m,model_deployment=m",
     "med_dialog subset=icliniq:num_output_tokens=4000"),
    ("head_qa:language=en,category=None,model=m", "head_qa:language=en category=None"),
    ("clear:condition=x,data_path=/a/b[1]|c,model=m", "clear:condition=x data_path=/a/b(1)/c"),
    ("bare", "bare"),
])
def test_a_benchmark_is_the_run_name_without_its_model(run_name, benchmark):
    assert benchmark_of(run_name) == benchmark


def test_cells_round_trip_through_dagsters_key():
    cell = cell_of("v1", "med_qa:model=openai_gpt-4o,model_deployment=openai_gpt-4o", "openai/gpt-4o-2024-05-13")
    assert cell == Cell("med_qa", "v1/openai/gpt-4o-2024-05-13") and cell.suite == "v1"
    assert Cell.from_key(cell.key) == cell and cell.key == "med_qa|v1/openai/gpt-4o-2024-05-13"
    assert model_of("s", "a,b") == "s/a b"
    with pytest.raises(MedhelmError, match="is not '<benchmark>"):
        Cell.from_key("med_qa")


def test_two_runs_on_one_cell_are_refused_naming_both():
    check_cells_unique("s", [("a:model=m", "d"), ("a:model=m", "d"), ("b:model=m", "d")])  # re-registering is fine
    with pytest.raises(MedhelmError, match=r"suite 's': runs 'a:x=1,model=m' and 'a:model=n,x=1' fall on one grid cell"):
        check_cells_unique("s", [("a:x=1,model=m", "d"), ("a:model=n,x=1", "d")])


def test_registered_runs_and_holes(tmp_path):
    ws = Workspace(tmp_path)
    with ws.store.transaction() as conn:
        conn.executemany("INSERT INTO run_entries (suite, run_name, model, model_deployment, run_spec)"
                         " VALUES (?, ?, ?, ?, '{}')",
                         [("s", "a:model=m1", "m1", "d/1"), ("s", "b:model=m1", "m1", "d/1"),
                          ("s", "a:model=m2", "m2", None), ("t", "a:model=m1", "m1", "d/1")])
    cells = [Cell("a", "s/d/1"), Cell("b", "s/m2"), Cell("a", "s/m2"), Cell("a", "t/d/1"), Cell("b", "t/d/1")]
    assert runs_at(ws, cells) == {Cell("a", "s/d/1"): RunRef("s", "a:model=m1"), Cell("b", "s/m2"): None,
                                  Cell("a", "s/m2"): RunRef("s", "a:model=m2"),
                                  Cell("a", "t/d/1"): RunRef("t", "a:model=m1"), Cell("b", "t/d/1"): None}
