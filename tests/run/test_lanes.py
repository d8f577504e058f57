"""The suite's two lines of runs (`medhelm_core.run.lanes`) and which runs go in the lane."""
import threading
import time

from medhelm_core.run import suite
from medhelm_core.run.lanes import RunLines

R = suite.RunRef


def test_the_lane_holds_the_runs_that_never_wait_on_a_judge_on_deployments_no_judge_uses():
    facts = {R("s", "a-jury"): ("a", ("j1",)), R("s", "a-plain"): ("a", ()),
             R("s", "j1-plain"): ("j1", ()), R("s", "b-plain"): ("b", ()), R("s", "b-jury"): ("b", ("j1", "j2"))}
    order = suite.schedule(list(facts), facts)
    assert [r.run_name for r in suite.lane_runs(order, facts)] == ["a-plain", "b-plain"]
    no_jury = {r: (dep, ()) for r, (dep, _) in facts.items()}
    assert suite.lane_runs(list(no_jury), no_jury) == []   # no jury: one line, as before


def test_lane_threads_wait_for_the_gate_and_general_threads_take_the_lane_when_their_line_is_empty():
    gate, started, release = threading.Event(), [], threading.Event()

    def call(item):
        started.append((item, threading.current_thread().name))
        if item == "g1":
            release.wait(5)
        return item.upper()

    lines = RunLines(["g1"], ["l1", "l2", "l3"], general_workers=1, lane_workers=1, call=call, gate=gate)
    try:
        time.sleep(0.2)
        assert [i for i, _ in started] == ["g1"]          # the lane waits for its gate
        gate.set()
        assert lines.futures["l1"].result(5) == "L1"     # ... then runs
        release.set()
        assert [lines.futures[i].result(5) for i in ("g1", "l1", "l2", "l3")] == ["G1", "L1", "L2", "L3"]
    finally:
        lines.close()
    assert sorted(i for i, _ in started) == ["g1", "l1", "l2", "l3"]


def test_an_empty_general_line_opens_the_lane_and_close_cancels_what_has_not_started():
    gate, hold = threading.Event(), threading.Event()
    lines = RunLines([], ["l1", "l2"], general_workers=1, lane_workers=1, call=lambda i: hold.wait(5) and i, gate=gate)
    time.sleep(0.2)
    assert gate.is_set()        # a general thread found its line empty
    waiting = RunLines(["g"], ["x"], general_workers=0, lane_workers=1, call=lambda i: i, gate=threading.Event())
    waiting.close()             # its lane thread never passed the gate: released, nothing ran
    assert waiting.futures["x"].cancelled() and waiting.futures["g"].cancelled()
    hold.set()
    lines.close()
    assert {lines.futures[i].result(5) for i in ("l1", "l2")} == {"l1", "l2"}


def test_a_failing_call_is_the_future_s_exception_and_the_thread_goes_on():
    def call(item):
        if item == "bad":
            raise ValueError("boom")
        return item

    lines = RunLines(["bad", "ok"], [], general_workers=1, lane_workers=0, call=call, gate=threading.Event())
    try:
        assert isinstance(lines.futures["bad"].exception(5), ValueError)
        assert lines.futures["ok"].result(5) == "ok"
    finally:
        lines.close()
