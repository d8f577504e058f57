"""The code location: `dagster dev -w workspace.yaml` or `dagster asset materialize -m medhelm_dagster.definitions`."""
import warnings

import dagster as dg

warnings.filterwarnings("ignore", category=dg.BetaWarning)
warnings.filterwarnings("ignore", category=dg.PreviewWarning)

from medhelm_dagster.batches import BATCH_SENSORS, vendor_batches  # noqa: E402
from medhelm_dagster.leaderboard import SUMMARY_ASSETS  # noqa: E402
from medhelm_dagster.partitions import grid_partitions, scenario_partitions  # noqa: E402
from medhelm_dagster.pipeline import DATASET_ASSETS, PER_RUN_ASSETS, run_entries  # noqa: E402
from medhelm_dagster.published import PUBLISHED_ASSETS, PublishedResource  # noqa: E402
from medhelm_dagster.resources import MedhelmResource  # noqa: E402
from medhelm_core.engine import RunControls  # noqa: E402

# The jobs medhelm-run launches, in order (the UI and `dg launch` launch the same ones):
# register_suite, then build_<tier>_datasets over the suite's scenario partitions, then run_layers
# over its cells of the benchmark × model grid, one Dagster run each (the datasets and layers take
# partition ranges; the grid's, a rectangle: `--partition-range 'b1|s/m1...b2|s/m2'`).
register_suite = dg.define_asset_job("register_suite", selection=dg.AssetSelection.assets(run_entries),
                                     description="Expand a suite's confs into run specs; add its run and dataset "
                                                 "partitions.")
dataset_jobs = [dg.define_asset_job(f"build_{tier}_datasets", selection=dg.AssetSelection.assets(asset),
                                    partitions_def=scenario_partitions[tier],
                                    description=f"Build {tier} datasets (partitions: scenario specs).")
                for tier, asset in DATASET_ASSETS.items()]
run_layers = dg.define_asset_job("run_layers", selection=dg.AssetSelection.assets(*PER_RUN_ASSETS),
                                 partitions_def=grid_partitions,
                                 description="Runs (partitions: benchmark × <suite>/<model deployment>) through "
                                             "every per-run layer, all at once.")

defs = dg.Definitions(
    assets=[run_entries, *DATASET_ASSETS.values(), *PER_RUN_ASSETS, *SUMMARY_ASSETS, *PUBLISHED_ASSETS, vendor_batches],
    jobs=[register_suite, *dataset_jobs, run_layers],
    sensors=BATCH_SENSORS,  # medhelm_batches: stopped until turned on (batches.py)
    resources={"medhelm": MedhelmResource.from_env(), "run_controls": RunControls(),
               "published": PublishedResource.from_env()},
    executor=dg.in_process_executor,
)
