"""Model deployments, model metadata and credentials: HELM's `prod_env` (`--local-path`) layout.

HELM (`benchmark/config_registry.py`) registers, first from its own package (`helm/config/`),
then from `--local-path` (default `prod_env`):

* `model_metadata.yaml`   `models: [{name, creator_organization_name, display_name, description,
                           access, release_date, tags, num_parameters, deployment_names}]`
* `tokenizer_configs.yaml` `tokenizer_configs: [{name, tokenizer_spec{class_name, args}, ...}]`
* `model_deployments.yaml` `model_deployments: [{name, model_name, tokenizer_name,
                           max_sequence_length, client_spec{class_name, args{...}}, ...}]`

and reads `credentials.conf` (HOCON `key: "value"`) from the local path, unless the environment
variable `HELM_CREDENTIALS` holds the credentials text itself (`common/general.py`
`get_credentials`). Unknown YAML keys are ignored (cattrs/dacite, non-strict).

Our built-in layer is this package's folder (`model_deployments.yaml`, `model_metadata.yaml`,
`tokenizer_configs.yaml`), transcribed from HELM's lists in HELM's order: the MedHELM confs' deployments
and their models' other deployments, the OpenAI/Anthropic/Google/Together public-API text deployments,
HELM's `huggingface/*` HuggingFaceClient deployments (each model with all its deployments, which decide
its default one), their models' metadata with HELM's tags and their tokenizer configs. A run entry naming
one needs no local path; a user's local path overrides a built-in entry of the same name.

Registration follows `model_deployment_registry.py` `register_model_deployment`: deployments are
kept in registration order (builtin, then local; a repeated name replaces the lookup entry but
stays in the ordered list); a deployment whose model has no metadata registers placeholder
metadata (`get_unknown_model_metadata`: tags TEXT_MODEL_TAG, FULL_FUNCTIONALITY_TEXT_MODEL_TAG).
`default_deployment_for_model` is `get_default_model_deployment_for_model`: the LAST registered
non-deprecated deployment whose `model_name` is the model, else the last deprecated one, else a
deployment named like the model.

API keys (`clients/auto_client.py` `_get_client` + `common/credentials_utils.py`
`provide_api_key`): the client gets `client_spec.args.api_key` if the deployment sets it,
otherwise `credentials["<host_organization>ApiKey"]`, where host_organization is the part of
the deployment name before the first "/", otherwise `credentials["deployments"]["<deployment
name>"]`; otherwise HELM passes None and the OpenAI SDK falls back to `$OPENAI_API_KEY`.
We add one fallback of our own before that: `$MEDHELM_API_KEY_<ORG>` (ORG = host organization,
upper-cased, non-alphanumerics -> "_"), and apply `$OPENAI_API_KEY` only to OpenAI clients that
talk to OpenAI itself (no base_url, api.openai.com, or loopback), never to another vendor's
OpenAI-compatible endpoint. The same rule gives the other vendors' usual variables
(`VENDOR_KEY_ENV`: together -> `$TOGETHER_API_KEY`, anthropic -> `$ANTHROPIC_API_KEY`, google/gemini
-> `$GOOGLE_API_KEY`, `$GEMINI_API_KEY`) to a deployment of that host organization only when its
requests go to that vendor's own API (its own client with no base URL, the vendor's host, or
loopback); the vendors' SDKs, which HELM's clients leave the key to, read the same variables.
Secrets are pydantic `SecretStr` everywhere; no repr, str or error message contains one.
"""
from __future__ import annotations

import datetime as _dt
import logging
import os
import re
from pathlib import Path
from typing import Any, Mapping, Optional

import yaml
from pydantic import BaseModel, ConfigDict, Field, SecretStr, ValidationError, field_validator, model_validator

from medhelm_core.helm_config.run_entries import parse_hocon
from medhelm_core.errors import MedhelmError, validation_message
from medhelm_core.resources import HELM_REGISTRY_DIR
from medhelm_core.yamlio import safe_load

log = logging.getLogger(__name__)

BUILTIN_CONFIG_DIR = HELM_REGISTRY_DIR
MODEL_METADATA_FILE = "model_metadata.yaml"
TOKENIZER_CONFIGS_FILE = "tokenizer_configs.yaml"
MODEL_DEPLOYMENTS_FILE = "model_deployments.yaml"
CREDENTIALS_FILE = "credentials.conf"
CREDENTIALS_ENV = "HELM_CREDENTIALS"
DEFAULT_LOCAL_PATH = "prod_env"
API_KEY_ENV_PREFIX = "MEDHELM_API_KEY_"
OPENAI_API_KEY_ENV = "OPENAI_API_KEY"

# HELM model_metadata_registry tags used by run expansion.
TEXT_MODEL_TAG = "TEXT_MODEL_TAG"
FULL_FUNCTIONALITY_TEXT_MODEL_TAG = "FULL_FUNCTIONALITY_TEXT_MODEL_TAG"

# client_spec.args keys that hold secrets.
_SECRET_ARG = re.compile(r"(?i)(^|_)(api_?key|key|token|secret|password|passwd)$")


def _hide_secrets(value: Any) -> Any:
    if isinstance(value, SecretStr) or value is None:
        return value
    if isinstance(value, (dict, list)):
        return SecretStr(repr(value))
    return SecretStr(str(value))


# --------------------------------------------------------------------------------------------
# Models
# --------------------------------------------------------------------------------------------


class ObjectSpecModel(BaseModel):
    """HELM's `ObjectSpec` (class_name, args)."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    class_name: str
    args: dict[str, Any] = Field(default_factory=dict)


class ClientSpec(ObjectSpecModel):
    """How to build the client; secret-looking args (`api_key`, `*_token`, ...) become SecretStr."""

    @field_validator("args", mode="before")
    @classmethod
    def _secret_args(cls, args: Any) -> Any:
        if not isinstance(args, dict):
            return args
        return {k: (_hide_secrets(v) if _SECRET_ARG.search(str(k)) else v) for k, v in args.items()}


class Deployment(BaseModel):
    """HELM's `ModelDeployment`."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    name: str
    client_spec: ClientSpec
    # Defaults to `name` (ModelDeployment.__post_init__).
    model_name: Optional[str] = None
    tokenizer_name: Optional[str] = None
    window_service_spec: Optional[ObjectSpecModel] = None
    max_sequence_length: Optional[int] = None
    max_request_length: Optional[int] = None
    max_sequence_and_generated_tokens_length: Optional[int] = None
    deprecated: bool = False
    # Not a HELM field: the YAML file this deployment came from.
    source: Optional[str] = Field(default=None, repr=False, exclude=True)

    @model_validator(mode="before")
    @classmethod
    def _default_model_name(cls, data: Any) -> Any:
        if isinstance(data, dict) and not data.get("model_name"):
            data = {**data, "model_name": data.get("name")}
        return data

    @property
    def host_organization(self) -> str:
        """"stanfordhealthcare" for "stanfordhealthcare/gpt-4o-2024-05-13"."""
        return self.name.split("/")[0]

    @property
    def engine(self) -> str:
        return self.name.split("/")[1] if "/" in self.name else self.name


class ModelMetadata(BaseModel):
    """HELM's `ModelMetadata` (only `name` and `tags` matter for run expansion)."""

    model_config = ConfigDict(extra="ignore")

    name: str
    creator_organization_name: str
    display_name: str
    description: str
    access: str
    release_date: Optional[_dt.date] = None
    tags: list[str] = Field(default_factory=list)
    num_parameters: Optional[int] = None
    deployment_names: Optional[list[str]] = None
    source: Optional[str] = Field(default=None, repr=False, exclude=True)


def unknown_model_metadata(model_name: str) -> ModelMetadata:
    """HELM's `get_unknown_model_metadata`."""
    return ModelMetadata(
        name=model_name,
        creator_organization_name="Unknown",
        display_name=model_name,
        description=model_name,
        access="open",
        release_date=_dt.date.today(),
        tags=[TEXT_MODEL_TAG, FULL_FUNCTIONALITY_TEXT_MODEL_TAG],
    )


class TokenizerConfig(BaseModel):
    """HELM's `TokenizerConfig` (kept for completeness; nothing here uses it)."""

    model_config = ConfigDict(extra="ignore")

    name: str
    tokenizer_spec: ObjectSpecModel
    end_of_text_token: Optional[str] = None
    prefix_token: Optional[str] = None


# --------------------------------------------------------------------------------------------
# Registry
# --------------------------------------------------------------------------------------------


def _read_yaml(path: Path) -> Any:
    try:
        with open(path, encoding="utf-8") as f:
            return safe_load(f)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = f":{mark.line + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or "invalid YAML"
        raise MedhelmError(f"{path}{line}: {problem}") from None
    except UnicodeDecodeError:
        raise MedhelmError(f"{path}: not UTF-8 text") from None


def _read_list(path: Path, key: str, model: type[BaseModel]) -> list[Any]:
    raw = _read_yaml(path)
    if raw is None:
        return []
    if not isinstance(raw, dict) or not isinstance(raw.get(key, []), list):
        raise MedhelmError(f"{path}: expected a mapping with a list under {key!r}")
    items = raw.get(key) or []
    out = []
    for i, item in enumerate(items):
        label = f"{key}[{i}]"
        if isinstance(item, dict) and isinstance(item.get("name"), str):
            label += f" ({item['name']!r})"
        if not isinstance(item, dict):
            raise MedhelmError(f"{path}: {label}: expected a mapping")
        data = {**item, "source": str(path)} if "source" in model.model_fields else item
        try:
            out.append(model.model_validate(data))
        except ValidationError as exc:
            raise MedhelmError(f"{path}: {label}: {validation_message(exc)}") from None
    return out


class ModelRegistry:
    """HELM's model metadata + model deployment registries, for one helm-run."""

    def __init__(self) -> None:
        self.deployment_list: list[Deployment] = []          # ALL_MODEL_DEPLOYMENTS
        self.deployments: dict[str, Deployment] = {}         # DEPLOYMENT_NAME_TO_MODEL_DEPLOYMENT
        self.metadata_list: list[ModelMetadata] = []         # ALL_MODELS_METADATA
        self.metadata: dict[str, ModelMetadata] = {}         # MODEL_NAME_TO_MODEL_METADATA
        self.tokenizer_configs: dict[str, TokenizerConfig] = {}
        self.deployment_files: list[str] = []                # every model_deployments.yaml looked at

    # ---- registration ----
    def register_metadata(self, metadata: ModelMetadata) -> None:
        self.metadata_list.append(metadata)
        self.metadata[metadata.name] = metadata

    def register_deployment(self, deployment: Deployment) -> None:
        self.deployments[deployment.name] = deployment
        self.deployment_list.append(deployment)
        model_name = deployment.model_name or deployment.name
        metadata = self.metadata.get(model_name)
        if metadata is None:
            log.warning("no model metadata for model %s of model deployment %s", model_name, deployment.name)
            metadata = unknown_model_metadata(model_name)
            self.register_metadata(metadata)
        names = metadata.deployment_names or [metadata.name]
        if deployment.name not in names:
            if metadata.deployment_names is None:
                metadata.deployment_names = []
            metadata.deployment_names.append(deployment.name)

    def register_directory(self, directory: str | Path) -> None:
        """`register_configs_from_directory`: metadata, tokenizers, then deployments."""
        directory = Path(directory)
        path = directory / MODEL_METADATA_FILE
        if path.is_file():
            for m in _read_list(path, "models", ModelMetadata):
                self.register_metadata(m)
        path = directory / TOKENIZER_CONFIGS_FILE
        if path.is_file():
            for t in _read_list(path, "tokenizer_configs", TokenizerConfig):
                self.tokenizer_configs[t.name] = t
        path = directory / MODEL_DEPLOYMENTS_FILE
        self.deployment_files.append(str(path) + ("" if path.is_file() else " (absent)"))
        if path.is_file():
            for d in _read_list(path, "model_deployments", Deployment):
                self.register_deployment(d)

    # ---- look-ups ----
    def get_deployment(self, name: str) -> Deployment:
        deployment = self.deployments.get(name)
        if deployment is None:
            searched = ", ".join(self.deployment_files) or "no model_deployments.yaml"
            raise MedhelmError(f"unknown model deployment {name!r} (searched: {searched})")
        return deployment

    def default_deployment_for_model(self, model_name: str) -> Optional[str]:
        available = [d for d in self.deployment_list if d.model_name == model_name]
        if available:
            non_deprecated = [d for d in available if not d.deprecated]
            return (non_deprecated or available)[-1].name
        deployment = self.deployments.get(model_name)
        return deployment.name if deployment is not None else None

    def get_model_metadata(self, model_name: str) -> Optional[ModelMetadata]:
        return self.metadata.get(model_name)

    def all_models(self) -> list[str]:
        """`get_all_models`: model names in first-registration order."""
        return list(self.metadata.keys())

    def model_names_with_tag(self, tag: str) -> list[str]:
        """`get_model_names_with_tag` (over the ordered list, so a re-registered model can repeat)."""
        return [m.name for m in self.metadata_list if tag in m.tags]

    def __repr__(self) -> str:
        return (f"ModelRegistry({len(self.deployments)} deployments, {len(self.metadata)} models, "
                f"files={self.deployment_files})")


def load_model_registry(local_path: str | Path | None = DEFAULT_LOCAL_PATH,
                        include_builtin: bool = True) -> ModelRegistry:
    """Built-in configs (this package's folder), then `<local_path>/*.yaml`, as helm-run does."""
    registry = ModelRegistry()
    if include_builtin:
        registry.register_directory(BUILTIN_CONFIG_DIR)
    if local_path is not None:
        registry.register_directory(local_path)
    return registry


def load_deployments(local_path: str | Path | None = DEFAULT_LOCAL_PATH,
                     include_builtin: bool = True) -> dict[str, Deployment]:
    """Deployment name -> Deployment (built-in, then local; local wins on a repeated name)."""
    return dict(load_model_registry(local_path, include_builtin).deployments)


# --------------------------------------------------------------------------------------------
# Credentials and API keys
# --------------------------------------------------------------------------------------------


class Credentials(BaseModel):
    """Parsed credentials.conf; every value is a SecretStr (`deployments` is a nested mapping)."""

    model_config = ConfigDict(frozen=True)

    values: dict[str, Any] = Field(default_factory=dict)
    source: str = "(none)"

    def get(self, key: str) -> Optional[SecretStr]:
        value = self.values.get(key)
        return value if isinstance(value, SecretStr) else None

    def deployment_key(self, deployment_name: str) -> Optional[SecretStr]:
        table = self.values.get("deployments")
        if isinstance(table, dict):
            value = table.get(deployment_name)
            return value if isinstance(value, SecretStr) else None
        return None

    def __contains__(self, key: str) -> bool:
        return key in self.values

    def __repr__(self) -> str:
        return f"Credentials(source={self.source!r}, keys={sorted(self.values)})"

    __str__ = __repr__


def _secret_tree(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(k): _secret_tree(v) for k, v in value.items()}
    return _hide_secrets(value)


def parse_credentials(text: str, source: str) -> Credentials:
    tree = parse_hocon(text, source, redact=True) if text.strip() else {}
    if not isinstance(tree, dict):
        raise MedhelmError(f"{source}:1: credentials must be an object of `key: \"value\"` lines")
    return Credentials(values=_secret_tree(tree), source=source)


def load_credentials(local_path: str | Path | None = DEFAULT_LOCAL_PATH,
                     env: Mapping[str, str] | None = None) -> Credentials:
    """`get_credentials`: `$HELM_CREDENTIALS` if non-empty, else `<local_path>/credentials.conf`."""
    env = os.environ if env is None else env
    raw = env.get(CREDENTIALS_ENV, "")
    if raw:
        return parse_credentials(raw, f"${CREDENTIALS_ENV}")
    if local_path is None:
        return Credentials()
    path = Path(local_path) / CREDENTIALS_FILE
    if not path.is_file():
        return Credentials(source=f"{path} (absent)")
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise MedhelmError(f"{path}: not UTF-8 text") from None
    return parse_credentials(text, str(path))


def api_key_env_var(host_organization: str) -> str:
    """`MEDHELM_API_KEY_<ORG>`: e.g. stanfordhealthcare -> MEDHELM_API_KEY_STANFORDHEALTHCARE."""
    return API_KEY_ENV_PREFIX + re.sub(r"[^A-Za-z0-9]", "_", host_organization).upper()


# HELM's clients of OpenAI's own API. Azure's and the Stanford gateway's OpenAI-family classes are not:
# an OpenAI key must never go to them.
_OPENAI_OWN_CLIENTS = frozenset({"OpenAIClient", "OpenAILegacyCompletionsClient", "OpenAIResponseClient"})


def _is_openai_client(deployment: Deployment) -> bool:
    return deployment.client_spec.class_name.rsplit(".", 1)[-1] in _OPENAI_OWN_CLIENTS


_OPENAI_KEY_HOSTS = {"api.openai.com", "localhost", "127.0.0.1", "::1"}


def _sdk_base_url(names: tuple[str, ...], env: Mapping[str, str]) -> Optional[str]:
    return next((env[name] for name in names if env.get(name)), None)


def _takes_openai_key(deployment: Deployment, credentials: "Credentials",
                      env: Mapping[str, str] | None = None) -> bool:
    """$OPENAI_API_KEY goes only to OpenAI itself (or loopback): an OpenAIClient pointed at another
    vendor's OpenAI-compatible endpoint (by its base_url, or by the SDK's $OPENAI_BASE_URL) must never
    receive it."""
    if not _is_openai_client(deployment):
        return False
    from urllib.parse import urlparse

    env = os.environ if env is None else env
    url = resolve_base_url(deployment, credentials) or _sdk_base_url(("OPENAI_BASE_URL",), env)
    return url is None or (urlparse(url).hostname or "") in _OPENAI_KEY_HOSTS


class VendorKey(BaseModel):
    """A vendor's usual API-key variables (first set wins), the hosts of its own API, and the words
    of its own client classes (which send to that API when the deployment gives no base URL)."""
    model_config = ConfigDict(frozen=True)
    vendor: str
    env: tuple[str, ...]
    hosts: frozenset[str]
    # HELM's client classes of the vendor's own API (exact short names: a substring would also match
    # e.g. StanfordHealthCareGoogleClient, whose requests go to Stanford's gateway).
    client_classes: frozenset[str]
    # The SDK's own base-URL variables: where such a client sends when the deployment names no base URL.
    base_url_env: tuple[str, ...] = ()


_GOOGLE_KEY = VendorKey(vendor="Google (Gemini API)", env=("GOOGLE_API_KEY", "GEMINI_API_KEY"),
                        hosts=frozenset({"generativelanguage.googleapis.com"}),
                        client_classes=frozenset({"GoogleGenAIClient"}), base_url_env=("GOOGLE_GEMINI_BASE_URL",))
# host organization -> the vendor's usual key variables ($OPENAI_API_KEY: `_takes_openai_key`).
VENDOR_KEY_ENV: dict[str, VendorKey] = {
    "together": VendorKey(vendor="Together AI", env=("TOGETHER_API_KEY",),
                          hosts=frozenset({"api.together.xyz", "api.together.ai"}),
                          client_classes=frozenset({"TogetherClient", "TogetherChatClient", "TogetherCompletionClient"}),
                          base_url_env=("TOGETHER_BASE_URL",)),
    "anthropic": VendorKey(vendor="Anthropic", env=("ANTHROPIC_API_KEY",), hosts=frozenset({"api.anthropic.com"}),
                           client_classes=frozenset({"AnthropicClient", "AnthropicMessagesClient",
                                                     "AnthropicLegacyClient"}),
                           base_url_env=("ANTHROPIC_BASE_URL",)),
    "google": _GOOGLE_KEY,
    "gemini": _GOOGLE_KEY,
}
_LOOPBACK_HOSTS = {"localhost", "127.0.0.1", "::1"}
# Google's SDK settings that send a GoogleGenAIClient to Vertex AI (keys there are not Gemini API keys).
_VERTEX_ENV = ("GOOGLE_GENAI_USE_VERTEXAI", "GOOGLE_GENAI_USE_ENTERPRISE")


def _on_vertex(deployment: Deployment, credentials: "Credentials", env: Mapping[str, str]) -> bool:
    org = deployment.host_organization
    flag = str(deployment.client_spec.args.get("genai_use_vertexai", "")).strip().lower()
    return ("vertex" in deployment.client_spec.class_name.lower() or flag in ("1", "true", "yes", "on")
            or credentials.get(f"{org}ProjectId") is not None or credentials.get(f"{org}Location") is not None
            or any(env.get(name, "").strip().lower() in ("1", "true", "yes", "on") for name in _VERTEX_ENV))


def vendor_key_env(deployment: Deployment, credentials: "Credentials",
                   env: Mapping[str, str] | None = None) -> tuple[str, ...]:
    """The vendor's usual key variables this deployment may take (empty when its requests do not go to
    that vendor's own API): `$OPENAI_API_KEY` for OpenAI itself, `VENDOR_KEY_ENV` for the others."""
    env = os.environ if env is None else env
    if _takes_openai_key(deployment, credentials, env):
        return (OPENAI_API_KEY_ENV,)
    spec = VENDOR_KEY_ENV.get(deployment.host_organization)
    if spec is None:
        return ()
    from urllib.parse import urlparse

    short = deployment.client_spec.class_name.rsplit(".", 1)[-1]
    if short not in spec.client_classes:
        return ()
    url = resolve_base_url(deployment, credentials) or _sdk_base_url(spec.base_url_env, env)
    if url is None:
        ours = True
    else:
        host = urlparse(url).hostname or ""
        ours = host in spec.hosts or host in _LOOPBACK_HOSTS
    if not ours or (spec is _GOOGLE_KEY and _on_vertex(deployment, credentials, env)):
        return ()
    return spec.env


def resolve_api_key(deployment: Deployment, credentials: Credentials,
                    env: Mapping[str, str] | None = None) -> SecretStr:
    """The API key a HELM client of `deployment` would get (see module doc for the order)."""
    env = os.environ if env is None else env
    explicit = deployment.client_spec.args.get("api_key")
    if explicit is not None:
        return explicit if isinstance(explicit, SecretStr) else SecretStr(str(explicit))
    org = deployment.host_organization
    key = credentials.get(f"{org}ApiKey")
    if key is not None:
        return key
    key = credentials.deployment_key(deployment.name)
    if key is not None:
        return key
    env_name = api_key_env_var(org)
    if env.get(env_name):
        return SecretStr(env[env_name])
    vendor_env = vendor_key_env(deployment, credentials, env)
    for name in vendor_env:
        if env.get(name):
            return SecretStr(env[name])
    where = [
        f"client_spec.args.api_key of the deployment ({deployment.source or 'model_deployments.yaml'})",
        f"'{org}ApiKey' and deployments.\"{deployment.name}\" in {credentials.source}",
        f"${env_name}",
    ]
    where += [f"${name}" for name in vendor_env]
    raise MedhelmError(f"no API key for model deployment {deployment.name!r}: looked in " + ", ".join(where))


def resolve_base_url(deployment: Deployment, credentials: Credentials) -> Optional[str]:
    """client_spec.args.base_url, else credentials `<org>BaseUrl` (auto_client provider binding)."""
    explicit = deployment.client_spec.args.get("base_url")
    if explicit is not None:
        return str(explicit)
    value = credentials.get(f"{deployment.host_organization}BaseUrl")
    return value.get_secret_value() if value is not None else None


def resolve_org_id(deployment: Deployment, credentials: Credentials) -> Optional[str]:
    """client_spec.args.org_id, else credentials `<org>OrgId`."""
    explicit = deployment.client_spec.args.get("org_id")
    if explicit is not None:
        return str(explicit)
    value = credentials.get(f"{deployment.host_organization}OrgId")
    return value.get_secret_value() if value is not None else None
