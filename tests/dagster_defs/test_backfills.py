"""A backfill's claim: one run holds it at a time, a failed claimant leaves the work to the next."""
from __future__ import annotations

import multiprocessing
import time

import pytest

from medhelm_dagster.backfills import claimed


def _hold(folder, backfill_id, seconds, finish, started):
    with claimed(folder, backfill_id) as claim:
        started.set()
        time.sleep(seconds)
        if finish:
            claim.mark_done()


def test_a_second_run_waits_for_the_claim_and_finds_it_done(tmp_path):
    ctx = multiprocessing.get_context("spawn")
    started = ctx.Event()
    holder = ctx.Process(target=_hold, args=(tmp_path, "bf/1", 1.5, True, started))
    holder.start()
    assert started.wait(60)
    with claimed(tmp_path, "bf/1") as claim:
        assert claim.done  # it got the claim only once the first run had finished the work
    holder.join(10)


def test_a_failed_claimant_leaves_the_claim_open(tmp_path):
    with pytest.raises(RuntimeError):
        with claimed(tmp_path, "bf-2") as claim:
            raise RuntimeError("the model server went away")
    with claimed(tmp_path, "bf-2") as claim:
        assert not claim.done  # the next run does the work
        claim.mark_done()
    with claimed(tmp_path, "bf-2") as claim:
        assert claim.done


def test_backfills_do_not_share_a_claim(tmp_path):
    with claimed(tmp_path, "a") as claim:
        claim.mark_done()
    with claimed(tmp_path, "b") as claim:
        assert not claim.done
