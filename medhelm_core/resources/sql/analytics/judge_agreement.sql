-- depends_on: target_runs, judge_scores, instance_stats, human_ratings, analytics_settings
-- Agreement with clinicians (the MedHELM paper's jury-clinician comparison). An item is (dataset_name,
-- model_key, instance_id): the jury's benchmark (its annotator, the jury metric's scenario_name), the
-- run's model with '/' as '_', the instance; its run is the first of the target, in read order, whose
-- jury scored it. Per dimension (accuracy, completeness, clarity) each rater's value x of an item is
-- paired with y, the mean of the clinicians' ratings of the item (human_ratings), over the items
-- both have:
--   <judge>       the judge's criterion score (the mean of its verdicts for the item: one in MedHELM);
--   jury          the mean of its judges' scores;
--   clinicians    the human baseline: x, y = the first two ratings of the item in file order (items
--                 with two ratings or more);
--   rouge_l, BERTScore-F  the run's per-instance stat (instance_stats), where the runs have it.
-- Statistics of the n pairs:
--   icc3k     ICC(3,k) (McGraw & Wong's ICC(C,k)) and
--   icc2_1    ICC(2,1) (their ICC(A,1)), both of the two columns each z-scored over the items (population
--             SD). Z-scored, the two-way ANOVA has SSC = 0, SST = 2n, SSR = n(1 + r), SSE = n(1 - r), r
--             being Pearson's r of x and y, so ICC(3,k) = (MSR - MSE) / MSR = 2r / (1 + r) and
--             ICC(2,1) = (MSR - MSE) / (MSR + MSE + 2 (MSC - MSE) / n) = n r / (n - 1 + r);
--   spearman  Spearman's rho: Pearson's r of the average ranks (ties share the mean of their ranks);
--   kappa_w   Cohen's kappa with quadratic weights (a - b)^2 on the values rounded half up to integers
--             (floor(v + 0.5)): 1 - sum (a - b)^2 / (sum a^2 + sum b^2 - 2 sum a sum b / n), i.e. observed
--             over chance disagreement (scikit-learn's cohen_kappa_score(weights='quadratic') with every
--             integer from the smallest to the largest as labels). Not for rouge_l and BERTScore-F,
--             whose values are not on the 1-5 scale.
-- NULL where undefined (a column without variance, fewer than two items). ci_low / ci_high: percentile
-- bootstrap over items: B resamples (analytics_settings, default 1,000) each draw n of the n items
-- (ordered by dataset_name, model_key, instance_id) with replacement, the k-th draw (k = 0..n-1) of
-- resample b (1..B) being item hash(seed, b, k) % n + 1 (DuckDB's hash of three BIGINTs; seed from
-- analytics_settings, default 0); the statistic is recomputed on each (z-scores and ranks within the
-- resample) and the interval is the alpha/2 and 1 - alpha/2 quantiles (alpha default 0.05) of the
-- defined ones, interpolated linearly as numpy's default percentile. Every statistic is rounded to 12
-- decimals, so that the same data gives the same bits whatever order DuckDB adds them in.
CREATE OR REPLACE TABLE judge_agreement AS
WITH settings AS (
    SELECT coalesce(max(bootstrap_samples), 1000) AS b, CAST(coalesce(max(seed), 0) AS BIGINT) AS seed,
           coalesce(max(alpha), 0.05) AS alpha
    FROM analytics_settings
),
runs AS (
    SELECT target, run_id, suite, run_name, replace(model, '/', '_') AS model_key FROM target_runs
),
judged AS (   -- each judge's score of an item on a dimension, per run of the target that holds it
    SELECT r.target, r.run_id, s.benchmark AS dataset_name, r.model_key, s.instance_id, s.judge,
           s.criterion AS dimension, avg(s.score) AS score
    FROM judge_scores s JOIN runs r ON r.suite = s.suite AND r.run_name = s.run_name
    WHERE NOT s.failed AND s.score IS NOT NULL AND s.criterion IN ('accuracy', 'completeness', 'clarity')
    GROUP BY ALL
),
items AS (    -- the item's run: the first that judged it (a run read twice, or the same item in two suites, once)
    SELECT target, dataset_name, model_key, instance_id, min(run_id) AS run_id FROM judged GROUP BY ALL
),
ratings AS (  -- one row per clinician rating of an item on a dimension
    SELECT * FROM (
        SELECT h.dataset_name, h.model_key, h.instance_id, h.file_row, d.dimension,
               CASE d.dimension WHEN 'accuracy' THEN h.accuracy WHEN 'completeness' THEN h.completeness
                                ELSE h.clarity END AS rating
        FROM human_ratings h CROSS JOIN (VALUES ('accuracy'), ('completeness'), ('clarity')) d(dimension))
    WHERE rating IS NOT NULL
),
rated AS (    -- the target's items the clinicians rated: the mean rating, and the ratings in file order
    SELECT i.target, i.run_id, i.dataset_name, i.model_key, i.instance_id, r.dimension,
           avg(r.rating) AS clinicians, list(r.rating ORDER BY r.file_row) AS in_order
    FROM items i JOIN ratings r ON r.dataset_name = i.dataset_name AND r.model_key = i.model_key
                               AND r.instance_id = i.instance_id
    GROUP BY ALL
),
item_judges AS (
    SELECT j.target, j.dataset_name, j.model_key, j.instance_id, j.dimension, j.judge, j.score
    FROM judged j JOIN items i ON i.target = j.target AND i.dataset_name = j.dataset_name
                              AND i.model_key = j.model_key AND i.instance_id = j.instance_id AND i.run_id = j.run_id
),
metrics AS (  -- the reference-based metrics the paper compares, per instance of the item's run
    SELECT i.target, i.dataset_name, i.model_key, i.instance_id, x.name AS rater, avg(x.mean) AS value
    FROM items i
    JOIN target_runs t ON t.run_id = i.run_id
    JOIN instance_stats x ON x.suite = t.suite AND x.run_name = t.run_name AND x.instance_id = i.instance_id
    WHERE x.name IN ('rouge_l', 'BERTScore-F') AND x.perturbation IS NULL AND x.mean IS NOT NULL
    GROUP BY ALL
),
pairs AS (
    SELECT r.target, j.judge AS rater, r.dimension, r.dataset_name, r.model_key, r.instance_id,
           j.score AS x, r.clinicians AS y
    FROM rated r JOIN item_judges j USING (target, dataset_name, model_key, instance_id, dimension)
    UNION ALL
    SELECT r.target, 'jury', r.dimension, r.dataset_name, r.model_key, r.instance_id, avg(j.score), any_value(r.clinicians)
    FROM rated r JOIN item_judges j USING (target, dataset_name, model_key, instance_id, dimension)
    GROUP BY ALL
    UNION ALL
    SELECT target, 'clinicians', dimension, dataset_name, model_key, instance_id, in_order[1], in_order[2]
    FROM rated WHERE len(in_order) >= 2
    UNION ALL
    SELECT r.target, m.rater, r.dimension, r.dataset_name, r.model_key, r.instance_id, m.value, r.clinicians
    FROM rated r JOIN metrics m USING (target, dataset_name, model_key, instance_id)
),
groups AS (   -- each comparison's items as two vectors, in item order; g numbers the comparisons
    SELECT row_number() OVER (ORDER BY target, rater, dimension) AS g, *
    FROM (SELECT target, rater, dimension, count(*) AS n,
                 list(x ORDER BY dataset_name, model_key, instance_id) AS xs,
                 list(y ORDER BY dataset_name, model_key, instance_id) AS ys
          FROM pairs GROUP BY ALL)
),
draws AS (
    SELECT z.n, r.b, list_transform(range(z.n), lambda k: CAST(hash(st.seed, r.b, k) % z.n AS BIGINT) + 1) AS picks
    FROM (SELECT DISTINCT n FROM groups) z
    CROSS JOIN settings st
    CROSS JOIN (SELECT unnest(range(1, b + 1)) AS b FROM settings) r
),
samples AS (  -- b = 0: the items themselves; b >= 1: the resamples (two lists unnested side by side)
    SELECT g, 0 AS b, unnest(xs) AS x, unnest(ys) AS y FROM groups
    UNION ALL
    SELECT k.g, d.b, unnest(list_select(k.xs, d.picks)), unnest(list_select(k.ys, d.picks))
    FROM groups k JOIN draws d ON d.n = k.n
),
counted AS (  -- each sample's distinct pairs, drawn m times (1-5 scores repeat: far fewer rows to rank)
    SELECT g, b, x, y, count(*) AS m FROM samples GROUP BY ALL
),
ranked AS (   -- average ranks: the draws below the value + (the value's draws + 1) / 2, i.e. (below + up to it + 1) / 2
    SELECT *,
           (coalesce(sum(m) OVER below_x, 0) + sum(m) OVER wx + 1) / 2 AS rx,
           (coalesce(sum(m) OVER below_y, 0) + sum(m) OVER wy + 1) / 2 AS ry,
           floor(x + 0.5) AS a, floor(y + 0.5) AS c
    FROM counted
    WINDOW wx AS (PARTITION BY g, b ORDER BY x), below_x AS (wx GROUPS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING),
           wy AS (PARTITION BY g, b ORDER BY y), below_y AS (wy GROUPS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING)
),
sums AS (     -- fsum: compensated sums, whose result does not depend on the order of the rows (the ranks,
              -- halves, and the rounded values, integers, add up exactly in any order)
    SELECT g, b, sum(m) AS n,
           min(x) < max(x) AND min(y) < max(y) AS varies,
           fsum(m * x) AS sx, fsum(m * y) AS sy, fsum(m * x * x) AS sxx, fsum(m * y * y) AS syy, fsum(m * x * y) AS sxy,
           sum(m * rx) AS srx, sum(m * ry) AS sry, sum(m * rx * rx) AS srxx, sum(m * ry * ry) AS sryy,
           sum(m * rx * ry) AS srxy, sum(m * a) AS sa, sum(m * c) AS sc, sum(m * a * a) AS saa, sum(m * c * c) AS scc,
           sum(m * (a - c) * (a - c)) AS sdd
    FROM ranked GROUP BY ALL
),
correlations AS (
    SELECT *,
           CASE WHEN varies THEN least(1.0, greatest(-1.0,   -- Pearson's r of the values, then of the ranks
               (sxy - sx * sy / n) / sqrt((sxx - sx * sx / n) * (syy - sy * sy / n)))) END AS r,
           CASE WHEN varies THEN least(1.0, greatest(-1.0,
               (srxy - srx * sry / n) / sqrt((srxx - srx * srx / n) * (sryy - sry * sry / n)))) END AS rho,
           1 - sdd / nullif(saa + scc - 2 * sa * sc / n, 0) AS kappa
    FROM sums
),
stats AS (
    SELECT k.target, k.rater, k.dimension, c.b, c.n, c.s.statistic, round(c.s.value, 12) AS value
    FROM (SELECT *, unnest([{'statistic': 'icc3k', 'value': 2 * r / nullif(1 + r, 0)},
                            {'statistic': 'icc2_1', 'value': n * r / nullif(n - 1 + r, 0)},
                            {'statistic': 'spearman', 'value': rho},
                            {'statistic': 'kappa_w', 'value': kappa}]) AS s
          FROM correlations) c
    JOIN groups k ON k.g = c.g
    WHERE NOT (c.s.statistic = 'kappa_w' AND k.rater IN ('rouge_l', 'BERTScore-F'))
),
intervals AS (   -- numpy's default percentile: linear between the two nearest order statistics
    SELECT target, rater, dimension, statistic, v, m,
           (m - 1) * (SELECT alpha FROM settings) / 2 AS h_low, (m - 1) * (1 - (SELECT alpha FROM settings) / 2) AS h_high
    FROM (SELECT target, rater, dimension, statistic, list_sort(list(value)) AS v, count(value) AS m
          FROM stats WHERE b > 0 AND value IS NOT NULL GROUP BY ALL)
)
SELECT p.target, p.rater, p.dimension, p.statistic, p.value,
       i.v[CAST(floor(i.h_low) AS BIGINT) + 1] + (i.h_low - floor(i.h_low))
           * (i.v[least(CAST(floor(i.h_low) AS BIGINT) + 2, i.m)] - i.v[CAST(floor(i.h_low) AS BIGINT) + 1]) AS ci_low,
       i.v[CAST(floor(i.h_high) AS BIGINT) + 1] + (i.h_high - floor(i.h_high))
           * (i.v[least(CAST(floor(i.h_high) AS BIGINT) + 2, i.m)] - i.v[CAST(floor(i.h_high) AS BIGINT) + 1]) AS ci_high,
       p.n AS n_items
FROM stats p
LEFT JOIN intervals i ON i.target = p.target AND i.rater = p.rater AND i.dimension = p.dimension
                     AND i.statistic = p.statistic
WHERE p.b = 0
ORDER BY p.target, p.dimension, p.rater, p.statistic;
