"""Prompt rendering, request fields and seed-0 sampling against real HELM output."""
import numpy as np
import pytest

from medhelm_core import adapt
from medhelm_core.helm_types import instance, reference
from tests.oracle import PUBLIC, SYNTHETIC, load, run_dirs

GOLDEN_RUNS = [d for s in ("oracle-cfg", "oracle-private") for d in run_dirs(SYNTHETIC, s)] + \
    run_dirs(PUBLIC, "public-n50")


@pytest.mark.parametrize("run", GOLDEN_RUNS, ids=lambda p: p.name)
def test_prompts_requests_and_mapping_equal_helm(run):
    spec = load(run / "run_spec.json")["adapter_spec"]
    states = load(run / "scenario_state.json")["request_states"]
    ours = adapt.build_request_states(spec, [s["instance"] for s in states])
    assert len(ours) == len(states)
    for got, want in zip(ours, states):
        assert got["request"] == want["request"]  # prompt bytes and every request field
        assert got.get("output_mapping") == want.get("output_mapping")
        assert list(got) == [k for k in want if k not in ("result", "annotations")]


def test_sampling_is_helms_seed0_choice_in_permutation_order():
    insts = [instance(f"q{i}", [reference("a", True)], "test" if i % 3 else "valid") for i in range(80)]
    insts = adapt.assign_instance_ids(insts)
    picked = adapt.downsample_eval_instances(insts, 50, None)
    np.random.seed(0)
    expected = np.random.choice(np.array(insts, dtype=object), 50, replace=False)
    assert [p["id"] for p in picked] == [e["id"] for e in expected]
    # Monotone: a larger sample starts with the smaller one.
    assert [p["id"] for p in adapt.downsample_eval_instances(insts, 60, None)][:50] == [p["id"] for p in picked]
    # Small sets are kept whole, in order; train rows are never sampled away.
    assert adapt.downsample_eval_instances(insts[:10], 50, None) == insts[:10]


def test_golden_sample_order_matches_oracle_ids():
    # The synthetic oracle scenarios have 80 rows, sampled down to 50: ids must come out in HELM's order.
    run = run_dirs(SYNTHETIC, "oracle-cfg")[0]
    want = [s["instance"]["id"] for s in load(run / "scenario_state.json")["request_states"]]
    insts = adapt.assign_instance_ids([instance(str(i), [], "test") for i in range(80)])
    assert [i["id"] for i in adapt.downsample_eval_instances(insts, 50, None)] == want


def test_ids_kept_when_scenario_sets_them_and_assigned_otherwise():
    with_ids = [instance("a", [], "test", id="QID7"), instance("b", [], "test", id="QID9")]
    assert adapt.assign_instance_ids(with_ids) == with_ids
    mixed = [instance("a", [], "train"), instance("b", [], "test", id="x")]
    assert [i["id"] for i in adapt.assign_instance_ids(mixed)] == ["id0", "id1"]


def test_multiple_choice_train_examples_render_gold_letter():
    from medhelm_core.helm_types import multiple_choice_joint_adapter_spec

    spec = multiple_choice_joint_adapter_spec("Pick.", "Question", "Answer", max_train_instances=1)
    train = instance("2+2?", [reference("3", False), reference("4", True)], "train")
    test = instance("1+1?", [reference("2", True), reference("5", False)], "test")
    prompt = adapt.render_prompt(spec, [train], test)
    assert prompt == ("Pick.\n\nQuestion: 2+2?\nA. 3\nB. 4\nAnswer: B\n\n"
                      "Question: 1+1?\nA. 2\nB. 5\nAnswer:")


def test_a_datasets_draw_is_remembered_and_each_run_gets_its_own_instances(tmp_path):
    """`sampled_instances` keeps the positions of HELM's draw per dataset key and settings: the
    second model's run gets the same instances as a fresh draw over every instance, as new objects."""
    import json

    from medhelm_core.run import datasets
    from medhelm_core.run.workspace import Workspace
    from medhelm_core.store import insert_rows

    ws = Workspace(tmp_path / "out", tmp_path / "prod_env")
    splits = ["train"] * 3 + ["test"] * 40 + ["valid"] * 7
    insts = [{"id": f"id{i}", "split": s, "input": {"text": f"q{i}"}} for i, s in enumerate(splits)]
    with ws.store.transaction() as conn:
        insert_rows(conn, "instances", ["scenario_key", "position", "instance_id", "split", "instance"],
                    [("k1", i, inst["id"], inst["split"], json.dumps(inst)) for i, inst in enumerate(insts)])
    for settings in [(5, None, True), (5, None, False), (10, ["valid"], True), (None, None, True), (5, None, True)]:
        n, eval_splits, with_train = settings
        want = [i for i in adapt.downsample_eval_instances(insts, n, eval_splits)
                if with_train or i["split"] != adapt.TRAIN_SPLIT]
        first = datasets.sampled_instances(ws, "k1", n, eval_splits, with_train)
        again = datasets.sampled_instances(ws, "k1", n, eval_splits, with_train)
        assert first == again == want
        assert all(a is not b for a, b in zip(first, again))
    assert ("k1", 5, None, True) in datasets._KEPT and ("k1", 10, ("valid",), True) in datasets._KEPT
