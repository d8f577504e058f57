-- depends_on: cell_instances, cell_resamples, table_cells, table_columns, table_rows, schema_run_groups, analytics_settings
-- Percentile bootstrap intervals of every benchmark cell of every table (the cell's main metric over
-- its instances): ci_low / ci_high are the alpha/2 and 1 - alpha/2 quantiles (linear interpolation)
-- of the cell's resampled values, interpolated as numpy's percentile (cell_resamples; alpha:
-- analytics_settings, default 0.05).
CREATE OR REPLACE TABLE cell_intervals AS
WITH settings AS (SELECT coalesce(max(alpha), 0.05) AS alpha FROM analytics_settings),
sorted AS (
    SELECT benchmark, model_deployment, model, list_sort(list(value)) AS v, count(value) AS n_resamples,
           (count(value) - 1) * (SELECT alpha FROM settings) / 2 AS h_low,
           (count(value) - 1) * (1 - (SELECT alpha FROM settings) / 2) AS h_high
    FROM cell_resamples WHERE value IS NOT NULL GROUP BY ALL
),
intervals AS (   -- numpy's default percentile: linear between the two nearest order statistics
    SELECT benchmark, model_deployment, model, n_resamples,
           v[CAST(floor(h_low) AS BIGINT) + 1] + (h_low - floor(h_low))
               * (v[least(CAST(floor(h_low) AS BIGINT) + 2, n_resamples)] - v[CAST(floor(h_low) AS BIGINT) + 1]) AS ci_low,
           v[CAST(floor(h_high) AS BIGINT) + 1] + (h_high - floor(h_high))
               * (v[least(CAST(floor(h_high) AS BIGINT) + 2, n_resamples)] - v[CAST(floor(h_high) AS BIGINT) + 1]) AS ci_high
    FROM sorted
),
points AS (
    SELECT benchmark, model_deployment, model, count(*) AS n_instances, sum(s) / nullif(sum(c), 0) AS instance_value
    FROM cell_instances GROUP BY ALL
)
SELECT c.table_id, c.row_pos, c.col_idx, k.column_group AS benchmark, r.model_deployment, r.model,
       c.value, p.instance_value, p.n_instances, i.ci_low, i.ci_high, i.n_resamples
FROM table_cells c
JOIN table_columns k USING (table_id, col_idx)
JOIN table_rows r USING (table_id, row_pos)
JOIN schema_run_groups g ON g.name = k.column_group AND g.main_name = k.matcher_name AND g.main_split = k.matcher_split
JOIN points p ON p.benchmark = k.column_group AND p.model_deployment IS NOT DISTINCT FROM r.model_deployment
             AND p.model IS NOT DISTINCT FROM r.model
LEFT JOIN intervals i ON i.benchmark = p.benchmark AND i.model_deployment IS NOT DISTINCT FROM p.model_deployment
                     AND i.model IS NOT DISTINCT FROM p.model
WHERE c.value IS NOT NULL AND k.matcher_perturbation IS NULL
ORDER BY c.table_id, c.row_pos, c.col_idx;
