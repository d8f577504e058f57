-- depends_on: summarize_target, schema_run_groups, target_runs, target_run_groups
-- HELM's filter_runs_by_visibility(run, view_group) for every run and schema run group.
-- Walking run_spec.groups in order (groups absent from the schema are skipped): a 'no_groups'
-- group hides the run; a 'this_group_only' group equal to the view group shows it; any other
-- 'this_group_only' group hides it unless a later entry decides.  Default: shown unless the
-- view group itself is 'this_group_only'.
CREATE OR REPLACE TABLE run_visibility AS
WITH rg AS (
    SELECT name, visibility FROM schema_run_groups
    WHERE target IN (SELECT target FROM summarize_target)
),
mem AS (
    SELECT m.run_id, m.member_pos, m.group_name, rg.visibility
    FROM target_run_groups m JOIN rg ON rg.name = m.group_name
),
stops AS (
    SELECT m.run_id, v.name AS view_group, arg_min(m.visibility, m.member_pos) AS stop_visibility
    FROM mem m
    JOIN rg v ON m.visibility = 'no_groups' OR (m.visibility = 'this_group_only' AND m.group_name = v.name)
    GROUP BY ALL
),
partial AS (
    SELECT DISTINCT run_id FROM mem WHERE visibility = 'this_group_only'
)
SELECT r.run_id, v.name AS view_group,
    CASE WHEN s.stop_visibility IS NOT NULL THEN s.stop_visibility = 'this_group_only'
         ELSE v.visibility <> 'this_group_only' AND p.run_id IS NULL END AS visible
FROM target_runs r
CROSS JOIN rg v
LEFT JOIN stops s ON s.run_id = r.run_id AND s.view_group = v.name
LEFT JOIN partial p ON p.run_id = r.run_id;
