-- depends_on: headline_cells, table_rows, row_aggregates, jury_metrics
-- The MedHELM paper's summary table, per model of the headline table (the first win-rate table of
-- the first group: MedHELM's "Accuracy" over every benchmark, one column each):
--   win_rate   the leaderboard's mean win rate (row_aggregates);
--   win_sd     population SD, over the other models, of the fraction of complete columns (every
--              model has a value) where this model is strictly better (greater, or smaller where
--              lower_is_better);
--   macro_avg  mean of the model's non-null column values, 1-5 Likert columns rescaled to (x - 1) / 4;
--   sd         their sample SD.
-- Likert columns: those whose metric an LLM jury scores (jury_metrics).
CREATE OR REPLACE TABLE model_summary AS
WITH cells AS (
    SELECT table_id, row_pos, col_idx, value, coalesce(lower_is_better, false) AS lower_is_better,
           metric IN (SELECT metric FROM jury_metrics) AS likert
    FROM headline_cells
),
complete AS (
    SELECT col_idx FROM cells GROUP BY col_idx HAVING count(value) = count(*)
),
beats AS (     -- per ordered pair of models: the fraction of complete columns where a beats b
    SELECT a.row_pos, b.row_pos AS other,
           avg(CASE WHEN (a.value > b.value AND NOT a.lower_is_better) OR (a.value < b.value AND a.lower_is_better)
                    THEN 1.0 ELSE 0.0 END) AS fraction
    FROM cells a JOIN cells b ON a.col_idx = b.col_idx AND a.row_pos <> b.row_pos
    WHERE a.col_idx IN (SELECT col_idx FROM complete)
    GROUP BY ALL
),
spread AS (
    SELECT row_pos, stddev_pop(fraction) AS win_sd FROM beats GROUP BY ALL
),
scaled AS (
    SELECT row_pos, count(value) AS n_values, count(value) FILTER (WHERE likert) AS n_likert,
           avg(CASE WHEN likert THEN (value - 1) / 4 ELSE value END) AS macro_avg,
           stddev_samp(CASE WHEN likert THEN (value - 1) / 4 ELSE value END) AS sd
    FROM cells GROUP BY ALL
)
SELECT r.row_pos, r.display_name AS model, r.model_deployment, a.mean_win_rate AS win_rate, s.win_sd,
       (SELECT count(*) FROM complete) AS n_complete_columns, x.macro_avg, x.sd, x.n_values, x.n_likert
FROM table_rows r
LEFT JOIN row_aggregates a ON a.table_id = r.table_id AND a.row_pos = r.row_pos
LEFT JOIN spread s ON s.row_pos = r.row_pos
LEFT JOIN scaled x ON x.row_pos = r.row_pos
WHERE r.table_id = (SELECT DISTINCT table_id FROM headline_cells)
ORDER BY r.row_pos;
