-- depends_on: headline_cells, cell_instances, cell_resamples, analytics_settings
-- For every benchmark of the headline table and every pair of its models (first = the higher row):
--   diff            the difference of their cells (first minus second);
--   p_value         two-sided paired bootstrap p-value of that difference: twice the smaller share of
--                   resamples (cell_resamples: the same instance draws for both) whose difference is
--                   <= 0 or >= 0, at most 1;
--   n_paired        instances both models have a value on;
--   sd_diff         sample SD of the per-instance differences;
--   mdd             the minimum detectable difference at alpha and power (analytics_settings; 0.05, 0.8):
--                   (z_{1-alpha/2} + z_{power}) * sd_diff / sqrt(n_paired), the normal quantiles by
--                   Abramowitz & Stegun 26.2.23 (|error| < 4.5e-4).
CREATE OR REPLACE TABLE pairwise_significance AS
WITH settings AS (
    SELECT coalesce(max(alpha), 0.05) AS alpha, coalesce(max(power), 0.8) AS power FROM analytics_settings
),
tails AS (SELECT alpha / 2 AS p1, 1 - power AS p2 FROM settings),
z AS (   -- z_{1-p} for p in (0, 0.5]
    SELECT list_transform([p1, p2], lambda p: sqrt(-2 * ln(p)) - (2.515517 + 0.802853 * sqrt(-2 * ln(p))
                                   + 0.010328 * (-2 * ln(p)))
                                  / (1 + 1.432788 * sqrt(-2 * ln(p)) + 0.189269 * (-2 * ln(p))
                                     + 0.001308 * pow(sqrt(-2 * ln(p)), 3))) AS zs
    FROM tails
),
cells AS (
    SELECT DISTINCT benchmark, metric, row_pos, model_name, model_deployment, model, value
    FROM headline_cells WHERE value IS NOT NULL
),
pairs AS (
    SELECT a.benchmark, a.metric, a.row_pos, a.model_name AS model, b.row_pos AS other_row_pos,
           b.model_name AS other_model, a.value - b.value AS diff,
           a.model_deployment AS dep_a, a.model AS mod_a, b.model_deployment AS dep_b, b.model AS mod_b
    FROM cells a JOIN cells b ON a.benchmark = b.benchmark AND a.row_pos < b.row_pos
),
boot AS (
    SELECT p.benchmark, p.row_pos, p.other_row_pos, count(*) AS n_resamples,
           avg(CASE WHEN ra.value - rb.value <= 0 THEN 1.0 ELSE 0.0 END) AS le0,
           avg(CASE WHEN ra.value - rb.value >= 0 THEN 1.0 ELSE 0.0 END) AS ge0
    FROM pairs p
    JOIN cell_resamples ra ON ra.benchmark = p.benchmark AND ra.model_deployment IS NOT DISTINCT FROM p.dep_a
                          AND ra.model IS NOT DISTINCT FROM p.mod_a
    JOIN cell_resamples rb ON rb.benchmark = p.benchmark AND rb.b = ra.b
                          AND rb.model_deployment IS NOT DISTINCT FROM p.dep_b AND rb.model IS NOT DISTINCT FROM p.mod_b
    WHERE ra.value IS NOT NULL AND rb.value IS NOT NULL
    GROUP BY ALL
),
paired AS (
    SELECT p.benchmark, p.row_pos, p.other_row_pos, count(*) AS n_paired,
           stddev_samp(ia.s / ia.c - ib.s / ib.c) AS sd_diff
    FROM pairs p
    JOIN cell_instances ia ON ia.benchmark = p.benchmark AND ia.model_deployment IS NOT DISTINCT FROM p.dep_a
                          AND ia.model IS NOT DISTINCT FROM p.mod_a
    JOIN cell_instances ib ON ib.benchmark = p.benchmark AND ib.instance_id = ia.instance_id
                          AND ib.model_deployment IS NOT DISTINCT FROM p.dep_b AND ib.model IS NOT DISTINCT FROM p.mod_b
    WHERE ia.c > 0 AND ib.c > 0
    GROUP BY ALL
)
SELECT p.benchmark, p.metric, p.row_pos, p.model, p.other_row_pos, p.other_model, p.diff,
       least(1.0, 2 * least(b.le0, b.ge0)) AS p_value, b.n_resamples, d.n_paired, d.sd_diff,
       (z.zs[1] + z.zs[2]) * d.sd_diff / sqrt(d.n_paired) AS mdd
FROM pairs p
LEFT JOIN boot b USING (benchmark, row_pos, other_row_pos)
LEFT JOIN paired d USING (benchmark, row_pos, other_row_pos)
CROSS JOIN z
ORDER BY p.benchmark, p.row_pos, p.other_row_pos;
