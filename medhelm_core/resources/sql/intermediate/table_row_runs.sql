-- depends_on: group_tables, summarize_target, schema_run_group_expansion, target_run_groups, run_visibility
-- The runs behind each table row, in HELM's list order (which is the float summation order):
--   metric_group: for each subgroup of the expansion, for each full adapter spec in insertion
--                 order, its runs (only runs visible in the table's group; a run listed under two
--                 subgroups of the expansion appears twice, as in HELM);
--   scenario / sub_split: runs of the displayed group with the table's scenario spec;
--   aggregate: runs of the subgroup.
-- `visible` = HELM's filter_runs_by_visibility w.r.t. the table's group; rows of scenario and
-- aggregate tables exist even when none of their runs is visible.
CREATE OR REPLACE TABLE table_row_runs AS
WITH ex AS (
    SELECT e.* FROM schema_run_group_expansion e
    WHERE e.target IN (SELECT target FROM summarize_target)
),
entries AS (
    SELECT t.table_id, m.run_id, m.run_name, m.model, m.model_deployment, v.visible,
           [e.expansion_pos, m.adapter_first, m.run_id, m.member_pos] AS order_key
    FROM group_tables t
    JOIN ex e ON e.run_group = t.group_name
    JOIN target_run_groups m ON m.group_name = e.subgroup
    JOIN run_visibility v ON v.run_id = m.run_id AND v.view_group = t.group_name
    WHERE t.table_kind = 'metric_group' AND v.visible
    UNION ALL
    SELECT t.table_id, m.run_id, m.run_name, m.model, m.model_deployment, v.visible,
           [m.scenario_adapter_first, m.run_id, m.member_pos, 0]
    FROM group_tables t
    JOIN target_run_groups m ON m.group_name = t.source_group AND m.scenario_key = t.scenario_key
    JOIN run_visibility v ON v.run_id = m.run_id AND v.view_group = t.group_name
    WHERE t.table_kind IN ('scenario', 'sub_split')
    UNION ALL
    SELECT t.table_id, m.run_id, m.run_name, m.model, m.model_deployment, v.visible,
           [m.adapter_first, m.run_id, m.member_pos, 0]
    FROM group_tables t
    JOIN target_run_groups m ON m.group_name = t.source_group
    JOIN run_visibility v ON v.run_id = m.run_id AND v.view_group = t.group_name
    WHERE t.table_kind = 'aggregate'
)
SELECT table_id,
       CAST(row_number() OVER (PARTITION BY table_id ORDER BY order_key) AS INTEGER) AS entry_pos,
       run_id, run_name, model, model_deployment, visible
FROM entries;
