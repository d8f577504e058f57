"""What an invocation does before its online runs when vendor batches are in play: collect what
earlier invocations left, ask the batches for what they can answer, and leave online what no live
batch holds. The command line (`medhelm-run`) calls these; the Dagster sensor drives `batch_pass`
for the same ledger."""
from __future__ import annotations

from typing import TYPE_CHECKING, Callable, Iterable

from medhelm_core.batch import ledger
from medhelm_core.errors import MedhelmError
from medhelm_core.run import suite as suite_layer
from medhelm_core.run.datasets import build_dataset
from medhelm_core.run.entries import spec_judges
from medhelm_core.run.workspace import RunRef, Workspace

if TYPE_CHECKING:
    from medhelm_core.run.batch_pass import BatchPassReport


def outstanding(ws: Workspace) -> bool:
    """The ledger holds live batches (read without the vendors' SDKs)."""
    return ws.store.exists() and bool(ledger.outstanding(ws.store))


def setting_batches(ws: Workspace, deployment: str) -> bool:
    """The deployment's `batch` setting (medhelm_deployments.yaml); False for one the settings cannot name."""
    try:
        return bool(ws.deployment_settings(deployment).batch)
    except MedhelmError:
        return False


def model_of(spec: dict) -> str:
    return spec["adapter_spec"]["model_deployment"]


def judges_of(ws: Workspace, spec: dict) -> set[str]:
    """The deployments of a run spec's LLM juries."""
    return {deployment for deployment, _ in spec_judges(ws, spec, spec["name"])}


def batches_in_play(ws: Workspace, specs: Iterable[dict], force_batch: bool) -> bool:
    """Whether these runs go through the batch pass: `force_batch` (--batch), a deployment of theirs
    (model or judge) with `batch: true`, or batches an earlier invocation left outstanding (collected
    first, so that no online call pays for a request a live batch holds)."""
    if force_batch or outstanding(ws):
        return True
    return any(setting_batches(ws, d) for spec in specs for d in {model_of(spec), *judges_of(ws, spec)})


def before_online(ws: Workspace, runs: list[RunRef], specs: dict[RunRef, dict], to_build: Iterable[str],
                  fresh: set[RunRef] | None, *, force_batch: bool, wait: bool, max_wait_s: float | None,
                  on_event: Callable[[str], None]) -> tuple[list[RunRef], set[RunRef], "BatchPassReport"]:
    """The batch pass on the stale runs, their datasets built first (the batch's requests are built
    from them). Returns (the runs to run online: all but those a live batch holds, the up-to-date
    runs, the pass's report, whose `pending_runs` wait on their batches).

    A run whose model answers online but whose judges batch has its model asked first (the model
    batches already submitted meanwhile), so that its jury goes into the judges' batches too."""
    # Here, not at the top: the batch pass imports the vendors' SDKs, which a run without batches
    # (the common case, which asks `batches_in_play` only) never needs.
    from medhelm_core.run.batch_pass import batch_flavour, batch_pass

    for key in sorted(to_build):
        build_dataset(ws, key, for_run=True)  # the job that records the datasets reports these builds
    # Decided here, once (the execution takes it): the batch pass asks only for the stale runs.
    fresh = fresh if fresh is not None else suite_layer.up_to_date(ws, runs)
    stale = [r for r in runs if r not in fresh]
    model_first = [r for r in stale if batch_flavour(ws, model_of(specs[r]), force_batch) is None
                   and any(batch_flavour(ws, d, force_batch) is not None for d in judges_of(ws, specs[r]))]
    if model_first:
        batch_pass(ws, stale, wait=False, force_batch=force_batch, on_event=on_event)  # the model batches go first
        execution = suite_layer.SuiteExecution(ws, model_first, ("requests", "completions"))
        for _ in execution.outcomes():  # what fails here fails again, and is reported, in the runs themselves
            pass
    report = batch_pass(ws, stale, wait=wait, force_batch=force_batch, max_wait_s=max_wait_s, on_event=on_event)
    waiting = set(report.pending_runs)
    return [r for r in runs if r not in waiting], fresh, report
