-- Input tables of the leaderboard SQL models (contract: medhelm_core/summarize/tables.py).
-- Executed by medhelm_core.store when it first opens a file for writing (every statement is idempotent).

CREATE TABLE IF NOT EXISTS runs (
    suite VARCHAR NOT NULL,
    run_name VARCHAR NOT NULL,
    run_spec JSON NOT NULL,
    scenario_metadata JSON,
    run_path VARCHAR
);

-- The edition the run reproduces (medhelm_core.editions); NULL: helm-0.5.16.
ALTER TABLE runs ADD COLUMN IF NOT EXISTS edition VARCHAR;

CREATE TABLE IF NOT EXISTS run_stats (
    suite VARCHAR NOT NULL,
    run_name VARCHAR NOT NULL,
    ordinal INTEGER NOT NULL,
    name VARCHAR NOT NULL,
    split VARCHAR,
    sub_split VARCHAR,
    perturbation JSON,
    perturbation_name VARCHAR,
    computed_on VARCHAR,
    count BIGINT,
    sum DOUBLE,
    sum_squared DOUBLE,
    min DOUBLE,
    max DOUBLE,
    mean DOUBLE,
    variance DOUBLE,
    stddev DOUBLE
);

CREATE TABLE IF NOT EXISTS summarize_target (
    target VARCHAR NOT NULL,      -- release name (release mode) or suite name (suite mode)
    mode VARCHAR NOT NULL,        -- 'suite' | 'release'
    suite VARCHAR NOT NULL,
    suite_pos INTEGER NOT NULL    -- position in --suites (0-based)
);

-- Per-instance stats as HELM writes per_instance_stats.json (the pipeline's own table; the published
-- rebuild fills it with the imported ones): the analytics models' bootstrap resamples instances.
CREATE TABLE IF NOT EXISTS instance_stats (
        suite VARCHAR, run_name VARCHAR, instance_id VARCHAR, train_trial_index INTEGER,
        ordinal INTEGER, name VARCHAR, split VARCHAR, sub_split VARCHAR, perturbation JSON,
        count BIGINT, sum DOUBLE, sum_squared DOUBLE, min DOUBLE, max DOUBLE, mean DOUBLE,
        variance DOUBLE, stddev DOUBLE);

-- The analytics models' settings: at most one row, empty for the defaults (1000 bootstrap resamples,
-- seed 0, alpha 0.05, power 0.8). Insert one and summarize again to change them.
CREATE TABLE IF NOT EXISTS analytics_settings (
        bootstrap_samples INTEGER, seed INTEGER, alpha DOUBLE, power DOUBLE);

-- Prices in use (USD per 1M prompt / completion tokens), as sql/ddl/costs.sql defines them: the
-- pipeline records those of its runs, the published rebuild those of the release's deployments
-- (the deployments settings); analytics' cost_vs_score prices the target's tokens with them.
CREATE TABLE IF NOT EXISTS deployment_prices (
        model_deployment VARCHAR PRIMARY KEY, input_per_million DOUBLE, output_per_million DOUBLE,
        updated_at TIMESTAMP DEFAULT current_timestamp);

-- Each request's first completion text (a view over requests/completions in the pipeline's store,
-- which makes this a no-op there; the published rebuild fills it from scenario_state.json).
CREATE TABLE IF NOT EXISTS instance_completions (
        suite VARCHAR, run_name VARCHAR, instance_id VARCHAR, train_trial_index INTEGER, completion VARCHAR);

-- The refusal patterns in use (regular expressions, case-insensitive): conf/refusal_patterns.yaml and
-- $MEDHELM_REFUSAL_PATTERNS, written before the analytics models run.
CREATE TABLE IF NOT EXISTS refusal_patterns (pattern VARCHAR);

-- The entries of HELM's annotation of each request state, its judge prompt (prompt_text) left out:
-- one row per annotator and entry, e.g. a judge's verdict {criterion: {score, explanation}}; NULL
-- where HELM stored None (a view over the pipeline's annotations, which makes this a no-op there;
-- the published rebuild reads the entries taken out of scenario_state.json at import).
CREATE TABLE IF NOT EXISTS instance_annotation_entries (
        suite VARCHAR, run_name VARCHAR, instance_id VARCHAR, annotator VARCHAR, entry VARCHAR, value JSON);

-- Clinicians' ratings to hold the jury against (analytics' judge_agreement), in the MedHELM authors'
-- format (som-shahlab/medhelm's medhelm_human_annotation.csv), loaded by `medhelm-import
-- --human-ratings CSV`, which replaces them all: one row per rating of an item (dataset_name = the
-- jury's scenario_name, model_key = the model name with '/' as '_', instance_id) on a 1-5 scale;
-- file_row is the row's position in the file (1-based), which picks the first two ratings of an item.
CREATE TABLE IF NOT EXISTS human_ratings (
        file_row INTEGER, username VARCHAR, specialty VARCHAR, team VARCHAR, entry_id VARCHAR,
        instance_id VARCHAR, dataset_name VARCHAR, model_key VARCHAR, user_label VARCHAR,
        accuracy DOUBLE, completeness DOUBLE, clarity DOUBLE, question VARCHAR, answer VARCHAR,
        source VARCHAR);

-- Stores made before: the table had (run_name, instance_id, criterion, rating), refilled from
-- $MEDHELM_HUMAN_RATINGS at every summarize; those columns stay, unused (NULL).
ALTER TABLE human_ratings ADD COLUMN IF NOT EXISTS file_row INTEGER;
ALTER TABLE human_ratings ADD COLUMN IF NOT EXISTS username VARCHAR;
ALTER TABLE human_ratings ADD COLUMN IF NOT EXISTS specialty VARCHAR;
ALTER TABLE human_ratings ADD COLUMN IF NOT EXISTS team VARCHAR;
ALTER TABLE human_ratings ADD COLUMN IF NOT EXISTS entry_id VARCHAR;
ALTER TABLE human_ratings ADD COLUMN IF NOT EXISTS dataset_name VARCHAR;
ALTER TABLE human_ratings ADD COLUMN IF NOT EXISTS model_key VARCHAR;
ALTER TABLE human_ratings ADD COLUMN IF NOT EXISTS user_label VARCHAR;
ALTER TABLE human_ratings ADD COLUMN IF NOT EXISTS accuracy DOUBLE;
ALTER TABLE human_ratings ADD COLUMN IF NOT EXISTS completeness DOUBLE;
ALTER TABLE human_ratings ADD COLUMN IF NOT EXISTS clarity DOUBLE;
ALTER TABLE human_ratings ADD COLUMN IF NOT EXISTS question VARCHAR;
ALTER TABLE human_ratings ADD COLUMN IF NOT EXISTS answer VARCHAR;
ALTER TABLE human_ratings ADD COLUMN IF NOT EXISTS source VARCHAR;

-- Re-judged targets (medhelm_core/jury/rejudge.py: `medhelm-import --rejudge FILE`): a target's stored
-- completions judged again by another jury, landed as the target `<target>@<jury>` whose suites are
-- `<suite>@<jury>`. One row per re-judged run: its original suite and target and both juries
-- (annotator_models objects); jury_variant_scores reads it for the variant `jury:<original target>`.
CREATE TABLE IF NOT EXISTS rejudged_runs (
        target VARCHAR, suite VARCHAR, run_name VARCHAR, original_target VARCHAR, original_suite VARCHAR,
        jury VARCHAR, judges JSON, original_judges JSON);

-- One row per re-judged target: what it was made from (origin 'suite': our own suite; 'published': an
-- imported target), how it is summarized (mode, its suites in order beside the original ones), the jury.
CREATE TABLE IF NOT EXISTS rejudged_targets (
        target VARCHAR, original_target VARCHAR, origin VARCHAR, mode VARCHAR, suites VARCHAR[],
        original_suites VARCHAR[], jury VARCHAR, judges_file VARCHAR, judges JSON,
        rejudged_at TIMESTAMP DEFAULT current_timestamp);
