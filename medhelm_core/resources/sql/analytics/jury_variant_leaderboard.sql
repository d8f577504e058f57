-- depends_on: headline_cells, table_cells, jury_variant_scores
-- The main table's mean win rate under each jury variant (jury_variant_scores): the headline table
-- (the first win-rate table of the first group, MedHELM's "Accuracy") with each jury column's cells
-- recomputed from the variant's scores of the cell's runs (table_cells' run_spec_names, the runs the
-- cell merged: Σ score_sum / Σ n_instances of those runs for the column's metric, rounded to 12
-- decimals so that equal scores tie), every other cell as it is. Under `all` every cell keeps the
-- leaderboard's own value; so does a jury cell whose jury lacks the variant's judge (or holds one
-- judge only) or whose runs' verdicts are not at hand (a release imported without its completions,
-- summarized beside our own suite). Then, as the leaderboard does (column_win_rates, row_aggregates): per
-- column with lower_is_better set and >= 2 values, (#worse + (#tied - 1) / 2) / (n - 1), their mean
-- per model, and rank 1 for the highest (ties share the best rank); `rank_all`: the rank under `all`.
CREATE OR REPLACE TABLE jury_variant_leaderboard AS
WITH headline AS (
    SELECT h.*, c.run_spec_names
    FROM headline_cells h
    JOIN table_cells c ON c.table_id = h.table_id AND c.row_pos = h.row_pos AND c.col_idx = h.col_idx
    WHERE h.value IS NOT NULL AND h.lower_is_better IS NOT NULL
),
cell_runs AS (
    SELECT row_pos, col_idx, metric, unnest(run_spec_names) AS run_name FROM headline
),
variant_cells AS (
    SELECT r.row_pos, r.col_idx, s.variant, round(sum(s.score_sum) / sum(s.n_instances), 12) AS value
    FROM cell_runs r
    JOIN jury_variant_scores s ON s.run_name = r.run_name AND s.metric = r.metric
    GROUP BY ALL
),
variants AS (SELECT DISTINCT target, variant FROM jury_variant_scores),
cells AS (
    SELECT v.target, v.variant, h.row_pos, h.col_idx, h.lower_is_better, x.value IS NOT NULL AS recomputed,
           CASE WHEN v.variant = 'all' THEN h.value ELSE coalesce(x.value, h.value) END AS value
    FROM headline h
    CROSS JOIN variants v
    LEFT JOIN variant_cells x ON x.row_pos = h.row_pos AND x.col_idx = h.col_idx AND x.variant = v.variant
),
scored AS (
    SELECT *,
        count(*) OVER (PARTITION BY variant, col_idx) AS n,
        count(*) OVER (PARTITION BY variant, col_idx, value) AS ties,
        CASE WHEN lower_is_better
             THEN count(*) OVER (PARTITION BY variant, col_idx ORDER BY value DESC RANGE BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW)
             ELSE count(*) OVER (PARTITION BY variant, col_idx ORDER BY value ASC RANGE BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW)
        END AS at_most
    FROM cells
),
rates AS (
    SELECT target, variant, row_pos,
           avg((CAST(at_most - ties AS DOUBLE) + CAST(ties - 1 AS DOUBLE) / 2) / CAST(n - 1 AS DOUBLE))
               FILTER (WHERE n >= 2) AS mean_win_rate,
           count(*) FILTER (WHERE recomputed) AS jury_columns
    FROM scored GROUP BY ALL
),
ranked AS (
    SELECT *, CASE WHEN mean_win_rate IS NOT NULL
                   THEN rank() OVER (PARTITION BY variant ORDER BY mean_win_rate DESC NULLS LAST) END AS rank
    FROM rates
),
models AS (SELECT DISTINCT row_pos, model_name, model_deployment, model FROM headline_cells)
SELECT r.target, r.variant, r.row_pos, m.model_deployment, m.model, m.model_name,
       r.mean_win_rate, r.rank, a.rank AS rank_all, r.jury_columns
FROM ranked r
JOIN models m ON m.row_pos = r.row_pos
LEFT JOIN ranked a ON a.variant = 'all' AND a.row_pos = r.row_pos
ORDER BY r.variant, r.row_pos;
