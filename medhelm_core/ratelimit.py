"""Per-deployment request limits: settings, token buckets, adaptive concurrency, retry policy.

Settings (`conf/deployments.yaml`, then `<local_path>/medhelm_deployments.yaml`)
---------------------------------------------------------------------------------
HELM has no per-deployment limits or prices, and it passes every `client_spec.args` key of
`model_deployments.yaml` to the client's constructor, so ours cannot live there without breaking
that file for HELM. They live in a file of our own, keyed by deployment name::

    defaults:                      # applies to every deployment
      max_attempts: 6
    deployments:
      "*/gpt-4o-mini-2024-07-18":  # fnmatch pattern or exact deployment name
        input_per_million: 0.15    # USD per 1M prompt tokens
        output_per_million: 0.60   # USD per 1M completion tokens
      mockai/mock-gpt-a:
        max_concurrency: 32        # most requests in flight (adaptive concurrency stays below it)
        requests_per_minute: 3000
        tokens_per_minute: 2000000

Layering, later wins key by key: built-in `defaults`, local `defaults`, then the built-in file's
entries whose pattern matches (file order), the built-in exact name, the local file's matching
patterns, the local exact name. Unknown keys are errors (a typo must not silently lift a limit).

What the engine does with them (`EndpointLimiter`, one per deployment and process):

* at most `limit` requests in flight, where `limit` starts at `initial_concurrency` (default
  `max_concurrency`, default `--num-threads`) and moves AIMD-style: a 429 cuts it by
  `decrease_factor` (once per `cooldown_s` episode, so one burst of 429s is one cut), and a full
  round of `limit` successes with no 429 within `cooldown_s` adds one, up to `max_concurrency`.
  5xx/timeouts pause growth but do not cut (they are not a rate signal).
* `requests_per_minute` / `tokens_per_minute`: token buckets holding one second's worth (paced
  evenly, no minute-long burst). A request takes its prompt tokens (the deployment's tokenizer)
  plus `max_tokens`; the difference to the tokens the API reports is given back afterwards.
* `Retry-After` / `retry-after-ms` on a 429 pause the whole deployment until then; the
  `x-ratelimit-remaining-requests|tokens` headers at zero (tokens: below one average request)
  pause it until `x-ratelimit-reset-requests|tokens`.
* retries: at most `max_attempts` attempts; the wait is the server's Retry-After (plus up to 10%
  jitter) or exponential back-off `base_delay_s * 2^(n-1)` capped at `max_delay_s`, with full
  jitter in its upper half.
"""
from __future__ import annotations

import fnmatch
import heapq
import itertools
import math
import random
import re
import threading
import time
from dataclasses import dataclass
from email.utils import parsedate_to_datetime
from pathlib import Path
from typing import Any, Mapping, Optional

import yaml
from pydantic import BaseModel, ConfigDict, ValidationError, field_validator

from medhelm_core.errors import MedhelmError
from medhelm_core.resources import DEFAULT_DEPLOYMENTS_SETTINGS_PATH
from medhelm_core.yamlio import safe_load

PROJECT_CONF = DEFAULT_DEPLOYMENTS_SETTINGS_PATH  # medhelm_core/resources/settings/deployments.yaml
LOCAL_CONF_NAME = "medhelm_deployments.yaml"


# ---------------------------------------------------------------------------------------------
# Settings
# ---------------------------------------------------------------------------------------------
class DeploymentSettings(BaseModel):
    """Everything medhelm (not HELM) knows about one deployment: limits, retries, prices."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    max_concurrency: Optional[int] = None
    initial_concurrency: Optional[int] = None
    min_concurrency: int = 1
    adaptive: bool = True
    decrease_factor: float = 0.7
    cooldown_s: float = 2.0
    requests_per_minute: Optional[float] = None
    tokens_per_minute: Optional[float] = None
    max_attempts: int = 6
    base_delay_s: float = 1.0
    max_delay_s: float = 60.0
    timeout_s: float = 600.0
    input_per_million: Optional[float] = None
    output_per_million: Optional[float] = None
    # In-process models (HuggingFaceClient): requests generated together; 1 is HELM's one at a time.
    batch_size: Optional[int] = None
    # Vendors' batch APIs (medhelm_core.batch): send this deployment's requests as batches; most requests
    # per batch (None: the vendor's limit); seconds between polls; the fraction taken off the online
    # price of a batched request (None: the vendor's usual cut, `batch.Flavour.discount`: 0.5).
    batch: bool = False
    batch_max_requests: Optional[int] = None
    batch_poll_seconds: float = 60.0
    batch_discount: Optional[float] = None
    # Amazon Bedrock batch inference (`batch.bedrock`): the S3 prefix its input and output files go under
    # (s3://bucket[/prefix]), and the IAM service role Bedrock assumes to read and write them.
    batch_s3_uri: Optional[str] = None
    batch_role_arn: Optional[str] = None
    # Vertex AI batch prediction (`batch.vertex`): the Cloud Storage prefix (gs://bucket[/prefix]) its input
    # and output files go under.
    batch_gcs_uri: Optional[str] = None
    # Fewest requests of one model a batch holds (None: the vendor's, Bedrock's quota 100, which AWS raises
    # or lowers per account); fewer are asked online.
    batch_min_requests: Optional[int] = None

    @field_validator("batch_min_requests")
    @classmethod
    def _positive_min(cls, v):
        if v is not None and v < 1:
            raise ValueError("must be >= 1")
        return v

    @field_validator("max_concurrency", "initial_concurrency", "min_concurrency", "max_attempts", "batch_size",
                     "batch_max_requests")
    @classmethod
    def _positive_int(cls, v):
        if v is not None and v < 1:
            raise ValueError("must be >= 1")
        return v

    @field_validator("requests_per_minute", "tokens_per_minute", "timeout_s", "cooldown_s", "batch_poll_seconds")
    @classmethod
    def _positive(cls, v):
        if v is not None and v <= 0:
            raise ValueError("must be > 0")
        return v

    @field_validator("input_per_million", "output_per_million", "base_delay_s", "max_delay_s")
    @classmethod
    def _non_negative(cls, v):
        if v is not None and v < 0:
            raise ValueError("must be >= 0")
        return v

    @field_validator("batch_discount")
    @classmethod
    def _fraction(cls, v):
        if v is not None and not 0 <= v < 1:
            raise ValueError("must be within [0, 1)")
        return v

    @field_validator("decrease_factor")
    @classmethod
    def _factor(cls, v):
        if not 0 < v < 1:
            raise ValueError("must be within (0, 1)")
        return v

    @property
    def priced(self) -> bool:
        return self.input_per_million is not None and self.output_per_million is not None

    def cost(self, prompt_tokens: int | None, completion_tokens: int | None) -> float | None:
        if not self.priced or prompt_tokens is None or completion_tokens is None:
            return None
        return (prompt_tokens * self.input_per_million + completion_tokens * self.output_per_million) / 1e6

    def batch_cost(self, prompt_tokens: int | None, completion_tokens: int | None,
                   vendor_discount: float = 0.0) -> float | None:
        """The cost of a batched request: the online price less `batch_discount` (when not set, the
        vendor's usual `vendor_discount`)."""
        online = self.cost(prompt_tokens, completion_tokens)
        if online is None:
            return None
        return online * (1.0 - self.effective_batch_discount(vendor_discount))

    def effective_batch_discount(self, vendor_discount: float = 0.0) -> float:
        return self.batch_discount if self.batch_discount is not None else vendor_discount

    def concurrency(self, default: int) -> tuple[int, int, int]:
        """(min, initial, max) in-flight requests."""
        high = self.max_concurrency or max(1, default)
        low = min(self.min_concurrency, high)
        start = min(max(self.initial_concurrency or high, low), high)
        return low, start, high


_FIELDS = set(DeploymentSettings.model_fields)


def _read_conf(path: Path) -> tuple[dict, list[tuple[str, dict]]]:
    try:
        raw = safe_load(path.read_text(encoding="utf-8")) or {}
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = f":{mark.line + 1}" if mark is not None else ""
        raise MedhelmError(f"{path}{line}: {getattr(exc, 'problem', None) or 'invalid YAML'}") from None
    if not isinstance(raw, dict) or set(raw) - {"defaults", "deployments"}:
        raise MedhelmError(f"{path}: expected a mapping with 'defaults' and/or 'deployments'")
    defaults = raw.get("defaults") or {}
    entries = raw.get("deployments") or {}
    if not isinstance(defaults, dict) or not isinstance(entries, dict):
        raise MedhelmError(f"{path}: 'defaults' and 'deployments' must be mappings")
    out = []
    for where, values in [("defaults", defaults)] + [(f"deployments.{k!r}", v) for k, v in entries.items()]:
        if not isinstance(values, dict):
            raise MedhelmError(f"{path}: {where}: expected a mapping of settings")
        unknown = sorted(set(values) - _FIELDS)
        if unknown:
            raise MedhelmError(f"{path}: {where}: unknown setting {unknown[0]!r} (known: {', '.join(sorted(_FIELDS))})")
        try:
            DeploymentSettings.model_validate(values)
        except ValidationError as exc:
            err = exc.errors(include_input=False, include_url=False)[0]
            raise MedhelmError(f"{path}: {where}.{'.'.join(map(str, err['loc']))}: {err['msg']}") from None
    for name, values in entries.items():
        out.append((str(name), dict(values)))
    return dict(defaults), out


class SettingsRegistry:
    """Resolves `DeploymentSettings` for a deployment name from the layered conf files."""

    def __init__(self, paths: list[Path]):
        self.paths = [p for p in paths if p.is_file()]
        self._layers = [_read_conf(p) for p in self.paths]
        self._cache: dict[str, DeploymentSettings] = {}

    @classmethod
    def load(cls, local_path: str | Path | None = None, project_conf: Path | None = PROJECT_CONF) -> "SettingsRegistry":
        paths = [project_conf] if project_conf is not None else []
        if local_path is not None:
            paths.append(Path(local_path) / LOCAL_CONF_NAME)
        return cls(paths)

    def for_deployment(self, name: str) -> DeploymentSettings:
        if name not in self._cache:
            merged: dict[str, Any] = {}
            for defaults, _ in self._layers:
                merged.update(defaults)
            for _, entries in self._layers:
                for pattern, values in entries:
                    if pattern != name and fnmatch.fnmatchcase(name, pattern):
                        merged.update(values)
                for pattern, values in entries:
                    if pattern == name:
                        merged.update(values)
            self._cache[name] = DeploymentSettings.model_validate(merged)
        return self._cache[name]

    __call__ = for_deployment

    def describe(self) -> str:
        return ", ".join(str(p) for p in self.paths) or "no deployments settings file"


# ---------------------------------------------------------------------------------------------
# Header parsing
# ---------------------------------------------------------------------------------------------
_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ms|h|m|s)")


def parse_duration(value: str | None) -> float | None:
    """OpenAI's reset durations ('1s', '6m0s', '20ms', '1h2m3.5s') or plain seconds → seconds."""
    if value is None:
        return None
    value = str(value).strip()
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    parts = _DURATION.findall(value)
    if not parts or "".join(a + b for a, b in parts) != value.replace(" ", ""):
        return None
    scale = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}
    return sum(float(n) * scale[u] for n, u in parts)


def retry_after_seconds(headers: Mapping[str, str] | None) -> float | None:
    """`retry-after-ms` (milliseconds), else `Retry-After` (seconds or an HTTP date)."""
    if not headers:
        return None
    ms = headers.get("retry-after-ms")
    if ms:
        try:
            return max(0.0, float(ms) / 1000.0)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


def _int_header(headers: Mapping[str, str], name: str) -> int | None:
    value = headers.get(name)
    if value is None:
        return None
    try:
        return int(float(value))
    except ValueError:
        return None


RATE_LIMIT_HEADER_PREFIXES = ("x-ratelimit-", "retry-after", "anthropic-ratelimit-")


def rate_limit_headers(headers: Mapping[str, str] | None) -> dict[str, str]:
    """Only the rate-limit headers of a response (lower-cased names): nothing else is kept."""
    if not headers:
        return {}
    return {k.lower(): v for k, v in headers.items() if k.lower().startswith(RATE_LIMIT_HEADER_PREFIXES)}


# ---------------------------------------------------------------------------------------------
# Limiter
# ---------------------------------------------------------------------------------------------
class TokenBucket:
    """`rate_per_minute` units per minute, holding at most one second's worth (min one unit).
    `take(n)` waits until the bucket holds min(n, capacity) and then takes n (it may go into
    debt, so a request larger than the capacity still passes, and pays for it afterwards)."""

    def __init__(self, rate_per_minute: float):
        self.rate = rate_per_minute / 60.0
        self.capacity = max(1.0, self.rate)
        self.level = self.capacity
        self.stamp = time.monotonic()
        self.lock = threading.Lock()

    def _refill(self, now: float) -> None:
        self.level = min(self.capacity, self.level + (now - self.stamp) * self.rate)
        self.stamp = now

    def take(self, n: float, stop: threading.Event | None = None) -> bool:
        need = min(n, self.capacity)
        while True:
            with self.lock:
                now = time.monotonic()
                self._refill(now)
                if self.level >= need:
                    self.level -= n
                    return True
                wait = (need - self.level) / self.rate
            if stop is not None:
                if stop.wait(min(wait, 0.5)):
                    return False
            else:
                time.sleep(min(wait, 0.5))

    def give_back(self, n: float) -> None:
        """Positive n returns units (the request used fewer); negative n takes more."""
        with self.lock:
            self._refill(time.monotonic())
            self.level = min(self.capacity, self.level + n)


@dataclass
class Lease:
    tokens: float
    started: float


# Outcome kinds (see clients.Attempt).
OK, CONTENT_FILTER = "ok", "content_filter"
RATE_LIMITED, SERVER_ERROR, TIMEOUT, CONNECTION = "rate_limited", "server_error", "timeout", "connection"
FATAL, FATAL_ENDPOINT = "fatal", "fatal_endpoint"
TRANSIENT = {RATE_LIMITED, SERVER_ERROR, TIMEOUT, CONNECTION}


class EndpointLimiter:
    """Admission control for one deployment: adaptive in-flight limit, RPM/TPM buckets, pauses."""

    def __init__(self, name: str, settings: DeploymentSettings, default_concurrency: int = 8):
        self.name = name
        self.settings = settings
        self.min_limit, start, self.max_limit = settings.concurrency(default_concurrency)
        self.limit = float(start)
        self.in_flight = 0
        self.paused_until = 0.0
        self.cond = threading.Condition()
        # (priority, arrival, its own condition on `cond`'s lock): a freed slot wakes only the waiter
        # first in line, not every worker of every run waiting on the deployment (at a suite's width,
        # hundreds of threads woken per answer, each taking the GIL to go back to sleep).
        self._waiting: list[tuple[float, int, threading.Condition]] = []
        self.rpm = TokenBucket(settings.requests_per_minute) if settings.requests_per_minute else None
        self.tpm = TokenBucket(settings.tokens_per_minute) if settings.tokens_per_minute else None
        self._last_decrease = -math.inf
        self._last_429 = -math.inf
        self._successes = 0
        self._avg_tokens = 0.0
        self.history: list[tuple[float, int]] = [(time.time(), int(self.limit))]  # (time, limit) on change
        self._tickets = itertools.count()
        self.counts: dict[str, int] = {}

    @property
    def current_limit(self) -> int:
        return max(self.min_limit, int(self.limit))

    def pause(self, seconds: float) -> None:
        with self.cond:
            self.paused_until = max(self.paused_until, time.monotonic() + seconds)

    def acquire(self, tokens: float = 0.0, stop: threading.Event | None = None,
                priority: float = 0.0) -> Lease | None:
        """Wait for a slot (and bucket capacity); None if `stop` was set meanwhile. A free slot
        goes to the waiter with the lowest `priority` (then the longest waiting): the runs of a
        suite that started first finish first, so their scoring overlaps the others' calls."""
        mine = threading.Condition(self.cond._lock)   # noqa: SLF001 - the limiter's own lock, shared
        ticket = (priority, next(self._tickets), mine)
        with self.cond:
            heapq.heappush(self._waiting, ticket)
            try:
                while True:
                    if stop is not None and stop.is_set():
                        return None
                    now = time.monotonic()
                    if now < self.paused_until:
                        mine.wait(min(self.paused_until - now, 0.5))
                        continue
                    if self.in_flight < self.current_limit and self._waiting[0] is ticket:
                        self.in_flight += 1
                        break
                    mine.wait(0.5)   # woken when first in line and a slot is free; 0.5 s: to see `stop`
            finally:
                if self._waiting and self._waiting[0] is ticket:
                    heapq.heappop(self._waiting)
                else:  # stopped while waiting behind others
                    self._waiting.remove(ticket)
                    heapq.heapify(self._waiting)
                self._wake_next()  # the next in line may take a slot that is still free
        try:
            if self.rpm is not None and not self.rpm.take(1, stop):
                raise _Stopped
            if self.tpm is not None and tokens and not self.tpm.take(tokens, stop):
                raise _Stopped
        except _Stopped:
            self._free()
            return None
        return Lease(tokens, time.monotonic())

    def cancel(self, lease: Lease) -> None:
        """Give a lease back unused: its request was never sent."""
        if self.tpm is not None:
            self.tpm.give_back(lease.tokens)
        self._free()

    def _free(self) -> None:
        with self.cond:
            self.in_flight -= 1
            self._wake_next()

    def _wake_next(self) -> None:
        """Wake the waiter first in line when a slot is free (under `cond`): it takes the slot, then
        wakes the next. (A pause is waited out by the first in line itself.)"""
        if self._waiting and self.in_flight < self.current_limit:
            self._waiting[0][2].notify()

    def release(self, lease: Lease, kind: str, retry_after_s: float | None = None,
                headers: Mapping[str, str] | None = None, used_tokens: int | None = None) -> None:
        now = time.monotonic()
        s = self.settings
        if self.tpm is not None:
            if used_tokens is not None:
                self.tpm.give_back(lease.tokens - used_tokens)
            elif kind not in (OK, CONTENT_FILTER):
                self.tpm.give_back(lease.tokens)  # a refused attempt used no tokens
        with self.cond:
            self.in_flight -= 1
            self.counts[kind] = self.counts.get(kind, 0) + 1
            if lease.tokens:
                self._avg_tokens = lease.tokens if not self._avg_tokens else 0.9 * self._avg_tokens + 0.1 * lease.tokens
            if kind == RATE_LIMITED:
                self._last_429 = now
                self._successes = 0
                if retry_after_s:
                    self.paused_until = max(self.paused_until, now + min(retry_after_s, s.max_delay_s))
                if s.adaptive and now - self._last_decrease >= max(s.cooldown_s, retry_after_s or 0.0):
                    self.limit = max(float(self.min_limit), self.limit * s.decrease_factor)
                    self._last_decrease = now
                    self.history.append((time.time(), self.current_limit))
            elif kind in (OK, CONTENT_FILTER):
                self._successes += 1
                if (s.adaptive and self.limit < self.max_limit and now - self._last_429 >= s.cooldown_s
                        and self._successes >= self.current_limit):
                    self.limit = min(float(self.max_limit), math.floor(self.limit) + 1.0)
                    self._successes = 0
                    self.history.append((time.time(), self.current_limit))
            elif kind in TRANSIENT:
                self._successes = 0
            self._observe_headers(headers or {}, now)
            self._wake_next()

    def _observe_headers(self, headers: Mapping[str, str], now: float) -> None:
        remaining = _int_header(headers, "x-ratelimit-remaining-requests")
        if remaining is not None and remaining <= 0:
            reset = parse_duration(headers.get("x-ratelimit-reset-requests"))
            if reset:
                self.paused_until = max(self.paused_until, now + min(reset, self.settings.max_delay_s))
        remaining = _int_header(headers, "x-ratelimit-remaining-tokens")
        if remaining is not None and remaining < max(1.0, self._avg_tokens):
            reset = parse_duration(headers.get("x-ratelimit-reset-tokens"))
            if reset:
                self.paused_until = max(self.paused_until, now + min(reset, self.settings.max_delay_s))


class _Stopped(Exception):
    pass


_LIMITERS: dict[tuple, EndpointLimiter] = {}
_LIMITERS_LOCK = threading.Lock()


def limiter_for(name: str, settings: DeploymentSettings, default_concurrency: int = 8) -> EndpointLimiter:
    """One limiter per (deployment, settings) per process, so the adaptive state carries over
    from one run (and from completions to judges) to the next."""
    key = (name, settings, default_concurrency)
    with _LIMITERS_LOCK:
        if key not in _LIMITERS:
            _LIMITERS[key] = EndpointLimiter(name, settings, default_concurrency)
        return _LIMITERS[key]


def backoff_delay(settings: DeploymentSettings, attempt: int, retry_after_s: float | None) -> float:
    """Seconds to wait before attempt `attempt + 1`."""
    if retry_after_s is not None:
        return min(retry_after_s, settings.max_delay_s) * (1.0 + random.random() * 0.1)
    ceiling = min(settings.max_delay_s, settings.base_delay_s * (2 ** (attempt - 1)))
    return ceiling * (0.5 + random.random() / 2)
