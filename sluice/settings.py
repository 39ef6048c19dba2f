"""Runtime settings: the config file resolved against the environment, at startup and
again on each reload (``server/reload.py``).

Connections get their credentials here (read from the variable each names) and their
default base URLs; a region a connection does not name comes from the provider's
``region_env`` variables. Provider keys found in their usual variables (``env_key``
in the provider registry) add a connection for a provider kind the file does not
configure, unless ``[server] env_connections = false``. The built-in in-process provider (the demo)
gets a connection unless the file configures one or turns ``[server] demo`` off.

``[server] dev_key`` and ``demo`` mint unmetered traffic, so the file decides them
where storage is shared: unset, they are on with the embedded SQLite store and off on
anything else (PostgreSQL, which several replicas share); only ``true`` turns them on there.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from urllib.parse import urlsplit

import msgspec

from sluice.config import (
    CacheStoreConfig,
    ConnectionConfig,
    FileConfig,
    GuardrailConfig,
    LimitsConfig,
    MeteringConfig,
    ModelConfig,
    RouteConfig,
    RoutingConfig,
    ServerConfig,
    StorageConfig,
    StreamsConfig,
    TelemetryConfig,
)
from sluice.core.connection import ConnectionSettings, Secret
from sluice.errors import ConfigError
from sluice.metering.pricing import prices_from_config
from sluice.providers.registry import (
    PROVIDERS,
    ProviderSpec,
    provider_spec,
    region_from_env,
    upstream_base_url,
)
from sluice.wire.chat import STEERING_FIELDS

HOME_ENV = "SLUICE_HOME"
DEFAULT_HOME = ".sluice"
DB_FILE = "sluice.db"
CACHE_FILE = "sluice-cache.db"


class TelemetrySettings(msgspec.Struct, frozen=True):
    """Tracing, resolved: on when the file names ``[telemetry] otlp_endpoint``."""

    otlp_endpoint: str
    service_name: str = "sluice"
    export_timeout: float = 10.0
    sample_ratio: float = 1.0


class Settings(msgspec.Struct, frozen=True):
    home: Path
    admin_key: Secret | None
    secret_key: Secret | None
    server: ServerConfig
    storage_url: str
    limits: LimitsConfig
    routing: RoutingConfig
    metering: MeteringConfig
    streams: StreamsConfig
    cache: CacheStoreConfig
    connections: tuple[ConnectionSettings, ...]
    models: tuple[ModelConfig, ...]
    routes: tuple[RouteConfig, ...]
    guardrails: tuple[GuardrailConfig, ...] = ()
    telemetry: TelemetrySettings | None = None
    """None: tracing is off."""
    storage: StorageConfig = StorageConfig()
    """``[storage]``: its ``url`` resolved is :attr:`storage_url`; the request log's
    retention."""


def resolve_home(explicit: str | None, env: Mapping[str, str]) -> Path:
    return Path(explicit or env.get(HOME_ENV) or DEFAULT_HOME)


def home_storage_url(home: Path) -> str:
    """The SQLite file in ``home``: the storage when the config names none."""
    return f"sqlite:///{(home / DB_FILE).as_posix()}"


def _connection(conf: ConnectionConfig, env: Mapping[str, str]) -> ConnectionSettings:
    spec = provider_spec(conf.provider)
    region = conf.region or region_from_env(spec, env)
    try:
        base_url = upstream_base_url(spec, conf.base_url, region)
    except ValueError as exc:
        hint = f" (set {_region_hint(spec)})" if "region" in str(exc) else ""
        raise ConfigError(f"connection {conf.id!r}: {exc}{hint}") from None
    if not spec.local and not base_url.startswith(("http://", "https://")):
        raise ConfigError(f"connection {conf.id!r}: base_url must be an http(s) URL")
    key_var = conf.api_key_env or (spec.env_key if spec.needs_key else None)
    key: Secret | None = None
    if key_var:  # named by the file, or needed: either way, a connection without it is refused
        value = env.get(key_var)
        if not value:
            raise ConfigError(f"connection {conf.id!r}: environment variable {key_var} is not set")
        key = Secret(value)
    if spec.needs_region and key is None and not region:
        raise ConfigError(
            f"connection {conf.id!r}: set {_region_hint(spec)} to sign {spec.kind} requests"
        )
    return ConnectionSettings(
        id=conf.id,
        provider=spec.kind,
        base_url=base_url,
        api_key=key,
        region=region,
        timeouts=conf.timeouts,
        on_disconnect=conf.on_disconnect,
        weight=conf.weight,
        prices=prices_from_config(conf.prices),
        options=dict(conf.options),
        passthrough=conf.passthrough,
        allow_extra_fields=_extra_fields(conf),
        allow_unpriced=conf.allow_unpriced,
    )


def _extra_fields(conf: ConnectionConfig) -> frozenset[str]:
    """``allow_extra_fields``, none of which may choose the upstream or its key."""
    steering = sorted(set(conf.allow_extra_fields) & STEERING_FIELDS)
    if steering:
        raise ConfigError(
            f"connection {conf.id!r}: allow_extra_fields cannot name {', '.join(steering)}: "
            "the configuration alone chooses the upstream and its credentials"
        )
    return frozenset(conf.allow_extra_fields)


def _telemetry(conf: TelemetryConfig) -> TelemetrySettings | None:
    """``[telemetry]`` checked: an http(s) URL with a host, and a service name."""
    if conf.otlp_endpoint is None:
        return None
    url = urlsplit(conf.otlp_endpoint)
    if url.scheme not in ("http", "https") or not url.hostname:
        raise ConfigError(
            "[telemetry] otlp_endpoint must be an http(s) URL, e.g. http://collector:4318/v1/traces"
        )
    if not conf.service_name.strip():
        raise ConfigError("[telemetry] service_name must not be empty")
    return TelemetrySettings(
        conf.otlp_endpoint, conf.service_name, conf.export_timeout, conf.sample_ratio
    )


def _region_hint(spec: ProviderSpec) -> str:
    """Where a region can be given: ``region``, or the provider's variable."""
    names = spec.region_env
    return f"`region` or {names[0]}" if names else "`region`"


def _auto_id(spec: ProviderSpec) -> str:
    return "conn_" + spec.kind.replace("-", "_")


def _from_env(spec: ProviderSpec, env: Mapping[str, str]) -> ConnectionSettings | None:
    """A connection for a provider key found in its usual variable; best effort."""
    if not spec.env_key or not env.get(spec.env_key):
        return None
    try:
        return _connection(
            ConnectionConfig(_auto_id(spec), spec.kind, api_key_env=spec.env_key), env
        )
    except ConfigError:
        return None


def is_shared_storage(storage_url: str) -> bool:
    """Storage other processes on other machines may use too (anything but SQLite)."""
    return not storage_url.startswith("sqlite:")


def answers_file(settings: Settings) -> Path | None:
    """Where the response cache keeps its answers without Redis: the SQLite file the
    workers of this machine share, or None: each process's memory (``[cache] store``)."""
    cache = settings.cache
    embedded = not is_shared_storage(settings.storage_url)
    several = embedded and settings.server.workers > 1
    if cache.store == "memory" or (cache.store == "auto" and not several):
        return None
    if cache.path is not None:
        return Path(cache.path)
    if not embedded:
        return settings.home / CACHE_FILE
    from sluice.storage.sqlite import sqlite_path

    database = sqlite_path(settings.storage_url)
    return database.with_name(f"{database.stem}-cache.db")


def _free_traffic_resolved(server: ServerConfig, storage_url: str) -> ServerConfig:
    """``dev_key`` and ``demo`` as the file says, else on for the embedded SQLite store
    only: on shared storage they would mint unmetered traffic for every replica."""
    default = not is_shared_storage(storage_url)
    return msgspec.structs.replace(
        server,
        dev_key=default if server.dev_key is None else server.dev_key,
        demo=default if server.demo is None else server.demo,
    )


def build_settings(
    file: FileConfig,
    env: Mapping[str, str],
    home: Path,
    *,
    host: str | None = None,
    port: int | None = None,
    workers: int | None = None,
    storage_in_use: str | None = None,
) -> Settings:
    """``host``, ``port``, ``workers``: the command line's, over the file's.
    ``storage_in_use``: the storage the process already runs on (a reload: a change
    of ``[storage] url`` waits for a restart), which then decides whether ``dev_key``
    and ``demo`` are on by default; else the file's."""
    server = file.server
    if server.max_buffered_body_bytes < server.max_body_bytes:
        raise ConfigError(
            "[server] max_buffered_body_bytes must be at least max_body_bytes "
            "(else a body of the largest allowed size could never be received)"
        )
    storage_url = file.storage.url or home_storage_url(home)
    server = _free_traffic_resolved(server, storage_in_use or storage_url)
    if host is not None:
        server = msgspec.structs.replace(server, host=host)
    if port is not None:
        server = msgspec.structs.replace(server, port=port)
    if workers is not None:
        server = msgspec.structs.replace(server, workers=workers)
    connections = [_connection(c, env) for c in file.connections]
    kinds = {c.provider for c in connections}
    if server.env_connections:
        for spec in PROVIDERS:
            if spec.kind not in kinds and (auto := _from_env(spec, env)) is not None:
                connections.append(auto)
    if server.demo:
        for spec in PROVIDERS:
            if spec.local and spec.kind not in kinds:
                connections.append(_connection(ConnectionConfig(_auto_id(spec), spec.kind), env))
    ids = [c.id for c in connections]
    duplicates = sorted({i for i in ids if ids.count(i) > 1})
    if duplicates:
        raise ConfigError(f"duplicate connection ids: {', '.join(duplicates)}")
    admin = env.get(server.admin_key_env)
    secret = env.get(server.secret_key_env)
    if admin is not None and len(admin) < 32:
        raise ConfigError(f"{server.admin_key_env} must be at least 32 characters")
    return Settings(
        home=home,
        admin_key=Secret(admin) if admin else None,
        secret_key=Secret(secret) if secret else None,
        server=server,
        storage_url=storage_url,
        limits=file.limits,
        routing=file.routing,
        metering=file.metering,
        streams=file.streams,
        cache=file.cache,
        connections=tuple(connections),
        models=tuple(file.models),
        routes=tuple(file.routes),
        guardrails=tuple(file.guardrails),
        telemetry=_telemetry(file.telemetry),
        storage=file.storage,
    )
