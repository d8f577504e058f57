"""Model clients: HELM `Request` dict -> HELM `RequestResult` dict, one plug-in per provider.

Each module of this package may hold factories marked `@model_api(<HELM client class_name>, ...)`
(`clients/base.py`); so may any installed package that names a module in the `medhelm.clients`
entry-point group. `client_for_deployment` looks the deployment's `client_spec.class_name` up among
the marked factories: adding a provider is one new module, no edit here.

* `openai_compatible.py`: HELM's OpenAIClient and the clients that speak its wire protocol;
* `azure_openai.py`: HELM's AzureOpenAIClient and the Stanford Health Care gateway's Azure OpenAI
  clients (StanfordHealthCareAzureOpenAIClient, StanfordHealthCareSHCOpenAIClient);
* `stanford_gateway.py`: the gateway's StanfordHealthCareOpenAIClient (OpenAI chat at a gateway path),
  StanfordHealthCareClaudeClient and StanfordHealthCareGoogleClient (plain HTTP);
* `openai_responses.py`: HELM's OpenAIResponseClient (the OpenAI Responses API);
* `dspy_program.py`: HELM's DSPyClient (a DSPy program in front of an endpoint);
* `huggingface_local.py`: HELM's HuggingFaceClient (a Hugging Face model in this process);
* `bedrock.py`: HELM's Bedrock clients through boto3 (BedrockNovaClient: the Converse API, also Claude on
  Bedrock by `bedrock_model_id`; BedrockLlamaClient, BedrockMistralClient, BedrockTitanClient,
  BedrockPalmyraClient: InvokeModel).
* `anthropic_messages.py`: HELM's AnthropicMessagesClient (the Messages API through the `anthropic` SDK);
* `together.py`: HELM's legacy TogetherClient (Together's `/api/inference`, plain HTTP);
* `google_genai.py`: HELM's GoogleGenAIClient (Gemini API or Vertex AI through the `google-genai` SDK);
* `vertexai.py`: HELM's VertexAIChatClient (Vertex AI's generateContent over REST with google-auth).
"""
from __future__ import annotations

import functools
import importlib
import inspect
import pkgutil
from importlib.metadata import entry_points
from typing import Any, Callable

from medhelm_core.clients.base import IN_PROCESS_ATTRIBUTE, MODEL_API_ATTRIBUTE
from medhelm_core.errors import MedhelmError

ENTRY_POINT_GROUP = "medhelm.clients"


def _marked_factories(module) -> dict[str, Callable]:
    found = {}
    for value in vars(module).values():
        for class_name in getattr(value, MODEL_API_ATTRIBUTE, ()):
            found[class_name] = value
    return found


@functools.cache
def factories() -> dict[str, Callable[..., Any]]:
    """HELM client class_name -> factory, from this package's modules and the entry points."""
    modules = [f"{__name__}.{m.name}" for m in pkgutil.iter_modules(__path__) if m.name != "base"]
    modules += [ep.module for ep in entry_points(group=ENTRY_POINT_GROUP)]
    out: dict[str, Callable] = {}
    for name in modules:
        for class_name, factory in _marked_factories(importlib.import_module(name)).items():
            if class_name in out and out[class_name] is not factory:
                raise MedhelmError(f"client class {class_name} is provided twice ({name})")
            out[class_name] = factory
    return out


def supported_client_classes() -> list[str]:
    return sorted(factories())


def is_in_process(class_name: str) -> bool:
    """A client class whose model runs in this process (no endpoint, no text leaves the machine)."""
    return bool(getattr(factories().get(class_name), IN_PROCESS_ATTRIBUTE, False))


def client_for_deployment(deployment, credentials, max_concurrency: int | None = None, timeout_s: float = 600.0,
                          **context: Any):
    """Build the client a HELM `model_deployments.yaml` entry describes (key from credentials/env).
    `context` (`tokenizer_config`, `batch_size`) goes to the factories that declare those arguments."""
    cls = deployment.client_spec.class_name
    factory = factories().get(cls)
    if factory is None:
        raise MedhelmError(f"deployment {deployment.name!r}: client class {cls} is not supported "
                           f"(supported: {', '.join(supported_client_classes())})")
    accepted = inspect.signature(factory).parameters
    extra = {k: v for k, v in context.items() if k in accepted}
    return factory(deployment, credentials, max_concurrency=max_concurrency, timeout_s=timeout_s, **extra)
