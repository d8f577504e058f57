-- depends_on: cell_instances, analytics_settings
-- Bootstrap resamples of every benchmark cell, paired across models: resample b of a benchmark draws
-- n of its n instances (the union over its models, in instance-id order) with replacement, the k-th
-- draw being hash(seed, benchmark, b, k) mod n; every model's cell is recomputed on the same draws
-- as Σ m·s / Σ m·c (m: how often the instance was drawn), rounded to 12 decimals so that equal cells
-- tie whatever order the sums were added in.  B and the seed: analytics_settings.
CREATE OR REPLACE TABLE cell_resamples AS
WITH settings AS (
    SELECT coalesce(max(bootstrap_samples), 1000) AS b, coalesce(max(seed), 0) AS seed FROM analytics_settings
),
instances AS (
    SELECT benchmark, instance_id,
           row_number() OVER (PARTITION BY benchmark ORDER BY instance_id) - 1 AS idx,
           count(*) OVER (PARTITION BY benchmark) AS n
    FROM (SELECT DISTINCT benchmark, instance_id FROM cell_instances)
),
sizes AS (SELECT DISTINCT benchmark, n FROM instances),
draws AS (
    SELECT benchmark, b, CAST(hash(seed, benchmark, b, k) % n AS BIGINT) AS idx
    FROM (SELECT z.benchmark, z.n, st.seed, unnest(range(1, st.b + 1)) AS b FROM sizes z, settings st),
         LATERAL (SELECT unnest(range(n)) AS k)
),
counts AS (
    SELECT d.benchmark, d.b, i.instance_id, count(*) AS m
    FROM draws d JOIN instances i ON i.benchmark = d.benchmark AND i.idx = d.idx
    GROUP BY ALL
)
SELECT x.benchmark, x.model_deployment, x.model, w.b,
       round(sum(w.m * x.s) / nullif(sum(w.m * x.c), 0), 12) AS value
FROM counts w JOIN cell_instances x ON x.benchmark = w.benchmark AND x.instance_id = w.instance_id
GROUP BY ALL;
