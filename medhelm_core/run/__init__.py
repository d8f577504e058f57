"""A MedHELM run as a package of layers, Dagster-free; each layer imports only the ones above it here:

    workspace    Workspace (output folder, deployments, clients, catalog) and RunRef (suite + run name)
    entries      register_runs: run entries + run specs of a suite, the dataset partitions they need
    datasets     build_dataset: the instances of one scenario spec
    requests     build_requests: a run's prompts, in HELM's order
    completions  run_completions: every request answered once, through the engine (judges on arrival)
    annotations  run_annotations: the LLM jury and local annotators
    scores       compute_stats, write_files: HELM's metrics, the run's HELM files
    checks       RUN_CHECKS: SQL questions about one run (the per-run asset checks)
    suite        run_suite: many runs at once, one engine, up-to-date runs reused
    preflight    validate_runs: data files and deployments checked before anything is sent
    batch_pass   batch_pass: the runs' model and judge requests through the vendors' batch APIs, stored
                 as the completions layer stores them, before the online runs
    estimate     estimate_runs: tokens and dollars, before anything is sent (with_batch_prices: by batch)

Each layer function takes a `Workspace` and one run (or scenario spec), reads its inputs from DuckDB
and replaces its own rows in one transaction. The Dagster assets and the command line both call
these, so there is one code path.
"""
from medhelm_core.run.workspace import RunRef, Workspace  # noqa: F401
