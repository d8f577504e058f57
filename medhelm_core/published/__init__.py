"""Published HELM results as source data: import (GCS, disk, any fsspec URL), rebuild, compare, re-score.

    open_source(uri) -> Source                    listing with versions, gzip-at-rest aware fetching
    Importer(store, source, release=R | suite=S, ...).run() -> ImportReport
    rebuild_and_compare(store, target) -> ComparisonSummary      (table leaderboard_comparison)
    rescore_target(store, target) -> RescoreSummary               (table rescore_comparison)
"""
from .source import DEFAULT_GCS_SOURCE, ObjectInfo, Source, SourceUnreachable, open_source

__all__ = ["DEFAULT_GCS_SOURCE", "ObjectInfo", "Source", "SourceUnreachable", "open_source"]
