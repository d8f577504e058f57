-- depends_on: summarize_target, schema_run_groups, schema_run_group_expansion, schema_metric_groups, schema_metric_group_metrics, schema_metrics, schema_perturbations
-- Value columns of every table shape HELM's create_group_table can build (schema only):
--   set_kind 'metric_group': owner = a top/category group G (by_metric, > 1 group in its
--     expansion), one set per metric group of G's table list; columns = (subgroup, matcher) for
--     every subgroup in G's depth-first expansion, in that order.
--   set_kind 'subgroup': owner = a run group S, one set per sub_split (NULL = main table);
--     columns = the matchers of S's own metric groups (leaf / per-scenario tables).
-- A (group, metric group) pair contributes only if the metric group minus "_detailed" is in the
-- group's metric_groups; a matcher is `${var}`-substituted with the group's environment (sub_split
-- dropped, as MetricNameMatcher.substitute does) and skipped if its metric is not in the schema.
CREATE OR REPLACE TABLE column_sets AS
WITH tgt AS (SELECT DISTINCT target FROM summarize_target),
rg AS (SELECT g.* FROM schema_run_groups g JOIN tgt USING (target)),
ex AS (SELECT e.* FROM schema_run_group_expansion e JOIN tgt USING (target)),
mgs AS (SELECT m.* FROM schema_metric_groups m JOIN tgt USING (target)),
mgm AS (SELECT m.* FROM schema_metric_group_metrics m JOIN tgt USING (target)),
met AS (SELECT m.* FROM schema_metrics m JOIN tgt USING (target)),
pert AS (SELECT p.* FROM schema_perturbations p JOIN tgt USING (target)),
by_metric AS (
    SELECT * FROM rg WHERE NOT (subgroup_display_mode = 'by_group' OR expansion_size = 1)
),
-- metric groups listed by each subgroup, in expansion order (for groups without their own list)
collected AS (
    SELECT e.run_group AS owner, e.expansion_pos, s.mg, s.pos
    FROM ex e
    JOIN (SELECT name, unnest(metric_groups) AS mg, unnest(generate_series(1, len(metric_groups))) AS pos
          FROM rg) s ON s.name = e.subgroup
),
collected_first AS (
    SELECT owner, mg, min(expansion_pos * 1000000 + pos) AS first_key
    FROM collected GROUP BY ALL
),
table_metric_groups AS (
    -- the group's own metric_groups, when set (kept as listed)
    SELECT g.name AS owner, s.mg, s.pos AS set_pos
    FROM by_metric g
    JOIN (SELECT name, unnest(metric_groups) AS mg, unnest(generate_series(1, len(metric_groups))) AS pos
          FROM rg) s ON s.name = g.name
    WHERE len(g.metric_groups) > 0
    UNION ALL
    -- otherwise the de-duplicated union of the subgroups' lists, dropping X when X_detailed is
    -- listed and anything in subgroup_metric_groups_hidden
    SELECT g.name, c.mg, CAST(row_number() OVER (PARTITION BY g.name ORDER BY c.first_key) AS INTEGER)
    FROM by_metric g
    JOIN collected_first c ON c.owner = g.name
    WHERE len(g.metric_groups) = 0
      AND NOT EXISTS (SELECT 1 FROM collected_first d WHERE d.owner = g.name AND d.mg = c.mg || '_detailed')
      AND NOT list_contains(g.subgroup_metric_groups_hidden, c.mg)
),
raw_columns AS (
    SELECT 'metric_group' AS set_kind, t.owner AS set_owner, t.mg AS set_metric_group, t.set_pos,
           CAST(NULL AS VARCHAR) AS set_sub_split, g.expansion_size AS num_groups,
           e.expansion_pos AS outer_pos, s.name AS column_group, m.matcher_pos,
           m.name AS tpl_name, m.split AS tpl_split, m.perturbation_name AS tpl_perturbation,
           CAST(NULL AS VARCHAR) AS matcher_sub_split, s.environment
    FROM table_metric_groups t
    JOIN by_metric g ON g.name = t.owner
    JOIN ex e ON e.run_group = t.owner
    JOIN rg s ON s.name = e.subgroup
    JOIN mgm m ON m.metric_group = t.mg
    WHERE list_contains(s.metric_groups, replace(t.mg, '_detailed', ''))
    UNION ALL
    SELECT 'subgroup', s.name, NULL, 0, ss.sub_split, 1,
           sm.pos, s.name, m.matcher_pos, m.name, m.split, m.perturbation_name, ss.sub_split, s.environment
    FROM rg s
    JOIN (SELECT name, unnest(metric_groups) AS mg, unnest(generate_series(1, len(metric_groups))) AS pos
          FROM rg) sm ON sm.name = s.name
    JOIN (SELECT name, CAST(NULL AS VARCHAR) AS sub_split FROM rg
          UNION ALL
          SELECT name, unnest(sub_splits) FROM rg WHERE sub_splits IS NOT NULL) ss ON ss.name = s.name
    JOIN mgm m ON m.metric_group = sm.mg
    WHERE list_contains(s.metric_groups, replace(sm.mg, '_detailed', ''))
),
substituted AS (
    SELECT *,
        list_reduce(json_keys(environment), lambda acc, k: replace(acc, '${' || k || '}', environment ->> k),
                    tpl_name) AS matcher_name,
        list_reduce(json_keys(environment), lambda acc, k: replace(acc, '${' || k || '}', environment ->> k),
                    tpl_split) AS matcher_split,
        CASE WHEN tpl_perturbation IS NOT NULL THEN
            list_reduce(json_keys(environment), lambda acc, k: replace(acc, '${' || k || '}', environment ->> k),
                        tpl_perturbation) END AS matcher_perturbation
    FROM raw_columns
)
SELECT c.set_kind, c.set_owner, c.set_metric_group, c.set_pos, c.set_sub_split,
    CAST(row_number() OVER (PARTITION BY c.set_kind, c.set_owner, c.set_metric_group, c.set_sub_split
                            ORDER BY c.outer_pos, c.matcher_pos) - 1 AS INTEGER) AS col_idx,
    c.column_group, c.matcher_name, c.matcher_split, c.matcher_sub_split, c.matcher_perturbation,
    -- header cell
    CASE WHEN c.num_groups > 1 THEN gshort || ' - ' ELSE '' END
        || mshort || coalesce(' (' || pshort || ')', '') AS header_value,
    CASE WHEN coalesce(nullif(s.short_description, ''), nullif(s.description, ''), '') <> ''
         THEN coalesce(nullif(s.short_description, ''), nullif(s.description, '')) || chr(10) || chr(10)
         ELSE '' END
        || coalesce(nullif(m.display_name, ''), m.name) || ': ' || coalesce(m.description, '')
        || CASE WHEN c.matcher_perturbation IS NOT NULL
                THEN chr(10) || '- Perturbation ' || coalesce(nullif(p.display_name, ''), p.name, c.matcher_perturbation)
                     || ': ' || coalesce(nullif(p.description, ''), '???')
                ELSE '' END AS header_description,
    m.lower_is_better,
    mshort AS metadata_metric,
    gshort AS metadata_run_group,
    pshort AS metadata_perturbation
FROM substituted c
JOIN met m ON m.name = c.matcher_name
JOIN rg s ON s.name = c.column_group
LEFT JOIN pert p ON p.name = c.matcher_perturbation
CROSS JOIN LATERAL (SELECT
    coalesce(nullif(m.short_display_name, ''), nullif(m.display_name, ''), m.name) AS mshort,
    coalesce(nullif(s.short_display_name, ''), nullif(s.display_name, ''), s.name) AS gshort,
    CASE WHEN c.matcher_perturbation IS NOT NULL
         THEN coalesce(nullif(p.short_display_name, ''), nullif(p.display_name, ''), p.name, c.matcher_perturbation)
    END AS pshort);
