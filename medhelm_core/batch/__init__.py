"""Vendors' batch APIs: the same requests as online, answered within 24 hours for about half the price.

* `protocol`: OpenAI's Batch API and Azure OpenAI's global batch through the deployment's own SDK
  client: a JSONL line per request whose body is the online body byte for byte (`custom_id` = our
  request key), and each output line read into the Attempt the online client makes of the same HTTP
  answer; every key of a batch comes back `answered`, `retry` (expired, cancelled, transient error,
  missing) or `failed` (refused as it would be online).
* `anthropic`: Anthropic's Message Batches (no files: the requests go in the create call) through the
  deployment's `AnthropicMessagesClient`: each request's `params` are the online body byte for byte,
  each result read into the online client's Attempt; a create whose answer was lost is found again
  by size, time and custom_ids (see its docstring). `apis.batch_api` picks the class for a flavour.
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
            ("ANSWERED", "ANTHROPIC", "AZURE", "ENDED_STATES", "FAILED_ITEM", "FLAVOURS", "OPENAI", "RETRY",
             "RUNNING_STATES", "BatchAPI", "BatchAPIError", "BatchResults", "BatchStatus", "Flavour", "ItemOutcome",
             "flavour_of", "input_file")},
         "batch_api": "medhelm_core.batch.apis"}


def __getattr__(name: str):
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["ANSWERED", "ANTHROPIC", "AZURE", "BatchAPI", "BatchAPIError", "BatchResults", "BatchStatus",
           "ENDED_STATES", "FAILED_ITEM", "FLAVOURS", "Flavour", "ItemOutcome", "OPENAI", "RETRY", "RUNNING_STATES",
           "SubmitReport", "batch_api", "collect", "flavour_of", "input_file", "ledger", "poll", "resume",
           "store_collected", "submit"]
