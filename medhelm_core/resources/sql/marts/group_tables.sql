-- depends_on: summarize_target, schema_run_groups, schema_run_group_expansion, schema_metric_groups, column_sets, target_run_groups, run_visibility
-- The tables of every groups/<group>.json, in file order (HELM's write_groups):
--   * a top/category group (by_metric, > 1 group in its expansion): one 'metric_group' table per
--     metric group that yields at least one column, if any run of its expansion is visible;
--   * otherwise, for each subgroup S of the expansion: one 'scenario' table per distinct scenario
--     spec of S (rows: runs of the displayed group with that spec), each followed by its
--     'sub_split' tables, and, when S shows > 1 scenario, an 'aggregate' table over all of S's
--     runs placed before them.  Scenario tables carry the runs in the model cell.
-- Aggregation strategies: metric group's list if set, [] if hide_win_rates, else ['win_rate'];
-- per-scenario/aggregate tables have none.
CREATE OR REPLACE TABLE group_tables AS
WITH tgt AS (SELECT DISTINCT target FROM summarize_target),
rg AS (SELECT g.* FROM schema_run_groups g JOIN tgt USING (target)),
ex AS (SELECT e.* FROM schema_run_group_expansion e JOIN tgt USING (target)),
mgs AS (SELECT m.* FROM schema_metric_groups m JOIN tgt USING (target)),
metric_tables AS (
    SELECT g.name AS group_name, g.run_group_pos AS group_pos, 'metric_group' AS table_kind,
           cs.set_metric_group AS table_name,
           coalesce(nullif(m.short_display_name, ''), nullif(m.display_name, ''), m.name) AS title,
           g.name AS source_group, CAST(NULL AS VARCHAR) AS scenario_key,
           'metric_group' AS set_kind, g.name AS set_owner, cs.set_metric_group, CAST(NULL AS VARCHAR) AS set_sub_split,
           false AS is_scenario_table,
           CASE WHEN m.aggregation_strategies IS NOT NULL THEN m.aggregation_strategies
                WHEN m.hide_win_rates THEN []::VARCHAR[]
                ELSE ['win_rate'] END AS aggregation_strategies,
           g.name AS url_group,
           [0, cs.set_pos, 0, 0] AS order_key
    FROM rg g
    JOIN (SELECT DISTINCT set_owner, set_metric_group, set_pos FROM column_sets WHERE set_kind = 'metric_group') cs
      ON cs.set_owner = g.name
    JOIN mgs m ON m.name = cs.set_metric_group
    WHERE NOT (g.subgroup_display_mode = 'by_group' OR g.expansion_size = 1)
      AND EXISTS (SELECT 1 FROM ex e
                  JOIN target_run_groups trg ON trg.group_name = e.subgroup
                  JOIN run_visibility v ON v.run_id = trg.run_id AND v.view_group = g.name AND v.visible
                  WHERE e.run_group = g.name)
),
by_subgroup AS (
    SELECT g.name AS group_name, g.run_group_pos AS group_pos, e.expansion_pos, s.name AS sub_name,
           s.display_name AS sub_display_name, s.metric_groups AS sub_metric_groups, s.sub_splits
    FROM rg g
    JOIN ex e ON e.run_group = g.name
    JOIN rg s ON s.name = e.subgroup
    WHERE g.subgroup_display_mode = 'by_group' OR g.expansion_size = 1
),
scenarios AS (   -- distinct scenario specs of S, in insertion order, with the args of the first one
    SELECT group_name, scenario_key, min(run_id) AS first_run, arg_min(scenario_args_str, run_id) AS args_str
    FROM target_run_groups GROUP BY ALL
),
scenario_tables AS (
    SELECT b.group_name, b.group_pos, 'scenario' AS table_kind,
           b.sub_name || '_' || replace(replace(sc.args_str, ' ', ''), '/', '_') AS table_name,
           sc.args_str, b.sub_name, b.sub_display_name, b.sub_splits, b.expansion_pos, sc.scenario_key,
           sc.first_run
    FROM by_subgroup b
    JOIN scenarios sc ON sc.group_name = b.sub_name
    WHERE len(b.sub_metric_groups) > 0
      AND EXISTS (SELECT 1 FROM target_run_groups t
                  WHERE t.group_name = b.group_name AND t.scenario_key = sc.scenario_key)
),
aggregate_tables AS (
    SELECT b.group_name, b.group_pos, b.sub_name, b.sub_display_name, b.expansion_pos
    FROM by_subgroup b
    WHERE len(b.sub_metric_groups) > 0
      AND (SELECT count(*) FROM scenario_tables st
           WHERE st.group_name = b.group_name AND st.sub_name = b.sub_name) > 1
      AND EXISTS (SELECT 1 FROM target_run_groups t WHERE t.group_name = b.sub_name)
),
all_tables AS (
    SELECT * FROM metric_tables
    UNION ALL
    SELECT group_name, group_pos, 'scenario', table_name,
           CASE WHEN strpos(table_name, group_name) > 0 THEN args_str
                ELSE coalesce(sub_display_name, 'None') || ' ' || args_str END,
           group_name, scenario_key, 'subgroup', sub_name, NULL, NULL,
           true, []::VARCHAR[], sub_name, [expansion_pos, 1, first_run, 0]
    FROM scenario_tables
    UNION ALL
    SELECT st.group_name, st.group_pos, 'sub_split', st.sub_name || ':sub_split=' || ss.sub_split,
           coalesce(st.sub_display_name, 'None') || ' (sub-split: ' || ss.sub_split || ')',
           st.group_name, st.scenario_key, 'subgroup', st.sub_name, NULL, ss.sub_split,
           false, []::VARCHAR[], st.sub_name, [st.expansion_pos, 1, st.first_run, ss.pos]
    FROM scenario_tables st
    JOIN (SELECT name, unnest(sub_splits) AS sub_split, unnest(generate_series(1, len(sub_splits))) AS pos
          FROM rg WHERE sub_splits IS NOT NULL) ss ON ss.name = st.sub_name
    UNION ALL
    SELECT group_name, group_pos, 'aggregate', sub_name, coalesce(sub_display_name, 'None'),
           sub_name, NULL, 'subgroup', sub_name, NULL, NULL,
           false, []::VARCHAR[], sub_name, [expansion_pos, 0, 0, 0]
    FROM aggregate_tables
)
SELECT CAST(row_number() OVER (ORDER BY group_pos, order_key) AS INTEGER) AS table_id,
       group_name, group_pos,
       CAST(row_number() OVER (PARTITION BY group_name ORDER BY order_key) - 1 AS INTEGER) AS table_pos,
       table_kind, table_name, title, source_group, scenario_key,
       set_kind, set_owner, set_metric_group, set_sub_split,
       is_scenario_table, aggregation_strategies, url_group
FROM all_tables;
