-- depends_on: table_rows, table_columns, table_row_runs, target_runs, run_matcher_stats, group_tables
-- Every value cell: HELM's create_cell over the row's visible runs that belong to the column's
-- group.  Per-run stats are merged in row order: value = Σsum/Σcount (NULL when Σcount = 0),
-- min/max over runs, "(N)" = Σcount.  n_runs = 0 -> "No matching runs"; n_matched = 0 ->
-- "<n_runs> matching runs, but no matching metrics".  run_spec_names: de-duplicated merged runs
-- (HELM shows them only outside scenario tables).  hide_value reproduces HELM's logprob hack;
-- is_best marks HELM's bold (best non-null value of a column with lower_is_better set).
CREATE OR REPLACE TABLE table_cells AS
WITH grid AS (
    SELECT r.table_id, r.row_pos, r.model_name, c.col_idx, c.column_group, c.matcher_name, c.matcher_split,
           c.matcher_sub_split, c.matcher_perturbation, c.lower_is_better
    FROM table_rows r JOIN table_columns c USING (table_id)
),
entries AS (
    SELECT g.table_id, g.row_pos, g.col_idx, e.entry_pos, e.run_id, e.run_name,
           s.run_id IS NOT NULL AS matched, s.pooled, s.stat_count, s.stat_sum, s.stat_min, s.stat_max, s.first_mean
    FROM grid g
    JOIN table_rows r ON r.table_id = g.table_id AND r.row_pos = g.row_pos
    JOIN group_tables t ON t.table_id = g.table_id
    JOIN table_row_runs e
      ON e.table_id = g.table_id AND e.visible
     AND e.model IS NOT DISTINCT FROM r.model AND e.model_deployment IS NOT DISTINCT FROM r.model_deployment
    JOIN target_runs tr ON tr.run_id = e.run_id
    LEFT JOIN run_matcher_stats s
      ON s.run_id = e.run_id AND s.matcher_name = g.matcher_name AND s.matcher_split = g.matcher_split
     AND s.matcher_sub_split IS NOT DISTINCT FROM g.matcher_sub_split
     AND s.matcher_perturbation IS NOT DISTINCT FROM g.matcher_perturbation
    WHERE list_contains(tr.groups, g.column_group)
      -- HELM's bAbI hack: aggregate bAbI columns use only the task=all runs
      AND NOT (contains(g.column_group, 'babi') AND NOT contains(t.table_name, 'task:')
               AND NOT contains(e.run_name, 'task=all'))
),
first_names AS (
    SELECT table_id, row_pos, col_idx, run_name, min(entry_pos) AS p
    FROM entries WHERE matched GROUP BY ALL
),
names AS (
    SELECT table_id, row_pos, col_idx, list(run_name ORDER BY p) AS run_spec_names
    FROM first_names GROUP BY ALL
),
agg AS (
    SELECT table_id, row_pos, col_idx,
           count(*) AS n_runs,
           count(*) FILTER (WHERE matched) AS n_matched,
           bool_and(pooled) FILTER (WHERE matched) AS pooled,
           sum(stat_count) FILTER (WHERE matched) AS stat_count,
           list_reduce(list(stat_sum ORDER BY entry_pos) FILTER (WHERE matched), lambda a, b: a + b) AS stat_sum,
           min(stat_min) AS stat_min,
           max(stat_max) AS stat_max,
           arg_min_null(first_mean, entry_pos) FILTER (WHERE matched) AS first_mean
    FROM entries GROUP BY ALL
),
cells AS (
    SELECT g.table_id, g.row_pos, g.col_idx, g.lower_is_better,
           coalesce(a.n_runs, 0) AS n_runs, coalesce(a.n_matched, 0) AS n_matched,
           a.stat_count, a.stat_sum, a.stat_min, a.stat_max,
           CASE WHEN coalesce(a.n_matched, 0) = 0 THEN NULL
                WHEN a.stat_count > 0 AND (a.n_matched > 1 OR a.pooled) THEN a.stat_sum / CAST(a.stat_count AS DOUBLE)
                WHEN NOT a.pooled THEN a.first_mean
           END AS stat_mean,
           (g.model_name IN ('anthropic/stanford-online-all-v4-s3', 'meta/llama-7b', 'meta/llama-13b',
                             'meta/llama-30b', 'meta/llama-65b', 'meta/llama-2-7b', 'meta/llama-2-13b',
                             'meta/llama-2-70b')
            AND g.matcher_name IN ('NDCG@10', 'RR@10', 'NDCG@20', 'RR@20', 'ece_1_bin', 'ece_10_bin',
                                   'platt_ece_1_bin', 'platt_ece_10_bin', 'platt_coef', 'platt_intercept',
                                   'selective_cov_acc_area', 'selective_acc@10')) AS hide_value,
           n.run_spec_names
    FROM grid g
    LEFT JOIN agg a USING (table_id, row_pos, col_idx)
    LEFT JOIN names n USING (table_id, row_pos, col_idx)
),
valued AS (
    SELECT *, CASE WHEN hide_value THEN NULL ELSE stat_mean END AS value FROM cells
)
SELECT table_id, row_pos, col_idx, value, n_runs, n_matched, stat_count, stat_sum, stat_min, stat_max, stat_mean,
       hide_value, coalesce(run_spec_names, []) AS run_spec_names,
       lower_is_better IS NOT NULL AND value IS NOT NULL
       AND value = CASE WHEN lower_is_better THEN min(value) OVER w ELSE max(value) OVER w END AS is_best
FROM valued
WINDOW w AS (PARTITION BY table_id, col_idx);
