-- The presentation schema as tables, keyed by target (medhelm_core/summarize/schema.py fills them).

CREATE TABLE IF NOT EXISTS schema_metrics (
        target VARCHAR, metric_pos INTEGER, name VARCHAR, display_name VARCHAR, short_display_name VARCHAR,
        description VARCHAR, lower_is_better BOOLEAN);

CREATE TABLE IF NOT EXISTS schema_perturbations (
        target VARCHAR, perturbation_pos INTEGER, name VARCHAR, display_name VARCHAR, short_display_name VARCHAR,
        description VARCHAR, lower_is_better BOOLEAN);

CREATE TABLE IF NOT EXISTS schema_metric_groups (
        target VARCHAR, metric_group_pos INTEGER, name VARCHAR, display_name VARCHAR, short_display_name VARCHAR,
        description VARCHAR, lower_is_better BOOLEAN, hide_win_rates BOOLEAN, aggregation_strategies VARCHAR[]);

CREATE TABLE IF NOT EXISTS schema_metric_group_metrics (
        target VARCHAR, metric_group VARCHAR, matcher_pos INTEGER, name VARCHAR, split VARCHAR, sub_split VARCHAR,
        perturbation_name VARCHAR);

CREATE TABLE IF NOT EXISTS schema_run_groups (
        target VARCHAR, run_group_pos INTEGER, name VARCHAR, display_name VARCHAR, short_display_name VARCHAR,
        description VARCHAR, short_description VARCHAR, category VARCHAR, visibility VARCHAR,
        subgroup_display_mode VARCHAR, metric_groups VARCHAR[], subgroups VARCHAR[],
        subgroup_metric_groups_hidden VARCHAR[], sub_splits VARCHAR[], environment JSON, main_name VARCHAR,
        main_split VARCHAR, taxonomy JSON, todo BOOLEAN, adapter_keys_shown VARCHAR[], expansion_size INTEGER);

CREATE TABLE IF NOT EXISTS schema_run_group_expansion (
        target VARCHAR, run_group VARCHAR, expansion_pos INTEGER, subgroup VARCHAR);

CREATE TABLE IF NOT EXISTS schema_document (target VARCHAR, schema_json JSON);
