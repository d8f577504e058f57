"""One configuration surface: the command line's flags and Dagster's run config come from the same
pydantic models (medhelm_core/selections.py)."""
import argparse

import dagster as dg
import pytest

from medhelm_core.selections import RunSelection, SummarizeSelection, add_arguments, from_arguments


def test_dagster_configs_are_the_selections():
    from medhelm_dagster.leaderboard import SummarizeConfig
    from medhelm_dagster.pipeline import RunEntriesConfig

    assert RunEntriesConfig.model_fields.keys() == RunSelection.model_fields.keys()
    assert SummarizeConfig.model_fields.keys() == SummarizeSelection.model_fields.keys()
    assert RunEntriesConfig().model_dump() == RunSelection().model_dump()


def test_command_line_flags_follow_the_fields():
    parser = argparse.ArgumentParser()
    add_arguments(parser, RunSelection, required=("conf_paths", "suite", "max_eval_instances"))
    args = parser.parse_args(["--conf-paths", "a.conf", "b.conf", "--suite", "s", "--max-eval-instances", "3",
                              "--models-to-run", "openai/gpt-4o", "--priority", "2"])
    sel = from_arguments(RunSelection, args)
    assert sel == RunSelection(conf_paths=["a.conf", "b.conf"], suite="s", max_eval_instances=3, priority=2,
                               models_to_run=["openai/gpt-4o"], num_train_trials=1)
    missing = argparse.ArgumentParser(prog="medhelm-run")
    add_arguments(missing, RunSelection, required=("conf_paths", "suite", "max_eval_instances"))
    with pytest.raises(SystemExit):
        missing.parse_args(["--suite", "s"])  # --conf-paths and --max-eval-instances are required


def test_switches_aliases_and_command_line_defaults():
    parser = argparse.ArgumentParser()
    add_arguments(parser, SummarizeSelection, defaults={"suite": None, "auto_generate_schema": False},
                  aliases={"schema_path": ["--schema"]})
    assert vars(parser.parse_args([])) == {"suite": None, "suites": None, "release": None, "schema_path": None,
                                           "auto_generate_schema": False, "edition": None}
    args = parser.parse_args(["--schema", "s.yaml", "--auto-generate-schema", "--release", "r", "--suites", "a", "b"])
    assert from_arguments(SummarizeSelection, args) == SummarizeSelection(
        suite=None, suites=["a", "b"], release="r", schema_path="s.yaml", auto_generate_schema=True)


def test_the_import_resource_is_the_import_selection(monkeypatch):
    from medhelm_dagster.published import PublishedResource
    from medhelm_cli.imports import build_parser
    from medhelm_core.selections import ImportSelection

    assert PublishedResource.model_fields.keys() == ImportSelection.model_fields.keys()
    monkeypatch.setenv("MEDHELM_PUBLISHED_RELEASE", "v2.0.0")
    monkeypatch.setenv("MEDHELM_PUBLISHED_WITH_COMPLETIONS", "yes")
    res = PublishedResource.from_env()
    assert res.release == dg.EnvVar("MEDHELM_PUBLISHED_RELEASE")  # bound to the variable, read at launch
    resolved = res.process_config_and_initialize()
    assert (resolved.release, resolved.suite, resolved.with_completions, resolved.jobs) == ("v2.0.0", None, True, 16)
    monkeypatch.setenv("MEDHELM_PUBLISHED_RELEASE", "latest")  # what a run started now would follow
    assert res.process_config_and_initialize().release == "latest"
    args = build_parser().parse_args(["--source", "gs://b/p", "--suite", "s", "-j", "4", "--suite-prefix", "pub-"])
    got = from_arguments(ImportSelection, args)
    assert got == ImportSelection(source="gs://b/p", suite="s", jobs=4, suite_prefix="pub-")
    with pytest.raises(SystemExit):  # --release and --suite exclude each other
        build_parser().parse_args(["--source", "x", "--release", "r", "--suite", "s"])
