-- depends_on: runs, summarize_target
-- Runs of the summarize target in HELM's read order (read_runs_for_suite): suites in --suites
-- order, run directories sorted by name inside a suite.  No de-duplication: a run present in
-- two suites (or a suite listed twice) is two rows, as in HELM.  Derived keys:
--   adapter_key   full AdapterSpec (HELM groups runs by the full spec before coarsening)
--   scenario_key  ScenarioSpec identity (class name + args, key order ignored like ObjectSpec.__eq__)
--   scenario_args_str  HELM's dict_to_str(scenario_spec.args) = ", ".join(f"{k}: {v}")
CREATE OR REPLACE TABLE target_runs AS
WITH r AS (
    SELECT t.target, t.suite_pos, r.suite, r.run_name, r.run_path, r.run_spec,
           coalesce(nullif(regexp_extract(r.run_path, '[^/]+$'), ''), r.run_name) AS dir_name,
           coalesce(r.run_spec -> '$.scenario_spec.args', '{}'::JSON) AS args
    FROM runs r
    JOIN summarize_target t ON r.suite = t.suite
)
SELECT
    CAST(row_number() OVER (ORDER BY suite_pos, dir_name, run_name) AS INTEGER) AS run_id,
    target, suite, suite_pos, run_name, dir_name, run_path,
    run_spec ->> '$.adapter_spec.model' AS model,
    run_spec ->> '$.adapter_spec.model_deployment' AS model_deployment,
    run_spec ->> '$.adapter_spec.method' AS method,
    CAST(json(run_spec -> '$.adapter_spec') AS VARCHAR) AS adapter_key,
    coalesce(run_spec ->> '$.scenario_spec.class_name', '') || '|' || array_to_string(
        list_transform(list_sort(json_keys(args)),
                       lambda k: to_json(k) || ':' || CAST(json(args -> k) AS VARCHAR)), ',') AS scenario_key,
    args AS scenario_args,
    array_to_string(list_transform(json_keys(args), lambda k: k || ': ' || (
        CASE json_type(args -> k)
            WHEN 'VARCHAR' THEN args ->> k
            WHEN 'NULL' THEN 'None'
            WHEN 'BOOLEAN' THEN CASE WHEN CAST(args -> k AS BOOLEAN) THEN 'True' ELSE 'False' END
            WHEN 'DOUBLE' THEN CAST(CAST(args -> k AS DOUBLE) AS VARCHAR)   -- shortest repr, like Python's
            ELSE CAST(json(args -> k) AS VARCHAR)                          -- ints; lists/dicts as JSON text
        END)), ', ') AS scenario_args_str,
    coalesce(from_json(run_spec -> '$.groups', '["VARCHAR"]'), []) AS groups,
    run_spec
FROM r;
