"""The local Dagster home the commands use (medhelm_dagster.instance): its SQLite event log keeps one
connection per database file and answers Dagster's schema questions from memory once answered yes,
so storing a suite's thousands of events does not open an engine per event. The events are the
ones Dagster would store."""
import dagster as dg
from dagster._core.storage.event_log.sqlite import sqlite_event_log as sqlite_log

from medhelm_dagster.instance import dagster_instance


def test_events_are_stored_without_an_engine_per_event(tmp_path, monkeypatch):
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "home"))
    instance = dagster_instance(str(tmp_path))
    engines = []
    real = sqlite_log.create_engine

    def counted(*args, **kwargs):
        engines.append(args[0] if args else kwargs)
        return real(*args, **kwargs)

    monkeypatch.setattr(sqlite_log, "create_engine", counted)
    for i in range(40):
        instance.report_runless_asset_event(dg.AssetMaterialization(
            "requests", partition=f"p{i}", metadata={"n": i}, tags={"dagster/data_version": f"v{i}"}))
    assert len(engines) <= 3, engines  # Dagster's own storage: several per event (has_table's among them)
    latest = instance.get_latest_materialization_event(dg.AssetKey("requests"))
    assert latest.asset_materialization.partition == "p39"
    assert latest.asset_materialization.metadata["n"].value == 39
    assert instance.get_materialized_partitions(dg.AssetKey("requests")) == {f"p{i}" for i in range(40)}
