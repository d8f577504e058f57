"""The code location: `dagster dev -w workspace.yaml` or `dagster asset materialize -m assets.definitions`."""
import warnings

import dagster as dg

warnings.filterwarnings("ignore", category=dg.BetaWarning)
warnings.filterwarnings("ignore", category=dg.PreviewWarning)

from assets.checks import CHECKS  # noqa: E402
from assets.leaderboard import SUMMARY_ASSETS  # noqa: E402
from assets.pipeline import DATASET_ASSETS, PER_RUN_ASSETS, run_entries  # noqa: E402
from assets.published import PUBLISHED_ASSETS, PublishedResource  # noqa: E402
from assets.resources import MedhelmResource  # noqa: E402

defs = dg.Definitions(
    assets=[run_entries, *DATASET_ASSETS.values(), *PER_RUN_ASSETS, *SUMMARY_ASSETS, *PUBLISHED_ASSETS],
    asset_checks=CHECKS,
    resources={"medhelm": MedhelmResource(), "published": PublishedResource()},
    executor=dg.in_process_executor,
)
