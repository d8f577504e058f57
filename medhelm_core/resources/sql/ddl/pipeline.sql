-- The pipeline's tables: what each suite asked for, datasets, requests, completions, the jury, scores.
-- Executed by medhelm_core.store when it first opens a file for writing (every statement is idempotent).

-- What each suite asked for: one row per run (HELM run name = run directory name).
CREATE TABLE IF NOT EXISTS run_entries (
        suite VARCHAR, run_name VARCHAR, description VARCHAR, priority INTEGER, conf_path VARCHAR,
        tier VARCHAR, scenario_key VARCHAR, model VARCHAR, model_deployment VARCHAR,
        run_spec JSON, requested_at TIMESTAMP DEFAULT current_timestamp,
        PRIMARY KEY (suite, run_name));

-- The scenario specs the registered runs use: one dataset partition each.
CREATE TABLE IF NOT EXISTS scenario_specs (
        partition_key VARCHAR PRIMARY KEY, tier VARCHAR, scenario_spec JSON, scenario_key VARCHAR,
        content_hash VARCHAR, registered_at TIMESTAMP DEFAULT current_timestamp);

-- Datasets: the instance list of one scenario spec (class + args + data-file contents).
CREATE TABLE IF NOT EXISTS datasets (
        scenario_key VARCHAR PRIMARY KEY, class_name VARCHAR, args JSON, tier VARCHAR,
        content_hash VARCHAR, num_instances INTEGER, scenario JSON, scenario_metadata JSON,
        built_at TIMESTAMP DEFAULT current_timestamp);

CREATE TABLE IF NOT EXISTS instances (
        scenario_key VARCHAR, position INTEGER, instance_id VARCHAR, split VARCHAR, instance JSON,
        PRIMARY KEY (scenario_key, position));

-- Requests (prompts) of a run, in HELM's order; request_key addresses the completion.
CREATE TABLE IF NOT EXISTS requests (
        suite VARCHAR, run_name VARCHAR, position INTEGER, instance_id VARCHAR, split VARCHAR,
        train_trial_index INTEGER, request_key VARCHAR, model_deployment VARCHAR, prompt VARCHAR,
        request_state JSON, PRIMARY KEY (suite, run_name, position));

-- Every model or judge answer ever paid for, keyed by sha256(deployment, request).
CREATE TABLE IF NOT EXISTS completions (
        request_key VARCHAR PRIMARY KEY, model_deployment VARCHAR, model VARCHAR, request JSON,
        result JSON, success BOOLEAN, attempts INTEGER, completed_at TIMESTAMP DEFAULT current_timestamp);

CREATE TABLE IF NOT EXISTS completion_errors (
        request_key VARCHAR, model_deployment VARCHAR, error VARCHAR, attempts INTEGER,
        failed_at TIMESTAMP DEFAULT current_timestamp);

-- The jury: HELM's annotation per request state, and an explicit verdict per judge.
CREATE TABLE IF NOT EXISTS annotations (
        suite VARCHAR, run_name VARCHAR, position INTEGER, instance_id VARCHAR, annotator VARCHAR,
        annotation JSON, PRIMARY KEY (suite, run_name, position, annotator));

CREATE TABLE IF NOT EXISTS judge_verdicts (
        suite VARCHAR, run_name VARCHAR, position INTEGER, instance_id VARCHAR, annotator VARCHAR,
        judge VARCHAR, judge_deployment VARCHAR, status VARCHAR, request_key VARCHAR,
        raw_text VARCHAR, parsed JSON, error VARCHAR,
        PRIMARY KEY (suite, run_name, position, annotator, judge));

-- Per-instance stats (instance_stats): defined with the summarize inputs (summarize_inputs.sql),
-- which the analytics read in every store, this one included.

-- The jury score with judge failures left out instead of HELM's silent default.
CREATE TABLE IF NOT EXISTS jury_scores (
        suite VARCHAR, run_name VARCHAR, instance_id VARCHAR, metric VARCHAR,
        helm_value DOUBLE, corrected_value DOUBLE, judges_ok INTEGER, judges_total INTEGER,
        PRIMARY KEY (suite, run_name, instance_id, metric));

-- The inputs a run last completed with (run spec, dataset key, deployment, code): a rerun with
-- the same fingerprint and the run's files on disk is reused without any work (run/suite.py).
CREATE TABLE IF NOT EXISTS run_fingerprints (
        suite VARCHAR, run_name VARCHAR, fingerprint VARCHAR,
        completed_at TIMESTAMP DEFAULT current_timestamp, PRIMARY KEY (suite, run_name));

-- Each request's first completion text (analytics' refusals); the published rebuild gives the same
-- columns from the imported scenario_state.json.
CREATE OR REPLACE VIEW instance_completions AS
    SELECT r.suite, r.run_name, r.instance_id, r.train_trial_index,
           c.result -> '$.completions[0]' ->> 'text' AS completion
    FROM requests r LEFT JOIN completions c USING (request_key);

-- The entries of HELM's annotation of each request state but its judge prompt (analytics' judge
-- scores); the published rebuild gives the same columns from the imported scenario_state.json.
CREATE OR REPLACE VIEW instance_annotation_entries AS
    SELECT suite, run_name, instance_id, annotator, e.key AS entry, e.value AS value
    FROM (SELECT suite, run_name, instance_id, annotator,
                 unnest(map_entries(TRY_CAST(annotation AS MAP(VARCHAR, JSON)))) AS e
          FROM annotations)
    WHERE e.key <> 'prompt_text';
