"""`python -m medhelm_core.summarize` - helm-summarize's command line over HELM run directories.

Loads `<output-path>/runs/<suite>/*/{run_spec,stats}.json` of the selected suites into DuckDB
(`--db`, default in-memory), builds the SQL models and writes HELM's files next to the runs.
Runs loaded this way carry no scenario metadata, so --auto-generate-schema yields metrics and
metric groups but no per-scenario run groups unless `runs.scenario_metadata` is filled.
"""
from __future__ import annotations

import argparse

import duckdb

from . import ensure_input_tables, load_benchmark_output_runs, summarize


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("-o", "--output-path", default="benchmark_output")
    p.add_argument("--schema-path")
    p.add_argument("--suite")
    p.add_argument("--release")
    p.add_argument("--suites", nargs="+")
    p.add_argument("--auto-generate-schema", action="store_true")
    p.add_argument("--model-metadata", nargs="*", help="model metadata YAML files (default: conf/model_metadata.yaml)")
    p.add_argument("--db", default=":memory:", help="DuckDB database file")
    p.add_argument("--date", help="date written to summary.json (default: today)")
    a = p.parse_args(argv)
    conn = duckdb.connect(a.db)
    ensure_input_tables(conn)
    for s in ([a.suite] if a.suite else (a.suites or ["default"])):
        load_benchmark_output_runs(conn, a.output_path, s)
    kwargs = {}
    if a.model_metadata is not None:
        kwargs["model_metadata_paths"] = a.model_metadata
    out = summarize(conn, a.output_path, schema_path=a.schema_path, suite=a.suite, suites=a.suites,
                    release=a.release, auto_generate_schema=a.auto_generate_schema, date=a.date, **kwargs)
    print(out)


if __name__ == "__main__":
    main()
