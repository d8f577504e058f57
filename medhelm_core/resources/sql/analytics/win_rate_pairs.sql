-- depends_on: headline_cells, win_rate_resamples
-- For every ordered pair of models of the headline table: the share of bootstrap resamples in which
-- the first's mean win rate exceeds the second's (ties count half).
CREATE OR REPLACE TABLE win_rate_pairs AS
WITH models AS (SELECT DISTINCT row_pos, model_name AS model FROM headline_cells)
SELECT a.row_pos, ma.model, b.row_pos AS other_row_pos, mb.model AS other_model,
       avg(CASE WHEN a.mean_win_rate > b.mean_win_rate THEN 1.0
                WHEN a.mean_win_rate = b.mean_win_rate THEN 0.5 ELSE 0.0 END) AS p_higher,
       count(*) AS n_resamples
FROM win_rate_resamples a
JOIN win_rate_resamples b ON a.b = b.b AND a.row_pos <> b.row_pos
JOIN models ma ON ma.row_pos = a.row_pos
JOIN models mb ON mb.row_pos = b.row_pos
GROUP BY ALL
ORDER BY a.row_pos, b.row_pos;
