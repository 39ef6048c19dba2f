"""Live reload (docs/admin.md, "Reload"): ``SIGHUP`` or ``POST /admin/reload`` reads the
config file again, against the environment and home of startup, and the gateway swaps
in a new :class:`~.generation.Generation` whole. A file that fails to load or build is
refused with its reason and the running generation keeps serving.

What a generation holds (connections, models, routes, prices, limits, guardrails and
the per-request server settings, the demo connection among them) is applied; what the
process holds for its lifetime (the listener, the upstream client, storage, the
development key, the limiter's store, the breaker and the credit holds' timings) is
not: a change there is reported as needing a restart.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING

import msgspec

from sluice.config import FileConfig, read_config_file
from sluice.errors import ConfigError, InvalidRequestError, MethodNotAllowedError
from sluice.exchange.heads import JSON
from sluice.server.admin import authorize
from sluice.server.generation import Generation, Reloaded
from sluice.settings import Settings, build_settings

if TYPE_CHECKING:
    from sluice.server.call import Call
    from sluice.server.context import GatewayContext

_log = logging.getLogger("sluice.server")

RELOAD_PATH = "/admin/reload"

_WHOLE = ("connections", "models", "routes", "guardrails")


class SettingsSource:
    """Where the settings came from: the config file, the environment and the home of
    startup, and the command line's ``--host``/``--port``/``--workers``; read again on
    reload."""

    __slots__ = ("env", "home", "host", "path", "port", "workers")

    def __init__(
        self,
        path: Path | None,
        env: Mapping[str, str],
        home: Path,
        *,
        host: str | None = None,
        port: int | None = None,
        workers: int | None = None,
    ) -> None:
        self.path = path
        self.env = MappingProxyType(dict(env))
        self.home = home
        self.host = host
        self.port = port
        self.workers = workers

    def __repr__(self) -> str:  # never the environment: it holds credentials
        return f"SettingsSource({self.path!r})"

    def read(self, storage_in_use: str | None = None) -> Settings:
        """The settings as the file says now; raises :class:`ConfigError`.
        ``storage_in_use``: the storage the process runs on, whose kind decides whether
        ``[server] dev_key`` and ``demo`` are on when the file does not say (a change of
        ``[storage] url`` waits for a restart: until then the demo follows the store in
        use, never the one the file names next)."""
        file = read_config_file(self.path) if self.path else FileConfig()
        return build_settings(
            file,
            self.env,
            self.home,
            host=self.host,
            port=self.port,
            workers=self.workers,
            storage_in_use=storage_in_use,
        )


def effective(running: Settings, new: Settings) -> tuple[Settings, tuple[str, ...]]:
    """The settings a reload runs on: ``running`` with what a generation holds taken
    from ``new``; and the settings the file now sets otherwise, which wait for a
    restart. Anything not named here waits (a new setting is safe until sorted)."""
    server, limits = new.server, new.limits
    applied = msgspec.structs.replace(
        running,
        connections=new.connections,
        models=new.models,
        routes=new.routes,
        guardrails=new.guardrails,
        server=msgspec.structs.replace(
            running.server,
            demo=server.demo,
            env_connections=server.env_connections,
            sse_keepalive_interval=server.sse_keepalive_interval,
            upstream_error_body_bytes=server.upstream_error_body_bytes,
            upstream_body_bytes=server.upstream_body_bytes,
            upstream_event_bytes=server.upstream_event_bytes,
            max_json_depth=server.max_json_depth,
            shutdown_grace=server.shutdown_grace,
            cors_origins=server.cors_origins,
            live_feeds_per_key=server.live_feeds_per_key,
            live_feeds_per_account=server.live_feeds_per_account,
        ),
        limits=msgspec.structs.replace(
            running.limits,
            key=limits.key,
            keys=limits.keys,
            account=limits.account,
            accounts=limits.accounts,
        ),
    )
    return applied, _held_back(applied, new)


def _held_back(applied: Settings, new: Settings) -> tuple[str, ...]:
    """``[section] name`` of each setting that differs (``storage_url``: its file key)."""
    held = []
    for name in applied.__struct_fields__:
        ran, wanted = getattr(applied, name), getattr(new, name)
        if ran == wanted:
            continue
        if isinstance(ran, msgspec.Struct):
            held += [
                f"[{name}] {field}"
                for field in ran.__struct_fields__
                if getattr(ran, field) != getattr(wanted, field)
                and (name, field) != ("storage", "url")  # told as storage_url's
            ]
        else:
            held.append("[storage] url" if name == "storage_url" else name)
    return tuple(held)


def _changed(old: Settings, new: Settings) -> tuple[str, ...]:
    """The parts a reload applies that differ, in the answer's order."""
    return tuple(n for n in (*_WHOLE, "limits", "server") if getattr(old, n) != getattr(new, n))


class Reloader:
    """Reads ``source`` and builds a generation with ``build`` (the composition root's)."""

    __slots__ = ("_build", "source")

    def __init__(self, source: SettingsSource, build: Callable[[Settings], Generation]) -> None:
        self.source = source
        self._build = build

    def reload(self, running: Generation) -> tuple[Generation, Reloaded]:
        """The generation to swap in, and what it changed; :class:`ConfigError`
        (logged) when the file cannot be used, and nothing changes."""
        where = self.source.path or "the defaults"
        try:
            now = self.source.read(running.settings.storage_url)
            applied, held = effective(running.settings, now)
            generation = self._build(applied)
        except ConfigError as exc:
            _log.error("reload of %s refused, the running config is kept: %s", where, exc)
            raise
        settings = generation.settings
        report = Reloaded(
            changed=_changed(running.settings, settings),
            needs_restart=held,
            connections=tuple(c.id for c in settings.connections),
            models=tuple(m.id for m in settings.models),
            routes=tuple(r.name for r in settings.routes),
            guardrails=tuple(g.name for g in settings.guardrails),
        )
        _log.info(
            "config reloaded from %s: %s", where, ", ".join(report.changed) or "nothing changed"
        )
        if held:
            _log.warning("changed in %s, applied after a restart only: %s", where, ", ".join(held))
        return generation, report


async def reload_endpoint(gw: GatewayContext, call: Call) -> None:
    """``POST /admin/reload`` (admin key): 200 with what was reloaded, or 422 naming
    why the file was refused (the running config still serving)."""
    authorize(gw, call)
    if call.request.method != "POST":
        raise MethodNotAllowedError(f"{call.request.method} is not allowed here; use POST.")
    try:
        report = gw.reload()
    except ConfigError as exc:
        raise InvalidRequestError(
            f"The config was not reloaded (the running one is kept): {exc}",
            code="invalid_config",
            http_status=422,
        ) from None
    await call.writer.send(200, [*call.headers, JSON], msgspec.json.encode(report))
