-- Vendor batches (OpenAI Batch API, Azure OpenAI global batch, Anthropic Message Batches): see
-- medhelm_core/batch/ledger.py.
-- Executed by medhelm_core.store when it first opens a file for writing (every statement is idempotent).
--
-- A batch is a row here before its file is uploaded (state 'uploading'), gets its input file id before
-- the batch is created ('uploaded'), then the vendor's id and states (validating, in_progress,
-- finalizing, completed, failed, expired, cancelling, cancelled), and 'collected' once its answers are
-- stored ('abandoned': never created at the vendor; its requests are asked again). Anthropic has no
-- files: a row is 'creating' (no input file) until its create is answered, then Anthropic's states
-- (in_progress, canceling, ended). No key, token or URL path is stored: `endpoint` is the
-- scheme://host[:port] the batch went to.
CREATE TABLE IF NOT EXISTS batches (
        batch_id VARCHAR PRIMARY KEY, vendor VARCHAR, vendor_batch_id VARCHAR, model_deployment VARCHAR,
        endpoint VARCHAR, state VARCHAR, num_requests INTEGER, input_file_name VARCHAR,
        input_file_id VARCHAR, output_file_id VARCHAR, error_file_id VARCHAR, request_counts JSON,
        error VARCHAR, owner VARCHAR, created_at TIMESTAMP DEFAULT current_timestamp,
        submitted_at TIMESTAMP, last_polled_at TIMESTAMP, ended_at TIMESTAMP, collected_at TIMESTAMP);

-- The requests a batch holds: 'queued' while the batch is live (no other batch takes the key), then
-- 'answered', 'retry' (expired, cancelled, transient error: asked again) or 'failed' (the request
-- itself is refused, as it would be online), with the error; `request` is the HELM request, so that
-- any later process can read the batch's answers (and store them as `completions`) without the suite.
CREATE TABLE IF NOT EXISTS batch_items (
        batch_id VARCHAR, request_key VARCHAR, state VARCHAR, error VARCHAR, request JSON,
        PRIMARY KEY (batch_id, request_key));
