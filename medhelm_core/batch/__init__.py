"""Vendors' batch APIs: the same requests as online, answered within 24 hours for about half the price.

* `protocol`: OpenAI's Batch API and Azure OpenAI's global batch through the deployment's own SDK
  client: a JSONL line per request whose body is the online body byte for byte (`custom_id` = our
  request key), and each output line read into the Attempt the online client makes of the same HTTP
  answer; every key of a batch comes back `answered`, `retry` (expired, cancelled, transient error,
  missing) or `failed` (refused as it would be online).
* `anthropic`: Anthropic's Message Batches (no files: the requests go in the create call) through the
  deployment's `AnthropicMessagesClient`: each request's `params` are the online body byte for byte,
  each result read into the online client's Attempt; a create whose answer was lost is found again
  by size, time and custom_ids (see its docstring).
* `gemini`: the Gemini API's batch mode through the deployment's `GoogleGenAIClient` (Gemini API mode;
  Vertex AI mode is `vertex`'s): a JSONL file uploaded through the Files API, a line `{"key": <request key>,
  "request": <the online generateContent body, byte for byte>}`, one batch per model; each response or
  error line read by the online client's own SDK parsing into its Attempt; a lost create is found again
  by the batch's display name (our batch id and the file id). `apis.batch_api` picks the class for a flavour.
* `vertex`: Vertex AI batch prediction through the same `GoogleGenAIClient` in Vertex AI mode (its SDK
  client, gcsfs with its Google credentials), or through HELM's `VertexAIChatClient` (a google-genai
  client in Vertex AI mode built from its project, location, credentials and host; its own bodies and
  reading): a JSONL file in Cloud Storage (setting `batch_gcs_uri`), a line
  `{"request": <the online generateContent body, byte for byte>}`, one batchPredictionJob per model named
  `medhelm-<our batch id>`; each output line goes to the key whose body its echoed `request` is (no id of
  ours is documented on a line), read by the online client's SDK parsing; a lost create is found again by
  listing with `display_name="medhelm-<batch id>"`. `apis.batch_api` gives it a Vertex AI mode client
  and every VertexAIChatClient (flavour `vertex`; not its Model Garden partner models).
* `bedrock`: Amazon Bedrock batch inference through the deployment's `BedrockClient` (its boto3 session:
  `s3` and `bedrock` clients): a JSONL file in S3 (settings `batch_s3_uri`, `batch_role_arn`), a record
  `{"recordId": <request key>, "modelInput": <the online InvokeModel body, or for Nova (Converse) the
  Converse body, byte for byte>}`, one model invocation job per model; each output record read by the
  online client's own parsing into its Attempt; fewer than the job minimum (100) are left online; a lost
  create is found again by its jobName (our batch id), and a create sent again is the same job
  (clientRequestToken).
* `ledger`: the `batches` and `batch_items` tables: a batch is a row before its file is uploaded, so a
  killed process never submits the same keys twice.
* `lifecycle`: submit, resume after a crash, poll, collect.

No Dagster here; `medhelm_core.run.batch_pass` drives these for a suite's runs (model, then jury), before
the online runs find the answers stored.
"""
from __future__ import annotations

import importlib

from medhelm_core.batch import ledger

# The rest load when first asked for: `protocol` imports the vendors' SDKs (a second or two), which a
# command that only looks at the ledger (`medhelm-run` without batches, the code location) never needs.
_LAZY = {**{name: "medhelm_core.batch.lifecycle" for name in
            ("SubmitReport", "collect", "poll", "resume", "store_collected", "submit")},
         **{name: "medhelm_core.batch.protocol" for name in
            ("ANSWERED", "ANTHROPIC", "AZURE", "BEDROCK", "ENDED_STATES", "FAILED_ITEM", "FLAVOURS", "OPENAI", "RETRY",
             "RUNNING_STATES", "BatchAPI", "BatchAPIError", "BatchResults", "BatchStatus", "Flavour", "ItemOutcome",
             "flavour_of", "input_file")},
         "batch_api": "medhelm_core.batch.apis"}


def __getattr__(name: str):
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["ANSWERED", "ANTHROPIC", "AZURE", "BEDROCK", "BatchAPI", "BatchAPIError", "BatchResults", "BatchStatus",
           "ENDED_STATES", "FAILED_ITEM", "FLAVOURS", "Flavour", "ItemOutcome", "OPENAI", "RETRY", "RUNNING_STATES",
           "SubmitReport", "batch_api", "collect", "flavour_of", "input_file", "ledger", "poll", "resume",
           "store_collected", "submit"]
