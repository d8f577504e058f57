"""Which class speaks a deployment's batch dialect: `protocol.BatchAPI` (OpenAI, Azure OpenAI) or
`anthropic.AnthropicBatchAPI` (Anthropic's Message Batches) or `gemini.GeminiBatchAPI` (the Gemini API's
batch mode) or `vertex.VertexBatchAPI` (Vertex AI batch prediction: the same `GoogleGenAIClient` class in
Vertex AI mode, and HELM's `VertexAIChatClient`; Cloud Storage files, a batchPredictionJob) or
`bedrock.BedrockBatchAPI` (Amazon Bedrock batch inference: S3 files, a model invocation job). Above them all, so none imports another."""
from __future__ import annotations

from medhelm_core.batch.protocol import ANTHROPIC, BatchAPI, Flavour


def batch_api(client, flavour: Flavour, max_requests: int | None = None, settings=None):
    """The batch endpoints of a deployment through its online client (the Anthropic SDK is the
    [anthropic] extra: its module is imported only for an Anthropic deployment). `settings`: the
    deployment's `DeploymentSettings` (Bedrock reads its batch_s3_uri and batch_role_arn, Vertex AI its
    batch_gcs_uri). A `GoogleGenAIClient` deployment (flavour gemini) in Vertex AI mode gets `VertexBatchAPI`,
    whose own flavour (`protocol.VERTEX`) its ledger rows carry; so does a `VertexAIChatClient` deployment
    (flavour vertex), whose jobs go through a google-genai client built from its own settings."""
    if flavour.name == "bedrock":  # boto3 ([aws] extra) loads with the client already
        from medhelm_core.batch.bedrock import BedrockBatchAPI

        return BedrockBatchAPI(client, flavour, max_requests, s3_uri=getattr(settings, "batch_s3_uri", None),
                               role_arn=getattr(settings, "batch_role_arn", None),
                               min_requests=getattr(settings, "batch_min_requests", None))
    if flavour.name == ANTHROPIC.name:
        from medhelm_core.batch.anthropic import AnthropicBatchAPI

        return AnthropicBatchAPI(client, flavour, max_requests)
    if flavour.name == "vertex" or (flavour.name == "gemini" and getattr(client, "vertexai", False)):
        from medhelm_core.batch.protocol import VERTEX
        from medhelm_core.batch.vertex import VertexBatchAPI

        return VertexBatchAPI(client, VERTEX, max_requests, gcs_uri=getattr(settings, "batch_gcs_uri", None))
    if flavour.name == "gemini":  # the google-genai SDK ([google] extra) loads with the client already
        from medhelm_core.batch.gemini import GeminiBatchAPI

        return GeminiBatchAPI(client, flavour, max_requests)
    return BatchAPI(client, flavour, max_requests)
