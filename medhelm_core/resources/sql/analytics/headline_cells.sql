-- depends_on: group_tables, table_rows, table_columns, table_cells
-- The cells of the headline table: the first win-rate table of the first group (MedHELM's
-- "Accuracy" over every benchmark, a column each), the table the mean win rate ranks models by.
CREATE OR REPLACE TABLE headline_cells AS
WITH headline AS (
    SELECT table_id FROM group_tables
    WHERE list_contains(aggregation_strategies, 'win_rate')
    ORDER BY group_pos, table_pos LIMIT 1
)
SELECT c.table_id, c.row_pos, c.col_idx, k.column_group AS benchmark, k.matcher_name AS metric,
       r.model_deployment, r.model, r.display_name AS model_name, c.value, k.lower_is_better
FROM table_cells c
JOIN table_columns k ON k.table_id = c.table_id AND k.col_idx = c.col_idx
JOIN table_rows r ON r.table_id = c.table_id AND r.row_pos = c.row_pos
WHERE c.table_id = (SELECT table_id FROM headline)
ORDER BY c.row_pos, c.col_idx;
