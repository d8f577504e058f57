-- depends_on: headline_cells, cell_resamples, analytics_settings
-- HELM's mean win rate and the rank it gives, recomputed on every bootstrap resample: each headline
-- cell takes its resampled value (the same instance draws for every model of a benchmark:
-- cell_resamples), a cell without per-instance stats keeps its value; then, as the leaderboard does,
-- per column with lower_is_better set and >= 2 values, (#worse + (#tied - 1) / 2) / (n - 1), their
-- mean per model, and rank 1 for the highest (ties share the best rank).
CREATE OR REPLACE TABLE win_rate_resamples AS
WITH settings AS (SELECT coalesce(max(bootstrap_samples), 1000) AS b FROM analytics_settings),
resamples AS (SELECT unnest(range(1, b + 1)) AS b FROM settings),
cells AS (
    SELECT h.row_pos, h.col_idx, h.lower_is_better, s.b, coalesce(r.value, h.value) AS value
    FROM headline_cells h CROSS JOIN resamples s
    LEFT JOIN cell_resamples r ON r.benchmark = h.benchmark AND r.b = s.b
         AND r.model_deployment IS NOT DISTINCT FROM h.model_deployment AND r.model IS NOT DISTINCT FROM h.model
    WHERE h.value IS NOT NULL AND h.lower_is_better IS NOT NULL
),
scored AS (
    SELECT *,
        count(*) OVER (PARTITION BY b, col_idx) AS n,
        count(*) OVER (PARTITION BY b, col_idx, value) AS ties,
        CASE WHEN lower_is_better
             THEN count(*) OVER (PARTITION BY b, col_idx ORDER BY value DESC RANGE BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW)
             ELSE count(*) OVER (PARTITION BY b, col_idx ORDER BY value ASC RANGE BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW)
        END AS at_most
    FROM cells
),
rates AS (
    SELECT row_pos, b, avg((CAST(at_most - ties AS DOUBLE) + CAST(ties - 1 AS DOUBLE) / 2) / CAST(n - 1 AS DOUBLE))
               AS mean_win_rate
    FROM scored WHERE n >= 2 GROUP BY ALL
)
SELECT row_pos, b, mean_win_rate, rank() OVER (PARTITION BY b ORDER BY mean_win_rate DESC) AS rank
FROM rates
ORDER BY b, row_pos;
