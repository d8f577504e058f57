"""Which class speaks a deployment's batch dialect: `protocol.BatchAPI` (OpenAI, Azure OpenAI) or
`anthropic.AnthropicBatchAPI` (Anthropic's Message Batches). Above both, so neither imports the other."""
from __future__ import annotations

from medhelm_core.batch.protocol import ANTHROPIC, BatchAPI, Flavour


def batch_api(client, flavour: Flavour, max_requests: int | None = None):
    """The batch endpoints of a deployment through its online client (the Anthropic SDK is the
    [anthropic] extra: its module is imported only for an Anthropic deployment)."""
    if flavour.name == ANTHROPIC.name:
        from medhelm_core.batch.anthropic import AnthropicBatchAPI

        return AnthropicBatchAPI(client, flavour, max_requests)
    return BatchAPI(client, flavour, max_requests)
