-- The leaderboard cells and mean win rates of two editions' suites, side by side: every cell of every
-- table both suites' summaries have (`leaderboard.*`: each summarized target's tables, kept by
-- medhelm_core.summarize.kept), `moved` when its value differs. Needs both suites summarized
-- (`medhelm-summarize --suite S`); (re)created by the kept-tables step after each summarize.
CREATE OR REPLACE VIEW edition_diff_cells AS
WITH raw AS (
    SELECT c.target, g.group_name, g.table_name, r.model_deployment, r.model, r.display_name,
           col.header_value AS column_name, col.matcher_name AS metric, c.value, g.table_pos, c.col_idx
    FROM leaderboard.table_cells c
    JOIN leaderboard.group_tables g ON g.target = c.target AND g.table_id = c.table_id
    JOIN leaderboard.table_rows r ON r.target = c.target AND r.table_id = c.table_id AND r.row_pos = c.row_pos
    JOIN leaderboard.table_columns col ON col.target = c.target AND col.table_id = c.table_id
         AND col.col_idx = c.col_idx
    UNION ALL
    SELECT a.target, g.group_name, g.table_name, r.model_deployment, r.model, r.display_name,
           'Mean win rate', NULL, a.mean_win_rate, g.table_pos, -1
    FROM leaderboard.row_aggregates a
    JOIN leaderboard.group_tables g ON g.target = a.target AND g.table_id = a.table_id
    JOIN leaderboard.table_rows r ON r.target = a.target AND r.table_id = a.table_id AND r.row_pos = a.row_pos),
-- A table may repeat a header (a scenario table's EM per sub-split, ...), and tables may share a name:
-- the n-th occurrence of a (table, model, column) pairs with the other side's n-th.
cells AS (
    SELECT *, row_number() OVER (PARTITION BY target, group_name, table_name, model_deployment, model,
                                              column_name, metric ORDER BY table_pos, col_idx) AS occurrence
    FROM raw),
keys AS (
    SELECT DISTINCT p.suite_a, p.suite_b, c.group_name, c.table_name, c.model_deployment, c.model,
           c.display_name, c.column_name, c.metric, c.occurrence
    FROM edition_pairs p JOIN cells c ON c.target IN (p.suite_a, p.suite_b))
SELECT p.suite_a, p.edition_a, p.suite_b, p.edition_b, k.group_name, k.table_name, k.display_name,
       k.model_deployment, k.model, k.column_name, k.metric, k.occurrence, a.value AS value_a, b.value AS value_b,
       b.value - a.value AS diff, a.value IS DISTINCT FROM b.value AS moved
FROM keys k
JOIN edition_pairs p ON p.suite_a = k.suite_a AND p.suite_b = k.suite_b
LEFT JOIN cells a ON a.target = k.suite_a AND a.group_name = k.group_name AND a.table_name = k.table_name
     AND a.model_deployment IS NOT DISTINCT FROM k.model_deployment AND a.model IS NOT DISTINCT FROM k.model
     AND a.column_name = k.column_name AND a.metric IS NOT DISTINCT FROM k.metric
     AND a.occurrence = k.occurrence
LEFT JOIN cells b ON b.target = k.suite_b AND b.group_name = k.group_name AND b.table_name = k.table_name
     AND b.model_deployment IS NOT DISTINCT FROM k.model_deployment AND b.model IS NOT DISTINCT FROM k.model
     AND b.column_name = k.column_name AND b.metric IS NOT DISTINCT FROM k.metric
     AND b.occurrence = k.occurrence;
