-- depends_on: table_cells, table_columns, group_tables
-- Per-column win rates of HELM's compute_aggregate_row_win_rates, for tables with the
-- 'win_rate' aggregation: in every column with lower_is_better set and >= 2 non-null cells,
-- a non-null cell scores (#cells strictly worse + (#cells tied - 1) / 2) / (n - 1); ties are
-- exact float equality.  All arithmetic in DOUBLE, in HELM's order of operations.
CREATE OR REPLACE TABLE column_win_rates AS
WITH cells AS (
    SELECT c.table_id, c.row_pos, c.col_idx, c.value, k.lower_is_better
    FROM table_cells c
    JOIN table_columns k USING (table_id, col_idx)
    JOIN group_tables t USING (table_id)
    WHERE list_contains(t.aggregation_strategies, 'win_rate') AND k.lower_is_better IS NOT NULL
),
scored AS (
    SELECT *,
        count(value) OVER (PARTITION BY table_id, col_idx) AS n,
        count(value) OVER (PARTITION BY table_id, col_idx, value) AS ties,
        CASE WHEN lower_is_better
             THEN count(value) OVER (PARTITION BY table_id, col_idx ORDER BY value DESC
                                     RANGE BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW)
             ELSE count(value) OVER (PARTITION BY table_id, col_idx ORDER BY value ASC
                                     RANGE BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW)
        END AS at_most
    FROM cells
)
SELECT table_id, row_pos, col_idx, value, n, ties, at_most - ties AS worse,
       (CAST(at_most - ties AS DOUBLE) + CAST(ties - 1 AS DOUBLE) / CAST(2 AS DOUBLE))
           / CAST(n - 1 AS DOUBLE) AS win_rate
FROM scored
WHERE value IS NOT NULL AND n >= 2;
