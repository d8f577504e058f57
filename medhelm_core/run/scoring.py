"""A suite's scoring in worker processes, beside the engine.

HELM's metrics (ROUGE, spaCy tokens, the jury's parsing, ...) and the writing of a run's HELM files
are CPU-bound Python. In the process that sends a suite's requests they hold the GIL its engine
needs, so at a suite's width the engine, not the endpoints, sets the pace. A `Scorer` hands each
run's evaluation (`metrics.evaluate.evaluate_run`) and its HELM files (`helm_files.write_run_files`)
to a pool of processes: the same functions on the same inputs (the run spec and request states as
the store holds them, the deployment's tokenizer, the edition's metric table), so every number and
file is the one the run's own thread would have made. The rows still go to the store from the run's
thread (`scores.store_stats`), in the store's write turn.

A pool that breaks (a worker killed) is not used again: the runs left score in this process.
`MEDHELM_SCORING_PROCESSES`: the number of worker processes (0: score in this process; default:
one per core but one, at most 4, when the machine has more than one core).
"""
from __future__ import annotations

import multiprocessing
import os
import threading
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path

from medhelm_core.errors import MedhelmError
from medhelm_core.helm_files import run_dir, write_run_files
from medhelm_core.metrics.evaluate import evaluate_run
from medhelm_core.run import scores as score_layer
from medhelm_core.run.workspace import RunRef, Workspace

PROCESSES_ENV = "MEDHELM_SCORING_PROCESSES"
MIN_RUNS = 4  # fewer runs than this are scored in this process (a worker's start-up costs more)


def default_processes() -> int:
    value = os.environ.get(PROCESSES_ENV)
    if value is not None and value.strip():
        try:
            return max(0, int(value))
        except ValueError:
            raise MedhelmError(f"${PROCESSES_ENV} must be a whole number of processes, got {value!r}") from None
    return max(0, min((os.cpu_count() or 1) - 1, 4))


# -- in the worker ------------------------------------------------------------------------------
_WORKSPACES: dict[tuple, Workspace] = {}


def _workspace(where: tuple, edition: str) -> Workspace:
    ws = _WORKSPACES.get((where, edition))
    if ws is None:
        output_path, local_path, benchmark_paths, storage = where
        ws = _WORKSPACES[(where, edition)] = Workspace(output_path, local_path, benchmark_paths=benchmark_paths,
                                                       edition=edition, storage=storage)
    return ws


def _score(where: tuple, edition: str, spec: dict, states: list[dict], tokenizer_name: str | None,
           directory: str, scenario: dict) -> tuple[list[dict], list[dict], list[dict]]:
    """(per-instance stats, stats, request states as evaluated) of one run; its HELM files written."""
    ws = _workspace(where, edition)
    per_instance, stats = evaluate_run(spec, states, ws.tokenizer(tokenizer_name), ws.catalog.metrics)
    with ws.data_scope():
        write_run_files(Path(directory), spec, scenario, states, spec.get("annotators"), stats, per_instance)
    return per_instance, stats, states


# -- in the suite's process ---------------------------------------------------------------------
class Scorer:
    """The pool of one suite's execution (`suite.SuiteExecution`)."""

    def __init__(self, ws: Workspace, processes: int):
        self.where = (str(ws.output_path), str(ws.local_path), tuple(ws.benchmark_paths), ws.storage)
        self._lock = threading.Lock()
        self.broken = False
        # spawn: this process has threads (the engine's, DuckDB's); a fork of it could hold their locks.
        # Its processes start with the first run to score: the first calls go out before they compete for a core.
        self.pool = ProcessPoolExecutor(max_workers=processes, mp_context=multiprocessing.get_context("spawn"))

    def score(self, ws: Workspace, run: RunRef) -> tuple[dict, Path]:
        """`scores.compute_stats` then `scores.write_files`, the evaluation and the files in a worker."""
        if self.broken:
            computed = score_layer.compute_stats(ws, run)
            return computed, score_layer.write_files(ws, run, computed)
        spec, states, tokenizer_name = score_layer.scoring_inputs(ws, run)
        directory = run_dir(ws.output_path, run.suite, run.run_name)
        with ws.data_scope():
            scenario = score_layer.scenario_file(ws, spec)
        try:
            per_instance, stats, states = self.pool.submit(
                _score, self.where, ws.edition, spec, states, tokenizer_name, str(directory), scenario).result()
        except BrokenProcessPool:
            with self._lock:
                self.broken = True
            return self.score(ws, run)
        return score_layer.store_stats(ws, run, spec, states, per_instance, stats), directory

    def close(self) -> None:
        self.pool.shutdown(wait=True, cancel_futures=True)
