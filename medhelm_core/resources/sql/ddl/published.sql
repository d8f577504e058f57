-- The published-results import's tables and views (TABLE_DOCS in medhelm_core/published/tables.py
-- says what each holds). Executed by ensure_published_tables; every statement is idempotent.

-- The manifest: one row per object ever fetched, with the version it had. An object whose
-- (version, size) is unchanged is not fetched again.  status: ok | corrupt.
CREATE TABLE IF NOT EXISTS published_objects (
        source VARCHAR NOT NULL, key VARCHAR NOT NULL, kind VARCHAR, version VARCHAR, size BIGINT,
        status VARCHAR, error VARCHAR, fetched_at TIMESTAMP DEFAULT current_timestamp,
        PRIMARY KEY (source, key));

CREATE TABLE IF NOT EXISTS published_targets (
        target VARCHAR PRIMARY KEY, mode VARCHAR, source VARCHAR, suites VARCHAR[], local_suites VARCHAR[],
        date VARCHAR, data_version VARCHAR, imported_at TIMESTAMP DEFAULT current_timestamp);

CREATE TABLE IF NOT EXISTS published_suites (
        suite VARCHAR PRIMARY KEY, local_suite VARCHAR, source VARCHAR, runs INTEGER,
        imported_at TIMESTAMP DEFAULT current_timestamp);

-- summary.json, schema.json, groups.json, runs_to_run_suites.json, groups/<group>.json as published
CREATE TABLE IF NOT EXISTS published_documents (
        target VARCHAR, name VARCHAR, key VARCHAR, content JSON, PRIMARY KEY (target, name));

CREATE TABLE IF NOT EXISTS published_runs (
        suite VARCHAR, run_name VARCHAR, spec_name VARCHAR, model VARCHAR, model_deployment VARCHAR,
        groups VARCHAR[], run_spec JSON, run_path VARCHAR, PRIMARY KEY (suite, run_name));

CREATE TABLE IF NOT EXISTS published_run_stats (
        suite VARCHAR, run_name VARCHAR, ordinal INTEGER, name VARCHAR, split VARCHAR, sub_split VARCHAR,
        perturbation JSON, perturbation_name VARCHAR, computed_on VARCHAR, count BIGINT, sum DOUBLE, sum_squared DOUBLE, min DOUBLE, max DOUBLE, mean DOUBLE,
        variance DOUBLE, stddev DOUBLE);

-- per_instance_stats.json, one row per entry with its stats as a list (5x faster to load than
-- one row per stat); the view published_instance_stats below has one row per stat.
CREATE TABLE IF NOT EXISTS published_instance_entries (
        suite VARCHAR, run_name VARCHAR, entry_pos INTEGER, instance_id VARCHAR, train_trial_index INTEGER,
        instance_perturbation JSON, stats STRUCT(name STRUCT(name VARCHAR, split VARCHAR, sub_split VARCHAR, perturbation JSON), count BIGINT, sum DOUBLE, sum_squared DOUBLE, min DOUBLE, max DOUBLE, mean DOUBLE, variance DOUBLE, stddev DOUBLE)[]);

CREATE VIEW IF NOT EXISTS published_instance_stats AS
        SELECT suite, run_name, entry_pos, instance_id, train_trial_index, instance_perturbation,
               CAST(ordinal AS INTEGER) AS ordinal, st.name.name AS name, st.name.split AS split,
               st.name.sub_split AS sub_split, st.name.perturbation AS perturbation,
               st.name.perturbation ->> 'name' AS perturbation_name, st.count AS count, st.sum AS sum,
               st.sum_squared AS sum_squared, st.min AS min, st.max AS max, st.mean AS mean,
               st.variance AS variance, st.stddev AS stddev
        FROM (SELECT *, generate_subscripts(stats, 1) - 1 AS ordinal, unnest(stats) AS st
              FROM published_instance_entries);

-- scenario_state.json: one row per request state, as published (completions and judge annotations
-- inside); the views published_completions and published_annotations take them apart.
-- The long JSON columns are stored with ZSTD: DuckDB's default analysis tries FSST and dictionary
-- compression on every segment first, which took half the ingest time of a full-size suite.
CREATE TABLE IF NOT EXISTS published_request_states (
        suite VARCHAR, run_name VARCHAR, position INTEGER, instance JSON USING COMPRESSION zstd, reference_index INTEGER,
        request_mode VARCHAR, train_trial_index INTEGER, output_mapping JSON USING COMPRESSION zstd,
        request JSON USING COMPRESSION zstd, result JSON USING COMPRESSION zstd,
        num_train_instances INTEGER, prompt_truncated BOOLEAN, num_conditioning_tokens INTEGER,
        annotations JSON USING COMPRESSION zstd);

CREATE VIEW IF NOT EXISTS published_completions AS
        SELECT suite, run_name, position, instance ->> 'id' AS instance_id, instance ->> 'split' AS split,
               train_trial_index, reference_index, request_mode, request ->> 'model_deployment' AS model_deployment,
               request ->> 'prompt' AS prompt, result -> '$.completions[0]' ->> 'text' AS completion,
               CAST(result ->> 'success' AS BOOLEAN) AS success, instance, output_mapping, request, result,
               num_train_instances, prompt_truncated, num_conditioning_tokens
        FROM published_request_states;

-- (annotations parsed once, as a map of annotator to annotation; HELM's None is NULL)
CREATE OR REPLACE VIEW published_annotations AS
        SELECT suite, run_name, position, instance_id, a.key AS annotator, a.value AS annotation
        FROM (SELECT suite, run_name, position, instance ->> 'id' AS instance_id,
                     unnest(map_entries(TRY_CAST(annotations AS MAP(VARCHAR, JSON)))) AS a
              FROM published_request_states);   -- (not an object: no map, no rows; a WHERE on
                                                  -- json_type here made DuckDB 2.0 hold every row in memory)

-- Every entry of every annotation of scenario_state.json but the judge prompt (prompt_text): the
-- jury's verdicts, taken out once at import (the importer's ANNOTATION_ENTRIES_SQL) so that the
-- analytics never parse the annotations' prompts again; one row per request state, annotator and
-- entry; HELM's None is NULL.
CREATE TABLE IF NOT EXISTS published_annotation_entries (
        suite VARCHAR, run_name VARCHAR, position INTEGER, instance_id VARCHAR, annotator VARCHAR,
        entry VARCHAR, value JSON);

-- Every cell of every table of releases/<R>/groups/<group>.json (or runs/<S>/groups/...), as published.
CREATE TABLE IF NOT EXISTS published_leaderboard_cells (
        target VARCHAR, group_name VARCHAR, table_pos INTEGER, table_name VARCHAR, table_title VARCHAR,
        row_pos INTEGER, row_name VARCHAR, model_deployment VARCHAR, model VARCHAR, col_idx INTEGER,
        column_name VARCHAR, metric VARCHAR, run_group VARCHAR, perturbation VARCHAR, is_aggregate BOOLEAN,
        value DOUBLE, description VARCHAR, run_count BIGINT, bold BOOLEAN, run_spec_names VARCHAR[]);

-- What the last import of a target could not use: corrupt objects and missing stats/run specs.
CREATE TABLE IF NOT EXISTS published_problems (
        target VARCHAR, key VARCHAR, uri VARCHAR, problem VARCHAR, message VARCHAR);

CREATE TABLE IF NOT EXISTS leaderboard_comparison (
        release VARCHAR, group_name VARCHAR, table_pos INTEGER, table_name VARCHAR, table_title VARCHAR,
        row_pos INTEGER, row_name VARCHAR, model_deployment VARCHAR, model VARCHAR, col_idx INTEGER,
        column_name VARCHAR, metric VARCHAR, run_group VARCHAR, is_aggregate BOOLEAN,
        published_value DOUBLE, rebuilt_value DOUBLE, abs_diff DOUBLE, equal BOOLEAN,
        published_count BIGINT, rebuilt_count BIGINT, cause VARCHAR);

-- A cell empty on both sides is `equal` but says nothing: counted apart from the valued cells.
ALTER TABLE leaderboard_comparison ADD COLUMN IF NOT EXISTS both_missing BOOLEAN;

-- The upstream edition the rebuilt side reproduces (medhelm_core.editions; published runs: helm-0.5.16).
ALTER TABLE leaderboard_comparison ADD COLUMN IF NOT EXISTS edition VARCHAR;

-- The last rebuild of each target: the fingerprint of what it read (medhelm_core.published.freshness)
-- and its comparison summary, so that a re-import with the same inputs does not rebuild again.
CREATE TABLE IF NOT EXISTS published_rebuilds (
        target VARCHAR, fingerprint VARCHAR, summary JSON, rebuilt_at TIMESTAMP);

CREATE TABLE IF NOT EXISTS rescore_comparison (
        suite VARCHAR, run_name VARCHAR, level VARCHAR, instance_id VARCHAR, train_trial_index INTEGER,
        name VARCHAR, split VARCHAR, sub_split VARCHAR, perturbation_name VARCHAR, occurrence INTEGER,
        published_count BIGINT, rescored_count BIGINT, published_sum DOUBLE, rescored_sum DOUBLE,
        published_mean DOUBLE, rescored_mean DOUBLE, abs_diff DOUBLE, equal BOOLEAN, cause VARCHAR);
-- 'recomputed' (computed again from the published request states) or 'not_recomputed' (cause says why).
ALTER TABLE rescore_comparison ADD COLUMN IF NOT EXISTS status VARCHAR;
