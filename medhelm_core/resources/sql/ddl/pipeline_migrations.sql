-- Additive changes, applied to new and old files alike (old files keep working; old rows get NULLs).
-- Executed by medhelm_core.store right after ddl/pipeline.sql.

-- Token usage the API reported, the cost at the price then in force, and what the outcome was:
-- `ok`, or `content_filter` (HELM's non-fatal empty completion, stored so it is not paid twice).
ALTER TABLE completions ADD COLUMN IF NOT EXISTS prompt_tokens BIGINT;

ALTER TABLE completions ADD COLUMN IF NOT EXISTS completion_tokens BIGINT;

ALTER TABLE completions ADD COLUMN IF NOT EXISTS usage JSON;

ALTER TABLE completions ADD COLUMN IF NOT EXISTS cost_usd DOUBLE;

ALTER TABLE completions ADD COLUMN IF NOT EXISTS outcome VARCHAR;

-- rate_limited / server_error / timeout / connection (retries exhausted), fatal, fatal_endpoint.
ALTER TABLE completion_errors ADD COLUMN IF NOT EXISTS kind VARCHAR;

-- Requests being asked right now, so that two processes never ask the same one: a claim whose
-- owner process is gone (or silent for longer than the lease) is taken over.
CREATE TABLE IF NOT EXISTS completion_claims (
        request_key VARCHAR PRIMARY KEY, owner VARCHAR, heartbeat DOUBLE);

-- The upstream edition a run or dataset partition was registered under (medhelm_core.editions);
-- NULL in files made before editions existed, which were all helm-0.5.16.
ALTER TABLE run_entries ADD COLUMN IF NOT EXISTS edition VARCHAR;

ALTER TABLE scenario_specs ADD COLUMN IF NOT EXISTS edition VARCHAR;

-- The run's model deployment as it was registered (its client class and tokenizer only, never its
-- arguments): how its answers are read later, even without that prod_env.
ALTER TABLE run_entries ADD COLUMN IF NOT EXISTS deployment JSON;

-- The completion texts as the API returned them (a JSON list, one per completion), for requests with
-- stop sequences, which HELM's truncate_sequence cuts at: an edition that tokenizes completions redoes
-- that cut on the original text, so the answer is never asked again. NULL: no stop sequences (or an
-- answer stored before this column existed).
ALTER TABLE completions ADD COLUMN IF NOT EXISTS untruncated JSON;

-- In-process Hugging Face models: each completion's generated tokens' log-probabilities under the
-- model itself (log_softmax of the raw logits; a JSON list of lists). HELM takes them from the scores
-- after the temperature, so every token of a temperature-0 request has logprob 0.0 in its results
-- (kept in `result`, as HELM writes it); this is the corrected value beside it (view local_logprobs).
ALTER TABLE completions ADD COLUMN IF NOT EXISTS model_logprobs JSON;
