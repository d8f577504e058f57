"""The leaderboard of medhelm 0.8.0's new benchmarks under its packaged schema (the edition's default):
every cell of every group table, and the index tables, equal medhelm's."""
import pytest

from tests.editions.new_benchmarks import GOLD, SUITE
from tests.oracle import load
from tests.parity import assert_group_cells_equal, group_files, table_cells


def test_every_new_benchmark_cell_equals_medhelm(out):
    ours = out / "runs" / SUITE
    assert group_files(ours) == group_files(GOLD)
    assert {"sct_bench.json", "health_bench.json", "healthqa_br.json"} <= set(group_files(GOLD))
    compared = sum(assert_group_cells_equal(GOLD / "groups", ours / "groups", name) for name in group_files(GOLD))
    assert compared > 100
    g, o = table_cells(load(GOLD / "groups.json")), table_cells(load(ours / "groups.json"))
    assert set(o) == set(g)
    for key, value in g.items():
        if key[2] == "Adaptation method":  # HELM joins a set: order follows the hash seed
            assert sorted(o[key].split(", ")) == sorted(value.split(", "))
        elif isinstance(value, float):
            assert o[key] == pytest.approx(value, rel=1e-12, abs=1e-9), key
        else:
            assert o[key] == value, key
    assert load(ours / "schema.json") == load(GOLD / "schema.json")
