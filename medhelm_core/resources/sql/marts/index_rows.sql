-- depends_on: summarize_target, schema_run_groups, schema_run_group_expansion, target_run_groups, run_visibility, target_runs, run_stats
-- groups.json (HELM's create_index_tables): one row per schema run group, grouped into one table
-- per category (categories in order of first appearance).  For the group's depth-first
-- expansion, runs are visited subgroup by subgroup, adapter spec by adapter spec (runs visible in
-- that subgroup only); every stat with the column's name is collected, whatever its split or
-- perturbation, and merged in that order (first stat copied, the rest merged).
-- '# instances' / '# references' show the merged mean, the token columns the merged sum.
-- '# models' counts distinct model deployments, 'Adaptation method' the distinct methods.
CREATE OR REPLACE TABLE index_rows AS
WITH tgt AS (SELECT DISTINCT target FROM summarize_target),
rg AS (SELECT g.* FROM schema_run_groups g JOIN tgt USING (target)),
ex AS (SELECT e.* FROM schema_run_group_expansion e JOIN tgt USING (target)),
cats AS (
    SELECT category, CAST(row_number() OVER (ORDER BY min(run_group_pos)) - 1 AS INTEGER) AS category_pos
    FROM rg GROUP BY category
),
members AS (
    SELECT e.run_group, m.run_id, m.model_deployment, m.method, v.visible,
           [e.expansion_pos, m.adapter_first, m.run_id, m.member_pos] AS order_key
    FROM ex e
    JOIN target_run_groups m ON m.group_name = e.subgroup
    JOIN run_visibility v ON v.run_id = m.run_id AND v.view_group = e.subgroup
),
stats AS (
    SELECT m.run_group, s.name, m.order_key, s.ordinal, s.count, s.sum, s.min, s.max, s.mean
    FROM members m
    JOIN target_runs r ON r.run_id = m.run_id
    JOIN run_stats s ON s.suite = r.suite AND s.run_name = r.run_name
    WHERE m.visible AND s.name IN ('num_instances', 'num_references', 'num_prompt_tokens', 'num_completion_tokens')
),
merged AS (
    SELECT run_group, name, count(*) AS n_stats, sum(count) AS stat_count,
           list_reduce(list(sum ORDER BY order_key, ordinal), lambda a, b: a + b) AS stat_sum,
           min(min) AS stat_min, max(max) AS stat_max,
           arg_min_null(mean, list_concat(order_key, [ordinal])) AS first_mean
    FROM stats GROUP BY ALL
),
cells AS (
    SELECT *, CASE WHEN n_stats > 1 AND stat_count > 0 THEN stat_sum / CAST(stat_count AS DOUBLE)
                   ELSE first_mean END AS stat_mean
    FROM merged
),
summary AS (
    SELECT run_group, count(DISTINCT model_deployment) AS num_models,
           list_sort(list_distinct(list(method))) AS methods
    FROM members GROUP BY ALL
)
SELECT c.category_pos, g.category, g.run_group_pos, g.name AS group_name, g.display_name, g.description,
       coalesce(sm.methods, []) AS methods, coalesce(sm.num_models, 0) AS num_models,
       i.n_stats AS inst_n, i.stat_count AS inst_count, i.stat_sum AS inst_sum, i.stat_min AS inst_min,
       i.stat_max AS inst_max, i.stat_mean AS inst_mean,
       rf.n_stats AS ref_n, rf.stat_count AS ref_count, rf.stat_sum AS ref_sum, rf.stat_min AS ref_min,
       rf.stat_max AS ref_max, rf.stat_mean AS ref_mean,
       pt.n_stats AS prompt_n, pt.stat_count AS prompt_count, pt.stat_sum AS prompt_sum, pt.stat_min AS prompt_min,
       pt.stat_max AS prompt_max, pt.stat_mean AS prompt_mean,
       ct.n_stats AS completion_n, ct.stat_count AS completion_count, ct.stat_sum AS completion_sum,
       ct.stat_min AS completion_min, ct.stat_max AS completion_max, ct.stat_mean AS completion_mean
FROM rg g
JOIN cats c ON c.category = g.category
LEFT JOIN summary sm ON sm.run_group = g.name
LEFT JOIN cells i ON i.run_group = g.name AND i.name = 'num_instances'
LEFT JOIN cells rf ON rf.run_group = g.name AND rf.name = 'num_references'
LEFT JOIN cells pt ON pt.run_group = g.name AND pt.name = 'num_prompt_tokens'
LEFT JOIN cells ct ON ct.run_group = g.name AND ct.name = 'num_completion_tokens';
