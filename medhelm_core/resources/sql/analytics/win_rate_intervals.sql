-- depends_on: headline_cells, row_aggregates, win_rate_resamples, analytics_settings
-- Per model of the headline table: its mean win rate (the leaderboard's) and rank, with percentile
-- bootstrap intervals (alpha/2 and 1 - alpha/2, interpolated as numpy's percentile) of both over
-- win_rate_resamples; the rank interval is widened to whole ranks ("rank 2-4").
CREATE OR REPLACE TABLE win_rate_intervals AS
WITH settings AS (SELECT coalesce(max(alpha), 0.05) AS alpha FROM analytics_settings),
models AS (
    SELECT DISTINCT h.table_id, h.row_pos, h.model_name AS model, h.model_deployment, a.mean_win_rate AS win_rate
    FROM headline_cells h
    JOIN row_aggregates a ON a.table_id = h.table_id AND a.row_pos = h.row_pos
),
ranked AS (
    SELECT *, CASE WHEN win_rate IS NOT NULL THEN rank() OVER (ORDER BY win_rate DESC NULLS LAST) END AS rank
    FROM models
),
sorted AS (
    SELECT row_pos, count(*) AS n_resamples, list_sort(list(mean_win_rate)) AS w, list_sort(list(rank)) AS r,
           (count(*) - 1) * (SELECT alpha FROM settings) / 2 AS h_low,
           (count(*) - 1) * (1 - (SELECT alpha FROM settings) / 2) AS h_high
    FROM win_rate_resamples GROUP BY ALL
),
bounds AS (
    SELECT row_pos, n_resamples,
           w[CAST(floor(h_low) AS BIGINT) + 1] + (h_low - floor(h_low))
               * (w[least(CAST(floor(h_low) AS BIGINT) + 2, n_resamples)] - w[CAST(floor(h_low) AS BIGINT) + 1]) AS win_rate_low,
           w[CAST(floor(h_high) AS BIGINT) + 1] + (h_high - floor(h_high))
               * (w[least(CAST(floor(h_high) AS BIGINT) + 2, n_resamples)] - w[CAST(floor(h_high) AS BIGINT) + 1]) AS win_rate_high,
           r[CAST(floor(h_low) AS BIGINT) + 1] + (h_low - floor(h_low))
               * (r[least(CAST(floor(h_low) AS BIGINT) + 2, n_resamples)] - r[CAST(floor(h_low) AS BIGINT) + 1]) AS rank_low_exact,
           r[CAST(floor(h_high) AS BIGINT) + 1] + (h_high - floor(h_high))
               * (r[least(CAST(floor(h_high) AS BIGINT) + 2, n_resamples)] - r[CAST(floor(h_high) AS BIGINT) + 1]) AS rank_high_exact
    FROM sorted
)
SELECT m.row_pos, m.model, m.model_deployment, m.win_rate, b.win_rate_low, b.win_rate_high,
       CAST(m.rank AS INTEGER) AS rank, CAST(floor(b.rank_low_exact) AS INTEGER) AS rank_low,
       CAST(ceil(b.rank_high_exact) AS INTEGER) AS rank_high, b.n_resamples
FROM ranked m LEFT JOIN bounds b USING (row_pos)
ORDER BY m.row_pos;
