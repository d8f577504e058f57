"""The leaderboard of medhelm 0.8.0's new benchmarks under its packaged schema (the edition's default):
every cell of every group table, and the index tables, equal medhelm's."""
from tests.editions.new_benchmarks import GOLD, SUITE
from tests.oracle import load
from tests.parity import assert_group_cells_equal, assert_index_tables_equal, group_files


def test_every_new_benchmark_cell_equals_medhelm(out):
    ours = out / "runs" / SUITE
    assert group_files(ours) == group_files(GOLD)
    assert {"sct_bench.json", "health_bench.json", "healthqa_br.json"} <= set(group_files(GOLD))
    compared = sum(assert_group_cells_equal(GOLD / "groups", ours / "groups", name) for name in group_files(GOLD))
    assert compared > 100
    assert_index_tables_equal(GOLD / "groups.json", ours / "groups.json")
    assert load(ours / "schema.json") == load(GOLD / "schema.json")
