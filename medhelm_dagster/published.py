"""Published HELM results as source assets (group `published`).

    published_results (observable source: data version = hash of the release's objects'
        key, generation/etag and size)  →  published_import (incremental import into DuckDB)
        →  published_leaderboard_comparison (rebuild with our SQL + compare)
        →  published_rescore (our metrics on the published completions, with completions only)

Observing `published_results` only lists the bucket (and reads summary.json); nothing downstream
becomes stale unless that listing changes.  `published_import` carries a code version, so its
data version is derived from the observed one, and so on down the chain.

What they follow is the resource `published` (medhelm-import's arguments, `ImportSelection`):
`source` (default gs://crfm-helm-public/medhelm/benchmark_output) and `release` (`latest`: the
newest under releases/) or `suite`. Until a release or suite is set the group follows nothing: its
assets record a materialization that says so (metadata `followed: false` and one line naming the
setting), fetch nothing and write nothing, so "Materialize all" stays green offline and on a fresh
clone. (They cannot simply skip: an asset backfill counts an asset that a successful run did not
materialize as failed.) The settings are launchpad config, or `$MEDHELM_PUBLISHED_*` (bound with
`dg.EnvVar` when set): SOURCE, RELEASE, SUITE, WITH_COMPLETIONS, SUITE_PREFIX, TOKEN.
"""

import os

import dagster as dg

from medhelm_dagster.errors import user_errors
from medhelm_dagster.resources import MedhelmResource, env_bound
from medhelm_core.published.freshness import code_fingerprint
from medhelm_core.published.importer import Importer, list_target, wanted_kinds
from medhelm_core.published.leaderboard import rebuild_and_compare
from medhelm_core.published.rescore import rescore_target
from medhelm_core.published.source import open_source
from medhelm_core.selections import ImportSelection

PUBLISHED_ENV = {"source": "MEDHELM_PUBLISHED_SOURCE", "release": "MEDHELM_PUBLISHED_RELEASE",
                 "suite": "MEDHELM_PUBLISHED_SUITE", "suite_prefix": "MEDHELM_PUBLISHED_SUITE_PREFIX",
                 "token": "MEDHELM_PUBLISHED_TOKEN"}
# What the import, the rebuild and the rescore compute with: the package's code digest (the one the
# imported targets' freshness uses), so Dagster marks them stale when the code changes.
CODE_VERSION = code_fingerprint()[:12]
NOT_CONFIGURED = ("published results: not followed: set the `published` resource's release "
                  "('latest' for the newest on GCS) or suite, and source for a local copy, in the launchpad or "
                  "with $MEDHELM_PUBLISHED_RELEASE / $MEDHELM_PUBLISHED_SOURCE")


def _flag(name: str, env) -> bool:
    return env.get(name, "").strip().lower() in ("1", "true", "yes", "on")


class PublishedResource(dg.ConfigurableResource, ImportSelection):
    """Which published results the `published` assets follow (`ImportSelection`, medhelm-import's
    arguments); `from_env()` binds them to `$MEDHELM_PUBLISHED_*` where those are set."""

    @classmethod
    def from_env(cls, env=None) -> "PublishedResource":
        env = os.environ if env is None else env
        flags = {"with_completions": True} if _flag("MEDHELM_PUBLISHED_WITH_COMPLETIONS", env) else {}
        return cls(**env_bound(PUBLISHED_ENV, env=env), **flags)

    def configured(self) -> bool:
        return bool(self.release or self.suite)

    def open(self):
        return open_source(self.source, token=self.token, endpoint_url=self.endpoint_url)

    def importer(self, store):
        return Importer(store, self.open(), release=self.release, suite=self.suite,
                        with_completions=self.with_completions, jobs=self.jobs, suite_prefix=self.suite_prefix)


@dg.observable_source_asset(
    name="published_results", group_name="published",
    description="The published release (or suite) on GCS / disk: its data version is a hash of every object's "
                "key, generation (or etag / mtime) and size, so downstream goes stale only when the bucket changes.",
    automation_condition=dg.AutomationCondition.on_cron("0 6 * * *"),
)
def published_results(published: PublishedResource) -> dg.ObserveResult:
    if not published.configured():
        return dg.ObserveResult(data_version=dg.DataVersion("not-configured"), metadata={"note": NOT_CONFIGURED})
    source = published.open()
    listing = list_target(source, published.release, published.suite,
                          wanted_kinds(True, published.with_completions), source.fetch)
    return dg.ObserveResult(
        data_version=dg.DataVersion(listing.data_version()),
        metadata={"source": source.uri, "target": listing.target, "suites": ", ".join(listing.suites),
                  "objects": len(listing.wanted()), "bytes": sum(p.obj.size for p in listing.wanted())},
    )


@dg.asset(name="published_import", group_name="published", deps=[published_results], kinds={"gcs", "duckdb"},
          code_version=CODE_VERSION, automation_condition=dg.AutomationCondition.eager(),
          description="Incremental import of the published runs, stats, per-instance stats (and completions) "
                      "into the published_* tables and the runs/run_stats summarize inputs. Follows nothing until "
                      "the `published` resource names a release or suite.")
@user_errors
def published_import(context: dg.AssetExecutionContext, published: PublishedResource,
                     medhelm: MedhelmResource) -> dg.MaterializeResult:
    if not published.configured():
        return _not_followed(context)
    report = published.importer(medhelm.workspace().store).run()
    return dg.MaterializeResult(metadata={
        "target": report.target, "runs": report.runs, "listed": report.listed, "fetched": report.fetched,
        "unchanged": report.unchanged, "removed": report.removed, "bytes_fetched": report.bytes_fetched,
        "problems": dg.MetadataValue.md("\n".join(f"* {p.line()}" for p in report.problems) or "none"),
        "bucket_data_version": report.data_version,
    })


@dg.asset(name="published_leaderboard_comparison", group_name="published", deps=[published_import],
          kinds={"sql", "duckdb"}, code_version=CODE_VERSION, automation_condition=dg.AutomationCondition.eager(),
          description="The release's leaderboard rebuilt with our SQL models from the published stats and the "
                      "release's own schema.json, compared cell by cell (table leaderboard_comparison).")
@user_errors
def published_leaderboard_comparison(context: dg.AssetExecutionContext, published: PublishedResource,
                                     medhelm: MedhelmResource) -> dg.MaterializeResult:
    if not published.configured():
        return _not_followed(context)
    target = published.release or published.suite
    summary = rebuild_and_compare(medhelm.workspace().store, target)
    return dg.MaterializeResult(metadata={
        "cells": summary.cells, "equal": summary.equal, "mean_win_rates": summary.win_rates,
        "mean_win_rates_equal": summary.win_rates_equal,
        "rebuilt": not summary.unchanged,   # (False: nothing it reads changed since the last rebuild)
        "summary": dg.MetadataValue.md("\n\n".join(summary.lines())),
    })


@dg.asset(name="published_rescore", group_name="published", deps=[published_import], kinds={"duckdb"},
          code_version=CODE_VERSION,
          description="Our metrics on the published completions and judge annotations, compared with the published "
                      "per-instance stats (table rescore_comparison). Needs with_completions.")
@user_errors
def published_rescore(context: dg.AssetExecutionContext, published: PublishedResource,
                      medhelm: MedhelmResource) -> dg.MaterializeResult:
    if not published.configured():
        return _not_followed(context)
    if not published.with_completions:
        return dg.MaterializeResult(metadata={"note": "completions not imported (MEDHELM_PUBLISHED_WITH_COMPLETIONS)"})
    ws = medhelm.workspace()
    summary = rescore_target(ws.store, published.release or published.suite, local_path=str(ws.local_path))
    return dg.MaterializeResult(metadata={"runs": summary.runs, "stats": summary.stats, "equal": summary.equal,
                                          "summary": dg.MetadataValue.md("\n\n".join(summary.lines()))})


def _not_followed(context) -> dg.MaterializeResult:
    """What a published asset records while the resource names no release or suite (nothing fetched
    or written; its data version stays put, so nothing downstream goes stale)."""
    context.log.warning(NOT_CONFIGURED)
    return dg.MaterializeResult(metadata={"followed": False, "note": NOT_CONFIGURED},
                                data_version=dg.DataVersion("not-followed"))


PUBLISHED_ASSETS = [published_results, published_import, published_leaderboard_comparison, published_rescore]
