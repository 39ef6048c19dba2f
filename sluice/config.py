"""Configuration: the TOML file's shape (README.md, "Configure it") and the frozen
settings built from it.

Settings are built at startup from the file, the environment mapping handed in by
the CLI and the built-in catalog, then passed down; a reload builds them again from
the same file path and the same mapping, and nothing reads the environment later.
Unknown keys in the file are errors, so a typo never silently falls back to a default.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated, Any, Final, Literal

import msgspec

from sluice.core.connection import Timeouts
from sluice.core.durations import duration_seconds
from sluice.core.usage import Price
from sluice.errors import ConfigError
from sluice.wire.bounds import DEFAULT_MAX_EVENT_BYTES, DEFAULT_MAX_JSON_DEPTH
from sluice.wire.chunks import ModelCapabilities

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8787


# Limits of a key or an account (the arithmetic is limits/bucket.py)
MAX_CAPACITY = 2**50
"""Largest ``limit * window_ms``: leaves room below 2**53 for debts past capacity."""


MAX_WINDOW: Final = 366 * 86_400.0


class LimitSpec(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """Limits of one key or one account; ``None`` means unlimited in that dimension."""

    requests: Annotated[int, msgspec.Meta(ge=1)] | None = None
    tokens: Annotated[int, msgspec.Meta(ge=1)] | None = None
    window: Annotated[float, msgspec.Meta(ge=0.001, le=MAX_WINDOW)] = 60.0
    """Seconds (millisecond precision), at most a leap year."""

    def __post_init__(self) -> None:
        if not 0.001 <= self.window <= MAX_WINDOW:  # inf, nan: nothing to round
            raise ValueError(f"window must be 0.001 to {MAX_WINDOW:g} s")
        for limit in (self.requests, self.tokens):
            if limit is not None and (limit < 1 or limit * self.window_ms > MAX_CAPACITY):
                raise ValueError(f"limit {limit} per {self.window} s is out of range")

    @property
    def window_ms(self) -> int:
        return round(self.window * 1000)


# The ``[[guardrails]]`` tables (docs/guardrails.md)
Stage = Literal["input", "output"]
Kind = Literal["regex", "keywords", "pii", "json_schema", "webhook"]
Action = Literal["block", "redact", "log"]
PiiEntity = Literal["api_key", "email", "card"]


class Scope(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """Which requests a guardrail applies to. Each list given must match (an omitted one
    matches everything): accounts by name or id, keys by id or prefix, routes by slug."""

    accounts: list[str] | None = None
    keys: list[str] | None = None
    routes: list[str] | None = None


class GuardrailConfig(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    name: Annotated[str, msgspec.Meta(min_length=1)]
    stage: Stage
    kind: Kind
    action: Action = "block"
    applies_to: Scope = Scope()
    pattern: str | None = None
    """``regex``: a Python regular expression."""
    words: list[str] = []
    """``keywords``: matched as whole words."""
    case_insensitive: bool = False
    """``regex`` and ``keywords``."""
    entities: list[PiiEntity] = []
    """``pii``: which detectors; empty means all of them."""
    replacement: str = "[REDACTED]"
    """What ``redact`` puts in place of a match."""
    schema: dict[str, Any] | None = None
    """``json_schema``: the schema the whole content of each choice must satisfy."""
    url: str | None = None
    """``webhook``: where the checker listens (POST, JSON)."""
    timeout: Annotated[float, msgspec.Meta(gt=0)] = 5.0
    """``webhook``: seconds per call."""
    fail_open: bool = False
    """``webhook``: let the text through (and log it) when the checker fails."""
    batch_chars: Annotated[int, msgspec.Meta(ge=1)] = 512
    """``webhook`` on output: characters of output sent per call."""
    hold_back: Annotated[int, msgspec.Meta(ge=0)] | None = None
    """Characters of output held back for this rule; derived from the pattern if omitted."""


UsdPerMillion = Annotated[float, msgspec.Meta(ge=0, le=1_000_000)]


class PriceConfig(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """USD per million tokens, each within 0 .. 1,000,000 (not negative, finite)."""

    input: UsdPerMillion
    output: UsdPerMillion
    cache_read: UsdPerMillion | None = None
    cache_write: UsdPerMillion | None = None

    def price(self) -> Price:
        return Price.per_million(self.input, self.output, self.cache_read, self.cache_write)


class ConnectionConfig(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    id: str
    provider: str
    base_url: str | None = None
    api_key_env: str | None = None
    region: str | None = None
    timeouts: Timeouts = Timeouts()
    on_disconnect: Literal["cancel", "drain"] = "cancel"
    weight: Annotated[float, msgspec.Meta(gt=0)] = 1.0
    prices: dict[str, PriceConfig] = {}
    """``custom_provider`` prices: what this connection is billed per model id."""
    options: dict[str, Any] = {}
    passthrough: bool = False
    """Serve ``<id or provider>/<any upstream name>`` without a catalog entry."""
    allow_extra_fields: list[str] = []
    """Request fields outside the chat wire forwarded to this upstream as sent (vLLM's
    ``repetition_penalty``, ``min_p``, …); any other unknown field is refused."""
    allow_unpriced: bool = False
    """Let credit-metered accounts use this connection's unpriced models, for free."""


class ModelConfig(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    id: str
    providers: dict[str, str]
    price: PriceConfig | None = None
    fallbacks: list[str] = []
    max_output_tokens: int | None = None
    context_window: int | None = None
    dimensions: int | None = None
    capabilities: ModelCapabilities = ModelCapabilities()
    owned_by: str | None = None
    balance: Literal["ordered", "weighted"] = "ordered"
    """How the connections serving this model are tried: in configured order, or in an
    order drawn per request by connection ``weight`` (failover still tries them all)."""


class RouteTargetConfig(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    model: str
    connection: str | None = None


class RouteConfig(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    name: str
    chain: list[RouteTargetConfig]


_ORIGIN = re.compile(r"https?://[^/\s:]+(:[0-9]{1,5})?")


class ServerConfig(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    host: str = DEFAULT_HOST
    port: int = DEFAULT_PORT
    workers: Annotated[int, msgspec.Meta(ge=1, le=256)] = 1
    """Gateway processes on the port, each on its own core (docs/deploy.md#workers)."""
    dev_key: bool | None = None
    """The development account and its key (``$SLUICE_HOME/dev-key``); None: on with the
    embedded SQLite store, off on shared storage (PostgreSQL), where only ``true`` turns
    it on."""
    demo: bool | None = None
    """The built-in demo connection; None: as ``dev_key``."""
    env_connections: bool = True
    max_body_bytes: Annotated[int, msgspec.Meta(gt=0)] = 16 * 1024 * 1024
    max_header_bytes: Annotated[int, msgspec.Meta(gt=0)] = 64 * 1024
    header_timeout: Annotated[float, msgspec.Meta(gt=0)] = 10.0
    body_timeout: Annotated[float, msgspec.Meta(gt=0)] = 60.0
    keepalive_timeout: Annotated[float, msgspec.Meta(gt=0)] = 75.0
    client_write_timeout: Annotated[float, msgspec.Meta(gt=0)] = 300.0
    """Seconds a client may leave a response unread (its socket full) before it is cut."""
    admin_key_env: str = "SLUICE_ADMIN_KEY"
    """Variable holding the admin API's bearer key; the admin API is off without it."""
    secret_key_env: str = "SLUICE_SECRET_KEY"
    """Variable holding the key that encrypts accounts' provider keys at rest."""
    allow_private_upstreams: bool = False
    """Let accounts' own connections reach loopback/private/link-local addresses."""
    sse_keepalive_interval: float = 15.0
    """Seconds of silence before a ``: keep-alive`` comment; 0 sends none."""
    upstream_error_body_bytes: Annotated[int, msgspec.Meta(gt=0)] = 64 * 1024
    upstream_body_bytes: Annotated[int, msgspec.Meta(gt=0)] = 64 * 1024 * 1024
    """Largest whole (non-streamed) answer read from an upstream."""
    upstream_event_bytes: Annotated[int, msgspec.Meta(gt=0)] = DEFAULT_MAX_EVENT_BYTES
    """Longest line and largest event of an upstream stream; past it the stream ends
    with ``upstream_event_too_large``."""
    max_json_depth: Annotated[int, msgspec.Meta(ge=8)] = DEFAULT_MAX_JSON_DEPTH
    """Deepest nesting of arrays and objects a request body may have."""
    max_embedding_inputs: Annotated[int, msgspec.Meta(ge=1, le=100_000)] = 2048
    """The most inputs one ``POST /v1/embeddings`` may carry (split into each
    provider's batches upstream)."""
    shutdown_grace: Annotated[float, msgspec.Meta(ge=0)] = 5.0
    """Seconds a stop waits for responses in flight; then each live stream ends with
    ``server_shutting_down``."""
    max_concurrent_bodies: Annotated[int, msgspec.Meta(gt=0)] = 256
    """Request bodies being received at once, over all connections; one more is refused
    with 503 and ``Retry-After`` before it is read."""
    max_buffered_body_bytes: Annotated[int, msgspec.Meta(gt=0)] = 64 * 1024 * 1024
    """Bytes the bodies of the requests in hand may hold (counted as they arrive, given
    back when each request ends); a body whose declared length does not fit is refused
    on its head, one that grows past it as soon as it does."""
    client_write_buffer_bytes: Annotated[int, msgspec.Meta(gt=0)] = 64 * 1024
    """Bytes the gateway buffers for one client that is not reading; beyond it the
    stream waits (and stops reading its upstream) until the client reads or is cut
    after ``client_write_timeout``."""
    client_socket_buffer_bytes: Annotated[int, msgspec.Meta(ge=0)] = 256 * 1024
    """``SO_SNDBUF`` of each client connection, bounding what the kernel holds for a
    client that stops reading (and what the gateway translates for it before its stream
    waits); 0 keeps the kernel's autotuning (up to 4 MiB a connection on Linux: better
    throughput for large whole answers on long, fast links). Token streams need far
    less; below 64 KiB it slows even a client that reads."""
    upstream_socket_buffer_bytes: Annotated[int, msgspec.Meta(ge=0)] = 0
    """``SO_RCVBUF`` of each upstream connection, bounding what the kernel holds from an
    upstream whose client stopped reading; 0 keeps the kernel's autotuning."""
    tls_cert: str | None = None
    """PEM certificate chain (server certificate first): with ``tls_key``, the listener
    speaks HTTPS only (TLS 1.2 or later, HTTP/1.1). docs/deploy.md."""
    tls_key: str | None = None
    """PEM private key (unencrypted) of ``tls_cert``."""
    metrics_listen: str | None = None
    """``host:port`` (IPv6 in brackets) of a second, plain-HTTP listener serving only
    ``GET /metrics``, without a key, for a scraper on a private address."""
    cors_origins: list[str] = []
    """Origins (``https://app.example.com``, exact) whose pages may call the gateway from
    a browser; ``"*"`` allows any. None by default."""
    live_feeds_per_key: Annotated[int, msgspec.Meta(ge=0)] = 4
    """``GET /v1/requests/live`` feeds one API key may hold open at once (0: none)."""
    live_feeds_per_account: Annotated[int, msgspec.Meta(ge=0)] = 16
    """The same over all the keys of one account."""

    def __post_init__(self) -> None:
        if self.metrics_listen is not None:
            listen_address(self.metrics_listen)  # a bad one fails here, named
        for origin in self.cors_origins:
            if origin != "*" and not _ORIGIN.fullmatch(origin):
                raise ValueError(
                    f"`cors_origins` {origin!r} is not an origin (scheme://host[:port], "
                    'no path) or "*"'
                )
        if (self.tls_cert is None) != (self.tls_key is None):
            given, missing = (
                ("tls_cert", "tls_key") if self.tls_key is None else ("tls_key", "tls_cert")
            )
            raise ValueError(f"`{given}` is set but `{missing}` is not: HTTPS needs both")


def listen_address(text: str) -> tuple[str, int]:
    """``host:port`` or ``[v6]:port`` as (host, port); :class:`ValueError` naming why not."""
    host, sep, port = text.rpartition(":")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    elif ":" in host:
        raise ValueError(f"`metrics_listen` {text!r}: put an IPv6 address in brackets")
    if not sep or not host or not port.isascii() or not port.isdigit() or int(port) > 65535:
        raise ValueError(f"`metrics_listen` {text!r} is not host:port (a port 0-65535)")
    return host, int(port)


class RoutingConfig(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """The per-process circuit breakers, one per (connection, model): after
    ``breaker_failures`` failures in a row the connection is skipped for that model for
    ``breaker_cooldown`` seconds, then one probe is let through."""

    breaker_failures: Annotated[int, msgspec.Meta(ge=1)] = 5
    breaker_cooldown: Annotated[float, msgspec.Meta(gt=0)] = 30.0
    max_retry_after: Annotated[float, msgspec.Meta(ge=0)] = 300.0


class MeteringConfig(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    hold_ttl: Annotated[float, msgspec.Meta(gt=0)] = 3600.0
    """Seconds a credit hold lives; a crashed process's holds are reclaimed after it."""
    reclaim_interval: Annotated[float, msgspec.Meta(gt=0)] = 30.0
    reserve: bool = True
    """Holds of keys without a budget come from a per-process reservation of the
    account's credits, decided in memory (docs/metering.md#credit-reservations)."""
    reserve_idle: Annotated[float, msgspec.Meta(gt=0)] = 1.0
    """Seconds a reservation's unused part stays reserved after its last hold."""
    reserve_most: Annotated[int, msgspec.Meta(ge=1, le=1024)] = 64
    """The most holds one reservation grows by at once, in holds of the request's size."""


class StorageConfig(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    url: str | None = None
    request_log_retention: str | None = "30d"
    """How long request-log rows are kept: a whole number and a unit, ``s``, ``m``,
    ``h``, ``d`` or ``w`` (``"30d"``, ``"12h"``, ``"90m"``); ``"0"`` (any zero) or None
    keeps them for ever. The ledger is never pruned."""
    request_log_max_rows: Annotated[int, msgspec.Meta(ge=1)] | None = None
    """At most this many request-log rows are kept (the oldest go first); None: no bound."""
    response_retention: str | None = "30d"
    """How long stored responses (``POST /v1/responses`` with ``store``) are kept, in the
    same form as ``request_log_retention``; ``"0"`` or None keeps them for ever."""

    def __post_init__(self) -> None:
        for name in ("request_log_retention", "response_retention"):
            text = getattr(self, name)
            if text is None:
                continue
            try:
                duration_seconds(text)
            except ValueError:
                raise ValueError(
                    f"{name} {text!r} is not a duration: a whole number and a unit, s, m, "
                    'h, d or w ("30d", "12h"), or "0" to keep every row'
                ) from None

    @property
    def request_log_retention_seconds(self) -> int | None:
        """The retention in seconds; None: rows are kept for ever."""
        text = self.request_log_retention
        return None if text is None else (duration_seconds(text) or None)

    @property
    def response_retention_seconds(self) -> int | None:
        """How long stored responses are kept, in seconds; None: for ever."""
        text = self.response_retention
        return None if text is None else (duration_seconds(text) or None)


class LimitsConfig(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """Rate limits (docs/api.md#rate-limits, docs/limits.md): ``key`` applies to every API key and
    ``keys`` overrides it by key prefix (``sk-sluice-`` + 8 characters, as listed);
    ``account`` applies to every account and ``accounts`` overrides it by account name.
    Shared through Redis when ``redis_url`` is set, else kept in this process."""

    redis_url: str | None = None
    key_prefix: str = "sluice:rl:"
    key: LimitSpec | None = None
    keys: dict[str, LimitSpec] = {}
    account: LimitSpec | None = None
    accounts: dict[str, LimitSpec] = {}
    refused_burst: Annotated[float, msgspec.Meta(ge=1)] = 20.0
    """Refusals a key may meet at once at full speed (docs/api.md#rate-limits) ..."""
    refused_per_second: Annotated[float, msgspec.Meta(gt=0)] = 10.0
    """... and a second, in the long run; past them each is held up to a second."""


class TelemetryConfig(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """``[telemetry]``: OpenTelemetry tracing (docs/observability.md), off unless
    ``otlp_endpoint`` names an OTLP/HTTP traces URL; ``export_timeout`` bounds one
    export (in seconds, retries included); ``sample_ratio`` is the share of new traces
    recorded (a client's ``traceparent`` decides for its own)."""

    otlp_endpoint: str | None = None
    service_name: str = "sluice"
    export_timeout: Annotated[float, msgspec.Meta(gt=0)] = 10.0
    sample_ratio: Annotated[float, msgspec.Meta(ge=0, le=1)] = 1.0


class FileConfig(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """The whole TOML file."""

    server: ServerConfig = ServerConfig()
    storage: StorageConfig = StorageConfig()
    limits: LimitsConfig = LimitsConfig()
    routing: RoutingConfig = RoutingConfig()
    metering: MeteringConfig = MeteringConfig()
    telemetry: TelemetryConfig = TelemetryConfig()
    connections: list[ConnectionConfig] = []
    models: list[ModelConfig] = []
    routes: list[RouteConfig] = []
    guardrails: list[GuardrailConfig] = []


def read_config_file(path: Path) -> FileConfig:
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise ConfigError(f"cannot read config file {path}: {exc.strerror}") from None
    return parse_config(raw, str(path))


def parse_config(raw: bytes | str, origin: str = "<config>") -> FileConfig:
    try:
        return msgspec.toml.decode(raw, type=FileConfig)
    except msgspec.DecodeError as exc:
        raise ConfigError(f"{origin}: {exc}") from None
    except RecursionError:  # tomllib recurses once per level of nested arrays and tables
        raise ConfigError(f"{origin}: arrays or tables nested too deeply") from None
