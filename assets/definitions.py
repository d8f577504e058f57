"""The code location: `dagster dev -w workspace.yaml` or `dagster asset materialize -m assets.definitions`."""
import warnings

import dagster as dg

warnings.filterwarnings("ignore", category=dg.BetaWarning)
warnings.filterwarnings("ignore", category=dg.PreviewWarning)

from assets.checks import CHECKS  # noqa: E402
from assets.leaderboard import SUMMARY_ASSETS  # noqa: E402
from assets.partitions import runs_partitions  # noqa: E402
from assets.pipeline import DATASET_ASSETS, PER_RUN_ASSETS, run_entries  # noqa: E402
from assets.published import PUBLISHED_ASSETS, PublishedResource  # noqa: E402
from assets.resources import MedhelmResource  # noqa: E402

# One run through its layers (requests → completions → annotations → scores), as medhelm-run does:
# `dg launch --job run_layers --partition '<suite>/<run name>'`.
run_layers = dg.define_asset_job("run_layers", selection=dg.AssetSelection.assets(*PER_RUN_ASSETS),
                                 partitions_def=runs_partitions,
                                 description="One run (partition <suite>/<run name>) through every per-run layer.")

defs = dg.Definitions(
    assets=[run_entries, *DATASET_ASSETS.values(), *PER_RUN_ASSETS, *SUMMARY_ASSETS, *PUBLISHED_ASSETS],
    jobs=[run_layers],
    asset_checks=CHECKS,
    resources={"medhelm": MedhelmResource(), "published": PublishedResource()},
    executor=dg.in_process_executor,
)
