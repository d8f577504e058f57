"""HELM's Azure OpenAI clients: `AzureOpenAIClient` and the Stanford Health Care gateway's
`StanfordHealthCareAzureOpenAIClient` and `StanfordHealthCareSHCOpenAIClient`.

All three speak OpenAI chat completions (request body, reply parsing, content filter and errors as
`OpenAICompatibleClient`) through the SDK's `openai.AzureOpenAI`, so the wire request is HELM's:
`POST {endpoint}/openai/deployments/<model>/chat/completions?api-version=<v>` (or
`{base_url}/deployments/<model>/...` when a base URL is configured; the SDK inserts the deployment
because the body's `model` is the Azure deployment name), with the `api-key` header. The gateway's
Azure client adds `Ocp-Apim-Subscription-Key` (the same key) and formats its `base_url` template
`{endpoint}/openai-eastus2` with `stanfordhealthcareEndpoint`. Azure's rate-limit headers
(`x-ratelimit-*`, `retry-after-ms`) reach the limiter as they are.
"""
from __future__ import annotations

import os
from typing import Any, Mapping

import openai

from medhelm_core.clients.base import model_api
from medhelm_core.clients.openai_compatible import (OpenAICompatibleClient, apply_edition_switches,
                                                    vision_language_models)
from medhelm_core.helm_config.deployments import API_KEY_ENV_PREFIX, resolve_api_key, resolve_base_url
from medhelm_core.errors import MedhelmError

AZURE_OPENAI_CLIENT = "helm.clients.azure_openai_client.AzureOpenAIClient"
GATEWAY_AZURE_OPENAI_CLIENT = "helm.clients.stanfordhealthcare_azure_openai_client.StanfordHealthCareAzureOpenAIClient"
GATEWAY_SHC_OPENAI_CLIENT = "helm.clients.stanfordhealthcare_shc_openai_client.StanfordHealthCareSHCOpenAIClient"

AZURE_DEFAULT_API_VERSION = "2024-07-01-preview"  # HELM's AzureOpenAIClient.API_VERSION
SHC_API_VERSION = "2024-08-01-preview"  # HELM's StanfordHealthCareSHCOpenAIClient.API_VERSION
GATEWAY_KEY_HEADER = "Ocp-Apim-Subscription-Key"
AZURE_ENDPOINT_ENV = "AZURE_OPENAI_ENDPOINT"
AZURE_KEY_ENV = "AZURE_OPENAI_API_KEY"


def credentials_file(credentials) -> str:
    """Where the credentials were read from (or would be), for messages."""
    source = str(getattr(credentials, "source", "") or "credentials.conf")
    return source.removesuffix(" (absent)")


def credential_value(credentials, key: str) -> str | None:
    value = credentials.get(key)
    return value.get_secret_value() if value is not None else None


def resolve_endpoint(deployment, credentials, env: Mapping[str, str] | None = None) -> str | None:
    """HELM's `endpoint` constructor arg: `client_spec.args.endpoint`, else credentials `<org>Endpoint`;
    the Azure clients then fall back to `$AZURE_OPENAI_ENDPOINT` (the SDK's variable)."""
    explicit = deployment.client_spec.args.get("endpoint")
    if explicit is not None:
        return str(explicit)
    value = credential_value(credentials, f"{deployment.host_organization}Endpoint")
    if value:
        return value
    if env is not None and env.get(AZURE_ENDPOINT_ENV):
        return env[AZURE_ENDPOINT_ENV]
    return None


def format_gateway_url(template: str, endpoint: str) -> str:
    """`base_url.format(endpoint=...)` as HELM's gateway clients do; a template naming anything else fails
    with a MedhelmError rather than a KeyError."""
    try:
        return template.format(endpoint=endpoint)
    except (KeyError, IndexError, ValueError) as e:
        raise MedhelmError(f"base_url {template!r} is not a gateway template with only {{endpoint}} in it "
                           f"({type(e).__name__}: {e})") from None


def _short(class_name: str) -> str:
    return class_name.rsplit(".", 1)[-1]


def _own_key_env() -> dict[str, str]:
    """The environment a gateway's or Azure's key may come from: only `$MEDHELM_API_KEY_<ORG>`, never a
    vendor's usual variable ($OPENAI_API_KEY, $GOOGLE_API_KEY...), which belongs to that vendor's own API."""
    return {k: v for k, v in os.environ.items() if k.startswith(API_KEY_ENV_PREFIX)}


def gateway_key(deployment, credentials, class_name: str) -> str:
    """The gateway's subscription key: HELM's `api_key` (`<org>ApiKey`, or the deployment's entry in the
    credentials `deployments` table; `$MEDHELM_API_KEY_<ORG>` too). Never `$OPENAI_API_KEY`."""
    env = _own_key_env()
    try:
        return resolve_api_key(deployment, credentials, env=env).get_secret_value()
    except MedhelmError:
        org = deployment.host_organization
        raise MedhelmError(f"deployment {deployment.name!r} ({_short(class_name)}) has no API key: set {org}ApiKey "
                           f"in {credentials_file(credentials)}") from None


def _azure_key(deployment, credentials) -> str:
    """AzureOpenAIClient's key: `<org>ApiKey` (or the other places `resolve_api_key` looks, not
    `$OPENAI_API_KEY`), else `$AZURE_OPENAI_API_KEY`, which the SDK reads when HELM passes none."""
    env = _own_key_env()
    try:
        return resolve_api_key(deployment, credentials, env=env).get_secret_value()
    except MedhelmError:
        if os.environ.get(AZURE_KEY_ENV):
            return os.environ[AZURE_KEY_ENV]
        org = deployment.host_organization
        raise MedhelmError(f"deployment {deployment.name!r} (AzureOpenAIClient) has no API key: set {org}ApiKey "
                           f"in {credentials_file(credentials)} or ${AZURE_KEY_ENV}") from None


def _check_url(deployment, url: str, what: str) -> str:
    if not url.lower().startswith(("http://", "https://")):
        raise MedhelmError(f"deployment {deployment.name!r}: {what} is not an http(s) URL")
    return url


class AzureOpenAIChatClient(OpenAICompatibleClient):
    """OpenAI chat completions through `openai.AzureOpenAI` (one of `azure_endpoint`, `base_url`)."""

    def __init__(self, api_key: str, api_version: str, azure_endpoint: str | None = None,
                 base_url: str | None = None, deployment_name: str | None = None,
                 default_headers: dict[str, str] | None = None, timeout_s: float = 600.0,
                 max_concurrency: int | None = None, vision_language_models: frozenset[str] | None = None,
                 http_client=None, class_name: str = AZURE_OPENAI_CLIENT):
        if (azure_endpoint is None) == (base_url is None):
            raise ValueError("exactly one of azure_endpoint and base_url")
        sdk = openai.AzureOpenAI(api_key=api_key, api_version=api_version, azure_endpoint=azure_endpoint,
                                 base_url=base_url, default_headers=default_headers, max_retries=0,
                                 timeout=timeout_s, http_client=http_client)
        super().__init__(None, api_key, openai_model_name=deployment_name, timeout_s=timeout_s,
                         max_concurrency=max_concurrency, vision_language_models=vision_language_models,
                         sdk_client=sdk)
        self.api_version = api_version
        self.class_name = class_name

    def __repr__(self) -> str:
        return (f"{_short(self.class_name)}(base_url={str(self._client.base_url)!r}, "
                f"deployment={self.openai_model_name!r}, api_version={self.api_version!r})")


def _string_headers(value: Any, deployment) -> dict[str, str] | None:
    if value is None:
        return None
    if hasattr(value, "get_secret_value"):  # a secret-looking arg name was wrapped; headers are a mapping
        raise MedhelmError(f"deployment {deployment.name!r}: client_spec.args.default_headers must be a mapping")
    if not isinstance(value, Mapping):
        raise MedhelmError(f"deployment {deployment.name!r}: client_spec.args.default_headers must be a mapping")
    return {str(k): str(v) for k, v in value.items()}


@model_api(AZURE_OPENAI_CLIENT)
def azure_openai_client(deployment, credentials, max_concurrency: int | None = None,
                        timeout_s: float = 600.0, edition_switches=None) -> AzureOpenAIChatClient:
    """HELM's AzureOpenAIClient: `azure_openai_deployment_name`, `api_version` (default
    2024-07-01-preview), `default_headers`; exactly one of an endpoint (`endpoint` arg, credentials
    `<org>Endpoint`, else `$AZURE_OPENAI_ENDPOINT`) and a base URL (`base_url` arg or `<org>BaseUrl`)."""
    args = deployment.client_spec.args
    org = deployment.host_organization
    base_url = resolve_base_url(deployment, credentials)
    endpoint = resolve_endpoint(deployment, credentials, env=os.environ)
    if (base_url is None) == (endpoint is None):
        where = credentials_file(credentials)
        if base_url is None:
            raise MedhelmError(f"deployment {deployment.name!r} (AzureOpenAIClient) has no endpoint: set {org}Endpoint "
                               f"in {where} (https://<resource>.openai.azure.com) or ${AZURE_ENDPOINT_ENV}")
        raise MedhelmError(f"deployment {deployment.name!r} (AzureOpenAIClient): give either an endpoint "
                           f"({org}Endpoint in {where}, ${AZURE_ENDPOINT_ENV}) or a base_url, not both")
    if base_url is not None:
        _check_url(deployment, base_url, "its base_url")
    else:
        _check_url(deployment, endpoint, f"its endpoint ({org}Endpoint or ${AZURE_ENDPOINT_ENV})")
    deployment_name = args.get("azure_openai_deployment_name")
    client = AzureOpenAIChatClient(
        api_key=_azure_key(deployment, credentials),
        api_version=str(args.get("api_version") or AZURE_DEFAULT_API_VERSION),
        azure_endpoint=None if base_url is not None else endpoint,
        base_url=base_url,
        deployment_name=str(deployment_name) if deployment_name is not None else None,
        default_headers=_string_headers(args.get("default_headers"), deployment),
        timeout_s=timeout_s, max_concurrency=max_concurrency,
        vision_language_models=vision_language_models(deployment),
    )
    return apply_edition_switches(client, edition_switches)


def _gateway_endpoint(deployment, credentials, class_name: str, env: Mapping[str, str] | None = None) -> str:
    endpoint = resolve_endpoint(deployment, credentials, env=env)
    if not endpoint:
        org = deployment.host_organization
        raise MedhelmError(f"deployment {deployment.name!r} ({_short(class_name)}) has no endpoint: set {org}Endpoint "
                           f"(the gateway's https:// URL) in {credentials_file(credentials)}")
    return endpoint


@model_api(GATEWAY_AZURE_OPENAI_CLIENT)
def stanfordhealthcare_azure_openai_client(deployment, credentials, max_concurrency: int | None = None,
                                           timeout_s: float = 600.0, edition_switches=None) -> AzureOpenAIChatClient:
    """The gateway's Azure OpenAI: args `openai_model_name` (the Azure deployment), `api_version`,
    optional `base_url` template (`{endpoint}/openai-eastus2`); credentials `<org>ApiKey`, `<org>Endpoint`.
    Key sent twice: `api-key` and `Ocp-Apim-Subscription-Key`."""
    args = deployment.client_spec.args
    key = gateway_key(deployment, credentials, GATEWAY_AZURE_OPENAI_CLIENT)
    template = resolve_base_url(deployment, credentials)
    if template:
        # HELM formats the template even without an endpoint; a base_url without {endpoint} needs none.
        endpoint = _gateway_endpoint(deployment, credentials, GATEWAY_AZURE_OPENAI_CLIENT) \
            if "{" in template else ""
        base_url = _check_url(deployment, format_gateway_url(template, endpoint), "its base_url")
        azure_endpoint = None
    else:
        base_url = None
        azure_endpoint = _check_url(
            deployment, _gateway_endpoint(deployment, credentials, GATEWAY_AZURE_OPENAI_CLIENT, env=os.environ),
            f"its endpoint ({deployment.host_organization}Endpoint)")
    api_version = args.get("api_version")
    if api_version is None:
        raise MedhelmError(f"deployment {deployment.name!r} (StanfordHealthCareAzureOpenAIClient) needs "
                           f"client_spec.args.api_version in {deployment.source or 'model_deployments.yaml'}")
    model_name = args.get("openai_model_name")
    client = AzureOpenAIChatClient(
        api_key=key, api_version=str(api_version), azure_endpoint=azure_endpoint, base_url=base_url,
        deployment_name=str(model_name) if model_name is not None else None,
        default_headers={GATEWAY_KEY_HEADER: key}, timeout_s=timeout_s, max_concurrency=max_concurrency,
        vision_language_models=vision_language_models(deployment), class_name=GATEWAY_AZURE_OPENAI_CLIENT,
    )
    return apply_edition_switches(client, edition_switches)


@model_api(GATEWAY_SHC_OPENAI_CLIENT)
def stanfordhealthcare_shc_openai_client(deployment, credentials, max_concurrency: int | None = None,
                                         timeout_s: float = 600.0, edition_switches=None) -> AzureOpenAIChatClient:
    """SHC's Azure OpenAI: endpoint `<org>Endpoint`, api-version 2024-08-01-preview, the model engine as
    the Azure deployment (HELM passes no deployment name), `api-key` only (plus `default_headers` if
    configured)."""
    args = deployment.client_spec.args
    key = gateway_key(deployment, credentials, GATEWAY_SHC_OPENAI_CLIENT)
    endpoint = _check_url(
        deployment, _gateway_endpoint(deployment, credentials, GATEWAY_SHC_OPENAI_CLIENT, env=os.environ),
        f"its endpoint ({deployment.host_organization}Endpoint)")
    client = AzureOpenAIChatClient(
        api_key=key, api_version=SHC_API_VERSION, azure_endpoint=endpoint,
        default_headers=_string_headers(args.get("default_headers"), deployment),
        timeout_s=timeout_s, max_concurrency=max_concurrency,
        vision_language_models=vision_language_models(deployment), class_name=GATEWAY_SHC_OPENAI_CLIENT,
    )
    return apply_edition_switches(client, edition_switches)
