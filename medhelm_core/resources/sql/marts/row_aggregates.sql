-- depends_on: table_rows, table_cells, table_columns, group_tables, column_win_rates
-- Aggregate columns of each row.
-- mean_win_rate: HELM takes statistics.mean() of the row's column win rates, i.e. the exact
--   rational mean rounded once to a double.  We reproduce it bit for bit in SQL: every win rate
--   w is a multiple of 2^-80 (true while a column has < 2^27 rows), so W = w * 2^80 is an exact
--   HUGEINT (split in two 40-bit halves); S = ΣW is exact; the mean S / (m * 2^80) is then
--   rounded to 53 significant bits with integer division and round-half-to-even.
--   `mean_win_rate_exact` is false only if that precondition fails (then AVG is used).
-- mean_score: HELM's compute_aggregate_row_means (running float sum over the row's non-null
--   cells, in column order); `mean_score_invalid` when the columns' lower_is_better differ
--   (HELM raises).
-- Bold (is_best): best non-null mean win rate of the table (lower_is_better = false).
CREATE OR REPLACE TABLE row_aggregates AS
WITH wr AS (
    SELECT table_id, row_pos, win_rate AS w, floor(win_rate * pow(2, 40)) AS hi_d,
           (win_rate * pow(2, 40) - floor(win_rate * pow(2, 40))) * pow(2, 40) AS lo_d
    FROM column_win_rates
),
parts AS (
    SELECT table_id, row_pos, count(*) AS m, avg(w) AS avg_w,
           sum(CAST(hi_d AS HUGEINT) * CAST(1099511627776 AS HUGEINT) + CAST(lo_d AS HUGEINT)) AS s,
           bool_and(lo_d = floor(lo_d) AND w >= 0 AND w <= 1) AS exact_ok
    FROM wr GROUP BY ALL
),
est AS (   -- e0 ~ floor(log2(mean)); the exact exponent is e0 - 1, e0 or e0 + 1
    SELECT *, CAST(floor(log2(CAST(s AS DOUBLE) / CAST(m AS DOUBLE))) AS INTEGER) - 80 AS e0
    FROM parts WHERE s > 0
),
cand AS (  -- q = floor(mean * 2^(52 - e)) = floor(s * 2^k / m), k = 52 - e - 80
    SELECT table_id, row_pos, s, m, e, -28 - e AS k
    FROM est, LATERAL (SELECT unnest([est.e0 - 1, est.e0, est.e0 + 1]) AS e)
),
qr AS (
    SELECT table_id, row_pos, e,
        CASE WHEN k >= 0 THEN s * (CAST(1 AS HUGEINT) << k) ELSE s END AS num,
        CASE WHEN k >= 0 THEN CAST(m AS HUGEINT) ELSE CAST(m AS HUGEINT) << (-k) END AS den
    FROM cand
),
rounded AS (
    SELECT table_id, row_pos, e, num // den AS q, num % den AS r, den
    FROM qr
    WHERE num // den >= (CAST(1 AS HUGEINT) << 52) AND num // den < (CAST(1 AS HUGEINT) << 53)
),
exact_mean AS (
    SELECT p.table_id, p.row_pos, p.m, p.exact_ok,
        CASE WHEN NOT p.exact_ok THEN p.avg_w
             WHEN p.s = 0 THEN CAST(0 AS DOUBLE)
             ELSE CAST(x.q + CASE WHEN 2 * x.r > x.den OR (2 * x.r = x.den AND x.q % 2 = 1) THEN 1 ELSE 0 END
                       AS DOUBLE) * pow(2, x.e - 52)
        END AS mean_win_rate
    FROM parts p LEFT JOIN rounded x USING (table_id, row_pos)
),
score_cells AS (
    SELECT c.table_id, c.row_pos, c.col_idx, c.value
    FROM table_cells c JOIN group_tables t USING (table_id)
    WHERE list_contains(t.aggregation_strategies, 'mean')
),
scores AS (
    SELECT table_id, row_pos, count(value) AS n_scored,
           list_reduce(list(value ORDER BY col_idx) FILTER (WHERE value IS NOT NULL),
                       lambda a, b: a + b, CAST(0 AS DOUBLE)) AS total
    FROM score_cells GROUP BY ALL
),
score_validity AS (
    SELECT table_id, count(DISTINCT coalesce(CAST(lower_is_better AS VARCHAR), 'null')) <> 1 AS invalid
    FROM table_columns GROUP BY ALL
),
rows AS (
    SELECT r.table_id, r.row_pos, t.aggregation_strategies,
           em.mean_win_rate, coalesce(em.m, 0) AS n_win_rate_columns, coalesce(em.exact_ok, true) AS mean_win_rate_exact,
           CASE WHEN sc.n_scored > 0 THEN sc.total / CAST(sc.n_scored AS DOUBLE) END AS mean_score,
           coalesce(sv.invalid, true) AS mean_score_invalid
    FROM table_rows r
    JOIN group_tables t USING (table_id)
    LEFT JOIN exact_mean em USING (table_id, row_pos)
    LEFT JOIN scores sc USING (table_id, row_pos)
    LEFT JOIN score_validity sv USING (table_id)
)
SELECT *,
       mean_win_rate IS NOT NULL
       AND mean_win_rate = max(mean_win_rate) OVER (PARTITION BY table_id) AS mean_win_rate_is_best
FROM rows;
