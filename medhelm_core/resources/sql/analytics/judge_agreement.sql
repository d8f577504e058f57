-- depends_on: judge_scores, human_ratings
-- Agreement of two raters on a jury benchmark's criterion: every pair of its judges, and, where
-- human ratings were given (human_ratings), each judge and the jury (the judges' mean) against the
-- humans.  Over the (run, instance) pairs both rated:
--   icc  ICC(2,1), two-way random effects, absolute agreement, single rater (Shrout & Fleiss):
--        (MSR - MSE) / (MSR + MSE + 2 (MSC - MSE) / n) for two raters;
--   mad  the mean absolute difference of their scores.
CREATE OR REPLACE TABLE judge_agreement AS
WITH judged AS (
    SELECT suite, run_name, instance_id, benchmark, criterion, judge AS rater, score
    FROM judge_scores WHERE NOT failed AND score IS NOT NULL
),
jury AS (
    SELECT suite, run_name, instance_id, benchmark, criterion, 'jury' AS rater, avg(score) AS score
    FROM judged GROUP BY ALL
),
human AS (
    SELECT DISTINCT j.suite, j.run_name, j.instance_id, j.benchmark, j.criterion, 'human' AS rater, h.rating AS score
    FROM jury j
    JOIN human_ratings h ON h.instance_id = j.instance_id AND h.criterion = j.criterion
                        AND (coalesce(h.run_name, '') = '' OR h.run_name = j.run_name)
),
raters AS (SELECT * FROM judged UNION ALL SELECT * FROM jury UNION ALL SELECT * FROM human),
pairs AS (
    SELECT a.benchmark, a.criterion, a.rater AS rater_a, b.rater AS rater_b, a.score AS x, b.score AS y
    FROM raters a
    JOIN raters b ON a.suite = b.suite AND a.run_name = b.run_name AND a.instance_id = b.instance_id
                 AND a.benchmark = b.benchmark AND a.criterion = b.criterion
    WHERE (a.rater < b.rater AND a.rater NOT IN ('jury', 'human') AND b.rater NOT IN ('jury', 'human'))
       OR (b.rater = 'human' AND a.rater <> 'human')
),
stats AS (
    SELECT benchmark, criterion, rater_a, rater_b, count(*) AS n,
           avg(abs(x - y)) AS mad,
           avg((x + y) / 2) AS grand,
           avg(x) AS mean_a, avg(y) AS mean_b,
           sum(pow((x + y) / 2, 2)) AS sum_row_sq, sum(x * x + y * y) AS sum_sq
    FROM pairs GROUP BY ALL
),
squares AS (   -- two raters: SSR = 2 Σ (r_i - M)^2, SSC = n Σ_j (c_j - M)^2, SST = Σ (x - M)^2
    SELECT *, 2 * (sum_row_sq - n * grand * grand) AS ssr,
           n * (pow(mean_a - grand, 2) + pow(mean_b - grand, 2)) AS ssc,
           sum_sq - 2 * n * grand * grand AS sst
    FROM stats
),
means AS (
    SELECT *, ssr / nullif(n - 1, 0) AS msr, ssc AS msc, (sst - ssr - ssc) / nullif(n - 1, 0) AS mse
    FROM squares
)
SELECT benchmark, criterion, rater_a, rater_b, n, mad,
       (msr - mse) / nullif(msr + mse + 2 * (msc - mse) / n, 0) AS icc
FROM means
ORDER BY benchmark, criterion, rater_a, rater_b;
