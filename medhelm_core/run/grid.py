"""Where a run sits in the benchmark × model grid, the two dimensions Dagster's partition matrix
shows (`medhelm_dagster/partitions.py`):

* benchmark: the HELM run name without its `model=` and `model_deployment=` arguments, commas as
  spaces (`med_dialog subset=icliniq:num_output_tokens=4000`, `medcalc_bench`);
* model: `<suite>/<model deployment>` (`example/demo/model-a`): a suite's models are its columns,
  so suites that run the same benchmarks on other models share the rows.

HELM's run names stay the name of a run everywhere else (files, DuckDB, the page); a cell is only
an index, computed from what `run_entries` holds. A cell with no registered run is a hole: a
suite that did not run that benchmark on that model.
"""
from __future__ import annotations

from dataclasses import dataclass

from medhelm_core.errors import MedhelmError
from medhelm_core.run.workspace import RunRef, Workspace

MODEL_ARGS = ("model", "model_deployment")
DELIMITER = "|"  # between dimensions in Dagster's string form of a two-dimensional key
# Characters Dagster refuses in a dimension's key, and what stands for them.
REPLACED = {"|": "/", ",": " ", "[": "(", "]": ")"}


def _clean(text: str) -> str:
    for bad, good in REPLACED.items():
        text = text.replace(bad, good)
    return text.replace("...", "_")


def benchmark_of(run_name: str) -> str:
    """The run entry without its model: `med_qa:model=openai_gpt-4o,model_deployment=…` → `med_qa`."""
    head, sep, tail = run_name.partition(":")
    kept = [a for a in tail.split(",") if a and a.partition("=")[0] not in MODEL_ARGS]
    head_args = [a for a in head.split(",") if a.partition("=")[0] not in MODEL_ARGS]
    return _clean(" ".join(head_args) + (":" + " ".join(kept) if kept else ""))


def model_of(suite: str, deployment: str) -> str:
    return _clean(f"{suite}/{deployment}")


@dataclass(frozen=True)
class Cell:
    benchmark: str
    model: str

    @property
    def key(self) -> str:
        """Dagster's string form of the key: dimensions in name order (benchmark, model)."""
        return f"{self.benchmark}{DELIMITER}{self.model}"

    @classmethod
    def from_key(cls, key: str) -> "Cell":
        benchmark, sep, model = key.partition(DELIMITER)
        if not sep or not model:
            raise MedhelmError(f"partition key {key!r} is not '<benchmark>|<suite>/<model deployment>'")
        return cls(benchmark, model)

    @property
    def suite(self) -> str:
        return self.model.partition("/")[0]


def cell_of(suite: str, run_name: str, deployment: str) -> Cell:
    return Cell(benchmark_of(run_name), model_of(suite, deployment))


def check_cells_unique(suite: str, runs: list[tuple[str, str]]) -> None:
    """Two runs of a suite on one cell (same benchmark arguments and deployment, names differing
    only in how they are written) would share a partition: stop, naming both."""
    seen: dict[Cell, str] = {}
    for run_name, deployment in runs:
        cell = cell_of(suite, run_name, deployment)
        if cell in seen and seen[cell] != run_name:
            raise MedhelmError(f"suite {suite!r}: runs {seen[cell]!r} and {run_name!r} fall on one grid cell "
                               f"({cell.key}); give them different arguments")
        seen[cell] = run_name


def registered_cells(ws: Workspace, suites: set[str] | None = None) -> dict[Cell, RunRef]:
    """Every registered run of these suites (all: None), by its cell."""
    with ws.store.connect() as conn:
        rows = conn.execute(
            "SELECT suite, run_name, coalesce(model_deployment, model) FROM run_entries"
            + ("" if suites is None else " WHERE suite IN (SELECT unnest(?::VARCHAR[]))"),
            [] if suites is None else [sorted(suites)]).fetchall()
    return {cell_of(s, n, d): RunRef(s, n) for s, n, d in rows}


def runs_at(ws: Workspace, cells: list[Cell]) -> dict[Cell, RunRef | None]:
    """The registered run at each cell (None: a hole)."""
    registered = registered_cells(ws, {c.suite for c in cells})
    return {c: registered.get(c) for c in cells}
