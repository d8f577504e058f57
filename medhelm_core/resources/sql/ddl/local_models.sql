-- In-process Hugging Face models (HELM's HuggingFaceClient): HELM's logprob beside the model's own.
-- Executed by medhelm_core.store when it first opens a file for writing (every statement is idempotent).
--
-- HELM takes a generated token's logprob from the scores after the temperature, so at temperature 0
-- (1e-7 sampling) every token's logprob is 0.0, and so are the `logprob` stats built on them. The
-- answers and stats keep HELM's value; `model_logprob` is the model's own log-probability of the
-- same tokens (the completion's kept tokens: after HELM's cut at stop sequences and <|endoftext|>).
CREATE OR REPLACE VIEW local_logprobs AS
    WITH per_completion AS (
        SELECT c.request_key, c.model_deployment, c.model, i AS completion_index,
               c.result -> 'completions' -> i AS completion,
               CAST(c.model_logprobs -> i AS DOUBLE[]) AS model_token_logprobs
        FROM completions c,
             LATERAL (SELECT unnest(range(CAST(json_array_length(c.model_logprobs) AS BIGINT))) AS i)
        WHERE c.model_logprobs IS NOT NULL)
    SELECT request_key, model_deployment, model, completion_index,
           CAST(json_array_length(completion -> 'tokens') AS INTEGER) AS num_tokens,
           CAST(completion ->> 'logprob' AS DOUBLE) AS helm_logprob,
           coalesce(list_sum(model_token_logprobs[1:CAST(json_array_length(completion -> 'tokens') AS BIGINT)]), 0)
               AS model_logprob,
           model_token_logprobs
    FROM per_completion;
