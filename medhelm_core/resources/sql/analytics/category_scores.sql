-- depends_on: group_tables, table_rows, table_cells, table_columns, row_aggregates, jury_metrics, schema_run_groups
-- Per group of the schema's run-group tree that has subgroups (MedHELM: "All scenarios", then its five
-- categories; a schema with subcategory groups adds their level) and per model: the mean win rate of
-- the group's first win-rate table (its "Accuracy", as the leaderboard shows it) and the macro-average
-- of that table's values (1-5 jury columns rescaled to (x - 1) / 4), for a model x category heatmap.
CREATE OR REPLACE TABLE category_scores AS
WITH RECURSIVE tree AS (
    SELECT name AS run_group, CAST(NULL AS VARCHAR) AS parent, 0 AS depth
    FROM schema_run_groups g
    WHERE len(coalesce(subgroups, [])) > 0
      AND NOT EXISTS (SELECT 1 FROM schema_run_groups p WHERE list_contains(p.subgroups, g.name))
    UNION ALL
    SELECT c.name, t.run_group, t.depth + 1
    FROM tree t
    JOIN schema_run_groups p ON p.name = t.run_group
    JOIN schema_run_groups c ON list_contains(p.subgroups, c.name)
    WHERE len(coalesce(c.subgroups, [])) > 0 AND t.depth < 16
),
groups AS (
    SELECT DISTINCT ON (t.run_group) t.run_group, t.parent, t.depth, g.display_name, x.table_id
    FROM tree t
    JOIN schema_run_groups g ON g.name = t.run_group
    JOIN group_tables x ON x.group_name = t.run_group AND list_contains(x.aggregation_strategies, 'win_rate')
    ORDER BY t.run_group, t.depth, x.table_pos
),
scaled AS (
    SELECT c.table_id, c.row_pos, count(c.value) AS n_values,
           avg(CASE WHEN k.matcher_name IN (SELECT metric FROM jury_metrics) THEN (c.value - 1) / 4 ELSE c.value END)
               AS macro_avg
    FROM table_cells c JOIN table_columns k USING (table_id, col_idx)
    WHERE c.table_id IN (SELECT table_id FROM groups)
    GROUP BY ALL
)
SELECT g.run_group, g.display_name, g.parent, g.depth, r.row_pos, r.display_name AS model, r.model_deployment,
       a.mean_win_rate, s.macro_avg, coalesce(s.n_values, 0) AS n_values
FROM groups g
JOIN table_rows r ON r.table_id = g.table_id
LEFT JOIN row_aggregates a ON a.table_id = r.table_id AND a.row_pos = r.row_pos
LEFT JOIN scaled s ON s.table_id = r.table_id AND s.row_pos = r.row_pos
ORDER BY g.depth, g.run_group, r.row_pos;
