"""Configuration: the TOML file's shape (README.md, "Configure it") and the frozen
settings built from it.

Settings are built at startup from the file, the environment mapping handed in by
the CLI and the built-in catalog, then passed down; a reload builds them again from
the same file path and the same mapping, and nothing reads the environment later.
Unknown keys in the file are errors, so a typo never silently falls back to a default.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Literal

import msgspec

from sluice.config.cache import CacheConfig as CacheConfig
from sluice.config.cache import CacheStoreConfig as CacheStoreConfig
from sluice.config.cache import SemanticConfig as SemanticConfig
from sluice.config.rules import MAX_CAPACITY as MAX_CAPACITY
from sluice.config.rules import MAX_WINDOW as MAX_WINDOW
from sluice.config.rules import Action as Action
from sluice.config.rules import GuardrailConfig as GuardrailConfig
from sluice.config.rules import Kind as Kind
from sluice.config.rules import LimitSpec as LimitSpec
from sluice.config.rules import PiiEntity as PiiEntity
from sluice.config.rules import Scope as Scope
from sluice.config.rules import Stage as Stage
from sluice.config.server import DEFAULT_HOST as DEFAULT_HOST
from sluice.config.server import DEFAULT_PORT as DEFAULT_PORT
from sluice.config.server import ServerConfig as ServerConfig
from sluice.config.server import listen_address as listen_address
from sluice.core.connection import Timeouts
from sluice.core.durations import duration_seconds
from sluice.core.usage import Price
from sluice.errors import ConfigError
from sluice.wire.chunks import ModelCapabilities

UsdPerMillion = Annotated[float, msgspec.Meta(ge=0, le=1_000_000)]


class PriceConfig(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """USD per million tokens, each within 0 .. 1,000,000 (not negative, finite)."""

    input: UsdPerMillion
    """Prompt tokens."""
    output: UsdPerMillion
    """Output tokens (reasoning included)."""
    cache_read: UsdPerMillion | None = None
    """Prompt tokens read from the provider's cache; None: at ``input``."""
    cache_write: UsdPerMillion | None = None
    """Prompt tokens written to the provider's cache; None: at ``input``."""

    def price(self) -> Price:
        return Price.per_million(self.input, self.output, self.cache_read, self.cache_write)


class ConnectionConfig(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    id: str
    """The connection's name: models' ``providers``, routes and logs refer to it."""
    provider: str
    """``openai``, ``anthropic``, ``gemini``, ``aws-bedrock``, ``deepseek``,
    ``openai-compatible`` or ``demo``: the wire it speaks."""
    base_url: str | None = None
    """Where it is reached; None: the provider's public API (``openai-compatible``
    needs one)."""
    api_key_env: str | None = None
    """The environment variable holding its API key, read at startup; unset or empty,
    the gateway does not start. ``aws-bedrock`` uses the AWS credential chain instead."""
    region: str | None = None
    """``aws-bedrock``: the AWS region; None: the credential chain's."""
    timeouts: Timeouts = Timeouts()
    """Seconds: ``connect``, ``first_event``, ``stall`` (silence mid-stream) and
    ``total`` (the whole call)."""
    on_disconnect: Literal["cancel", "drain"] = "cancel"
    """When a client leaves mid-answer: ``cancel`` the upstream call (the unused hold is
    refunded), or ``drain`` it to its end unsent and charge the provider's own usage."""
    weight: Annotated[float, msgspec.Meta(gt=0)] = 1.0
    """Its share of a model's traffic when the model says ``balance = "weighted"``."""
    prices: dict[str, PriceConfig] = {}
    """``custom_provider`` prices: what this connection is billed per model id."""
    options: dict[str, Any] = {}
    """Options of the provider itself; only ``demo`` has any (``first_token_ms``,
    ``token_ms``: its pacing)."""
    passthrough: bool = False
    """Serve ``<id or provider>/<any upstream name>`` without a catalog entry."""
    allow_extra_fields: list[str] = []
    """Request fields outside the chat wire forwarded to this upstream as sent (vLLM's
    ``repetition_penalty``, ``min_p``, …); any other unknown field is refused."""
    allow_unpriced: bool = False
    """Let credit-metered accounts use this connection's unpriced models, for free."""


class ModelConfig(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    id: str
    """The name clients ask for (``vendor/model``); a built-in catalog entry of the same
    id is replaced."""
    providers: dict[str, str]
    """Who serves it and under which upstream name: keys are provider kinds or
    connection ids, in order of preference."""
    price: PriceConfig | None = None
    """USD per million tokens, as charged to credit-metered accounts; None: unpriced
    (refused to them unless the connection says ``allow_unpriced``)."""
    fallbacks: list[str] = []
    """Models tried next, in order, when every connection of this one fails before the
    first token."""
    max_output_tokens: int | None = None
    """The most it answers; a request asking for more is lowered to it, and a request
    asking for nothing is held for it (else 4,096)."""
    context_window: int | None = None
    """Tokens of prompt and answer together, shown in ``GET /v1/models``."""
    dimensions: int | None = None
    """An embeddings model's vector length when a request asks for none."""
    capabilities: ModelCapabilities = ModelCapabilities()
    """What it can do (``chat``, ``tools``, ``vision``, ``json_schema``, ``reasoning``,
    ``embeddings``); a request needing an ability declared false is refused with 400."""
    owned_by: str | None = None
    """``owned_by`` in ``GET /v1/models``; None: the id's part before ``/``."""
    balance: Literal["ordered", "weighted", "fastest"] = "ordered"
    """How the connections serving this model are tried: in configured order, in an
    order drawn per request by connection ``weight``, or quickest first by a moving
    estimate of time to first token from live traffic (failover still tries them all)."""
    hedge_after_ms: Annotated[int, msgspec.Meta(ge=1, le=600_000)] | None = None
    """A stream whose first content has not come this long after this model was tried
    also starts the next attempt, and keeps whichever answers first (the other is
    cancelled); within ``[routing] hedge_budget``."""
    cache: CacheConfig | None = None
    """Its complete streamed answers kept and served again (docs/cache.md); None: not
    cached."""


class RouteTargetConfig(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    model: str
    """A catalog model's id."""
    connection: str | None = None
    """Only this connection of the model; None: each of its connections in turn."""
    hedge_after_ms: Annotated[int, msgspec.Meta(ge=1, le=600_000)] | None = None
    """As a model's ``hedge_after_ms``, for this target of the route (over the model's)."""


class RouteConfig(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    name: str
    """The name clients ask for as their ``model``."""
    chain: list[RouteTargetConfig]
    """Targets tried in order, failing over before the first token."""
    cache: CacheConfig | None = None
    """The response cache for requests naming this route, over its models' own
    (docs/cache.md)."""


class RoutingConfig(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """The per-process circuit breakers, one per (connection, model): after
    ``breaker_failures`` failures in a row the connection is skipped for that model for
    ``breaker_cooldown`` seconds, then one probe is let through."""

    breaker_failures: Annotated[int, msgspec.Meta(ge=1)] = 5
    """Failures in a row that open a (connection, model) circuit ..."""
    breaker_cooldown: Annotated[float, msgspec.Meta(gt=0)] = 30.0
    """... for this many seconds; then one probe request decides."""
    max_retry_after: Annotated[float, msgspec.Meta(ge=0)] = 300.0
    """A 429's ``Retry-After`` opens that circuit for as long, capped at this."""
    hedge_budget: Annotated[float, msgspec.Meta(ge=0, le=1)] = 0.1
    """Hedges (``hedge_after_ms``) as a share of the streams that could fire one: a slow
    provider cannot add more than this share of requests to the next (0: never)."""


class StreamsConfig(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """Resumable streams (docs/api.md#resumable-streams): what one keeps so a client
    cut off can pick it up again, and for how long."""

    resume_max_bytes: Annotated[int, msgspec.Meta(ge=1024)] = 8 * 1024 * 1024
    """The events one resumable stream keeps; past it the stream is no longer resumable
    (a client still reading it is served on; one that left is cut, charged for what was
    produced)."""
    resume_retention: Annotated[float, msgspec.Meta(gt=0)] = 300.0
    """Seconds a stream nobody reads runs on before it is cancelled, and seconds its
    events are kept after it ended; a reconnect after that gets 410."""
    resume_per_account: Annotated[int, msgspec.Meta(ge=0)] = 16
    """Streams of one account that may run on at once with no client reading them; a
    client leaving one more is cancelled as if it were not resumable."""
    background_per_account: Annotated[int, msgspec.Meta(ge=0)] = 16
    """Background responses (``background: true``) of one account running at once on
    one process; one more is refused (429 ``too_many_background_responses``)."""


class MeteringConfig(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    hold_ttl: Annotated[float, msgspec.Meta(gt=0)] = 3600.0
    """Seconds a credit hold lives; a crashed process's holds are reclaimed after it."""
    reclaim_interval: Annotated[float, msgspec.Meta(gt=0)] = 30.0
    """Seconds between sweeps for expired holds (and request-log pruning)."""
    reserve: bool = True
    """Holds of keys without a budget come from a per-process reservation of the
    account's credits, decided in memory (docs/metering.md#credit-reservations)."""
    reserve_idle: Annotated[float, msgspec.Meta(gt=0)] = 1.0
    """Seconds a reservation's unused part stays reserved after its last hold."""
    reserve_most: Annotated[int, msgspec.Meta(ge=1, le=1024)] = 64
    """The most holds one reservation grows by at once, in holds of the request's size."""


class StorageConfig(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    url: str | None = None
    """``sqlite:///path`` or ``postgresql://…`` (what several replicas share); None:
    ``$SLUICE_HOME/sluice.db``."""
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
    """Share the limits, the circuit breakers and the response cache's answers between
    processes; None: each process keeps its own."""
    key_prefix: str = "sluice:rl:"
    """The Redis keys' prefix, for a Redis shared with other programs."""
    key: LimitSpec | None = None
    """Every API key's limit (``requests``, ``tokens``, ``window`` in seconds)."""
    keys: dict[str, LimitSpec] = {}
    """Limits by key prefix, in place of ``key``."""
    account: LimitSpec | None = None
    """Every account's limit, over all its keys."""
    accounts: dict[str, LimitSpec] = {}
    """Limits by account name, in place of ``account``."""
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
    """An OTLP/HTTP traces URL; None: tracing is off."""
    service_name: str = "sluice"
    """The spans' ``service.name``."""
    export_timeout: Annotated[float, msgspec.Meta(gt=0)] = 10.0
    """Seconds one export may take, retries included."""
    sample_ratio: Annotated[float, msgspec.Meta(ge=0, le=1)] = 1.0
    """The share of new traces recorded (a client's ``traceparent`` decides for its own)."""


class FileConfig(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """The whole TOML file."""

    server: ServerConfig = ServerConfig()
    """The HTTP server: where it listens, its workers, its bounds on what clients send
    and what upstreams answer, TLS, and the variables holding its secrets."""
    storage: StorageConfig = StorageConfig()
    """Where accounts, keys, the ledger and the request log are kept, and for how long
    the log is kept."""
    limits: LimitsConfig = LimitsConfig()
    """Rate limits of keys and accounts (docs/limits.md), shared through Redis when
    ``redis_url`` is set."""
    routing: RoutingConfig = RoutingConfig()
    """Circuit breakers per (connection, model)."""
    metering: MeteringConfig = MeteringConfig()
    """Credit holds and per-process reservations (docs/metering.md)."""
    streams: StreamsConfig = StreamsConfig()
    """Resumable streams: their buffer and retention."""
    cache: CacheStoreConfig = CacheStoreConfig()
    """The response cache's store (docs/cache.md)."""
    telemetry: TelemetryConfig = TelemetryConfig()
    """OpenTelemetry tracing (docs/observability.md)."""
    connections: list[ConnectionConfig] = []
    """The upstreams: one table per provider account and endpoint."""
    models: list[ModelConfig] = []
    """Catalog entries: models added to the built-in catalog, or replacing one."""
    routes: list[RouteConfig] = []
    """Named chains of models a client asks for as one ``model``."""
    guardrails: list[GuardrailConfig] = []
    """Rules on the request's text and on the live answer (docs/guardrails.md)."""


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
