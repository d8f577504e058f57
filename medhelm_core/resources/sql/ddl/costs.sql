-- Dollar cost: the prices in use and the cost views (see medhelm_core/costs.py).
-- Executed by medhelm_core.store when it first opens a file for writing (every statement is idempotent).

-- deployment_prices: defined with the summarize inputs (summarize_inputs.sql), which analytics'
-- cost_vs_score reads in every store.

CREATE OR REPLACE VIEW completion_costs AS
    SELECT c.request_key, c.model_deployment, c.model, c.outcome, c.success, c.attempts,
           c.prompt_tokens, c.completion_tokens,
           coalesce(c.cost_usd, (c.prompt_tokens * p.input_per_million
                                 + c.completion_tokens * p.output_per_million) / 1e6) AS cost_usd,
           c.completed_at
    FROM completions c LEFT JOIN deployment_prices p ON p.model_deployment = c.model_deployment;

CREATE OR REPLACE VIEW instance_costs AS
    WITH m AS (
        SELECT r.suite, r.run_name, r.instance_id, count(*) AS model_calls,
               sum(cc.prompt_tokens) AS model_prompt_tokens, sum(cc.completion_tokens) AS model_completion_tokens,
               sum(cc.cost_usd) AS model_cost_usd
        FROM requests r LEFT JOIN completion_costs cc ON cc.request_key = r.request_key
        GROUP BY r.suite, r.run_name, r.instance_id),
    j AS (
        SELECT v.suite, v.run_name, v.instance_id, count(*) AS judge_calls,
               sum(cc.prompt_tokens) AS judge_prompt_tokens, sum(cc.completion_tokens) AS judge_completion_tokens,
               sum(cc.cost_usd) AS judge_cost_usd
        FROM judge_verdicts v JOIN completion_costs cc ON cc.request_key = v.request_key
        GROUP BY v.suite, v.run_name, v.instance_id)
    SELECT m.suite, m.run_name, m.instance_id, m.model_calls, m.model_prompt_tokens, m.model_completion_tokens,
           m.model_cost_usd, coalesce(j.judge_calls, 0) AS judge_calls, j.judge_prompt_tokens,
           j.judge_completion_tokens, coalesce(j.judge_cost_usd, 0) AS judge_cost_usd,
           coalesce(m.model_cost_usd, 0) + coalesce(j.judge_cost_usd, 0) AS total_cost_usd
    FROM m LEFT JOIN j USING (suite, run_name, instance_id);

CREATE OR REPLACE VIEW run_costs AS
    WITH m AS (
        SELECT k.suite, k.run_name, count(*) AS model_calls, count(cc.request_key) AS model_completed,
               sum(cc.prompt_tokens) AS model_prompt_tokens, sum(cc.completion_tokens) AS model_completion_tokens,
               sum(cc.cost_usd) AS model_cost_usd
        FROM (SELECT DISTINCT suite, run_name, request_key FROM requests) k
        LEFT JOIN completion_costs cc ON cc.request_key = k.request_key
        GROUP BY k.suite, k.run_name),
    j AS (
        SELECT k.suite, k.run_name, count(*) AS judge_calls,
               sum(cc.prompt_tokens) AS judge_prompt_tokens, sum(cc.completion_tokens) AS judge_completion_tokens,
               sum(cc.cost_usd) AS judge_cost_usd
        FROM (SELECT DISTINCT suite, run_name, request_key FROM judge_verdicts WHERE request_key IS NOT NULL) k
        JOIN completion_costs cc ON cc.request_key = k.request_key
        GROUP BY k.suite, k.run_name)
    SELECT e.suite, e.run_name, e.model, e.model_deployment, m.model_calls, m.model_completed,
           m.model_prompt_tokens, m.model_completion_tokens, m.model_cost_usd,
           coalesce(j.judge_calls, 0) AS judge_calls, j.judge_prompt_tokens, j.judge_completion_tokens,
           coalesce(j.judge_cost_usd, 0) AS judge_cost_usd,
           coalesce(m.model_cost_usd, 0) + coalesce(j.judge_cost_usd, 0) AS total_cost_usd
    FROM run_entries e JOIN m USING (suite, run_name) LEFT JOIN j USING (suite, run_name);

CREATE OR REPLACE VIEW model_costs AS
    SELECT suite, model, model_deployment, count(*) AS runs, sum(model_calls) AS model_calls,
           sum(model_prompt_tokens) AS model_prompt_tokens, sum(model_completion_tokens) AS model_completion_tokens,
           sum(model_cost_usd) AS model_cost_usd, sum(judge_calls) AS judge_calls,
           sum(judge_cost_usd) AS judge_cost_usd, sum(total_cost_usd) AS total_cost_usd
    FROM run_costs GROUP BY suite, model, model_deployment;

CREATE OR REPLACE VIEW judge_costs AS
    SELECT k.suite, k.judge, k.judge_deployment, count(*) AS calls,
           sum(cc.prompt_tokens) AS prompt_tokens, sum(cc.completion_tokens) AS completion_tokens,
           sum(cc.cost_usd) AS cost_usd
    FROM (SELECT DISTINCT suite, judge, judge_deployment, request_key FROM judge_verdicts
          WHERE request_key IS NOT NULL) k
    JOIN completion_costs cc ON cc.request_key = k.request_key
    GROUP BY k.suite, k.judge, k.judge_deployment;
