"""The code location's declared jobs, launched in the calling process with one invocation's
resources: what `medhelm-run` and `medhelm-summarize` do in Dagster (the UI and `dg launch`
launch the same jobs). The command line decides what to launch; this only launches it."""
from __future__ import annotations

from pathlib import Path

import dagster as dg

from medhelm_core.engine import RunControls
from medhelm_core.errors import MedhelmError, root_error
from medhelm_core.run.grid import Cell
from medhelm_core.run.workspace import RunRef, Workspace
from medhelm_dagster.definitions import defs
from medhelm_dagster.instance import QUIET, dagster_instance
from medhelm_dagster.leaderboard import SUMMARY_ASSETS
from medhelm_dagster.partitions import grid_range_tags, partition_range_tags
from medhelm_dagster.resources import MedhelmResource


class SuiteLaunch:
    """The Dagster runs of one `medhelm-run` invocation, in order: register the suite, build the
    datasets of each tier that needs it, run the layers of its stale runs. Each carries `tags`
    (suite, edition, confs: the runs list can filter on them)."""

    def __init__(self, ws: Workspace, tags: dict[str, str]):
        self.instance = dagster_instance(str(ws.output_path))
        self.controls: RunControls = ws.controls
        self.resources = {"medhelm": MedhelmResource(output_path=str(ws.output_path), local_path=str(ws.local_path),
                                                     num_threads=ws.num_threads,
                                                     benchmark_paths=list(ws.benchmark_paths), storage=ws.storage),
                          "run_controls": ws.controls}
        self.tags = tags
        self.failure: str | None = None  # set by run_layers when its step failed outside every run

    def register(self, config: dict, entries: list, registered: bool = False) -> None:
        """The `register_suite` job; its step takes the entries this invocation expanded (and,
        `registered`, wrote to the store already: it records them)."""
        self.controls.expanded = (config, entries, registered)
        try:
            defs.get_job_def("register_suite").execute_in_process(
                instance=self.instance, resources=self.resources, tags=self.tags,
                run_config={"ops": {"run_entries": {"config": config}}, **QUIET})
        finally:
            self.controls.expanded = None

    def build_datasets(self, tier: str, keys: list[str]) -> None:
        """The `build_<tier>_datasets` job over these scenario partitions; a dataset that cannot be
        built stops the suite with its one line."""
        try:
            defs.get_job_def(f"build_{tier}_datasets").execute_in_process(
                instance=self.instance, resources=self.resources, run_config=QUIET,
                tags={**self.tags, **partition_range_tags(self.instance, f"{tier}_scenarios", keys)})
        except Exception as e:  # noqa: BLE001
            raise MedhelmError(str(root_error(e))) from None

    def run_layers(self, runs: list[RunRef], cells: list[Cell]) -> None:
        """One `run_layers` run over the rectangle of cells these runs span; its config names exactly
        which runs are the invocation's (a cell of the rectangle may hold another suite's). Each
        run's outcome reaches `RunControls.on_outcome`; a failure outside every run is raised."""
        result = defs.get_job_def("run_layers").execute_in_process(
            instance=self.instance, resources=self.resources, raise_on_error=False,
            run_config={"ops": {"layers": {"config": {"runs": [r.key for r in runs]}}}, **QUIET},
            tags={**self.tags, **grid_range_tags(self.instance, cells)})
        if not result.success:
            step_errors = [e for e in result.all_events if e.is_step_failure]
            error = step_errors[0].step_failure_data.error if step_errors else None
            self.failure = f"run_layers failed: {error.message.strip() if error else 'see the Dagster run'}"


def summarize(output_path: str, local_path: str, storage: str | None, config: dict) -> Path:
    """The leaderboard assets for a suite or a release (`summarize_target`'s config); returns the
    folder HELM's files were written to."""
    instance = dagster_instance(output_path)
    resources = {"medhelm": MedhelmResource(output_path=str(output_path), local_path=str(local_path),
                                            storage=storage)}
    dg.materialize(SUMMARY_ASSETS, instance=instance, resources=resources,
                   run_config={"ops": {"summarize_target": {"config": config}}, **QUIET})
    release = config.get("release")
    return Path(output_path) / (f"releases/{release}" if release else f"runs/{config['suite']}")
