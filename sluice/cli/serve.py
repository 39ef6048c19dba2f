"""``sluice serve``: run the gateway until interrupted."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import sys
from pathlib import Path

import click

from sluice.accounts.dev_key import DevKey
from sluice.cli.state import load_settings
from sluice.errors import ConfigError
from sluice.server.app import Gateway
from sluice.server.lifecycle import RunningGateway, free_traffic, start_gateway, stop_gateway
from sluice.server.logformat import log_formatter
from sluice.server.reload import SettingsSource
from sluice.server.workers import (
    Supervisor,
    announce_ready,
    become_worker,
    free_port,
    prepare_storage,
    worker_role,
)
from sluice.settings import Settings
from sluice.storage.factory import storage_place


def _banner(running: RunningGateway, settings: Settings) -> str:
    return banner(running.base_url, running.dev_key, settings)


def banner(base_url: str, dev: DevKey | None, settings: Settings, workers: int = 1) -> str:
    lines = [f"Sluice gateway listening on {base_url}"]
    if workers > 1:
        lines[0] += f" ({workers} workers)"
    lines.append(f"  storage:     {storage_place(settings.storage_url)}")  # no password
    lines.append(f"  console:     {base_url}/")
    admin_env = settings.server.admin_key_env
    if settings.admin_key is None:
        lines.append(f"  admin API:   off (set {admin_env} to a key of 32+ characters)")
    else:
        lines.append(f"  admin API:   on (the key in {admin_env})")
    for conn in settings.connections:
        lines.append(f"  connection:  {conn.id} ({conn.provider})")
    lines.append(f"  development: {free_traffic(settings)}")
    if dev is not None:
        if dev.created:
            lines.append(f"  dev key:     {dev.key}   (saved to {dev.path})")
        else:
            lines.append(f"  dev key:     in {dev.path}")
    if dev is not None and settings.server.demo is True:
        lines.append("")
        lines.append("Try it:")
        lines.append(
            f"  curl -N {base_url}/v1/chat/completions "
            f'-H "Authorization: Bearer $(cat {dev.path})" '
            "-H 'Content-Type: application/json' "
            '-d \'{"model": "sluice/demo", "stream": true, '
            '"messages": [{"role": "user", "content": "Hello"}]}\''
        )
    lines.append("Press Ctrl-C to stop.")
    return "\n".join(lines)


async def _run(settings: Settings, source: SettingsSource, worker: bool = False) -> None:
    """``worker``: one of ``--workers N``, on the port the others share; it says when it
    listens on its standard output instead of the banner."""
    running = await start_gateway(settings, source=source, reuse_port=worker)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    loop.add_signal_handler(signal.SIGHUP, _reload, running.gateway)
    # the banner last: whoever waits for it may signal at once
    if worker:
        announce_ready()
    else:
        click.echo(_banner(running, settings), err=True)
    try:
        await stop.wait()
    finally:
        if not worker:
            click.echo("Sluice: shutting down", err=True)
        await stop_gateway(running, running.gateway.settings.server.shutdown_grace)


def _reload(gateway: Gateway) -> None:
    """``SIGHUP``: a refused file is logged by the reload and the running config stays."""
    with contextlib.suppress(ConfigError):
        gateway.reload()


@click.command()
@click.option(
    "--config",
    "config_path",
    type=click.Path(dir_okay=False, path_type=Path),
    help="TOML config file (connections, models, routes, storage; see README).",
)
@click.option("--host", default=None, help="Address to listen on [default: 127.0.0.1].")
@click.option(
    "--port",
    type=click.IntRange(0, 65535),
    default=None,
    help="Port to listen on [default: 8787]; 0 picks a free one.",
)
@click.option(
    "--home",
    default=None,
    help="State directory (SQLite file, dev key) [default: $SLUICE_HOME or ./.sluice].",
)
@click.option(
    "--log-level",
    default="INFO",
    show_default=True,
    type=click.Choice(["DEBUG", "INFO", "WARNING", "ERROR"], case_sensitive=False),
    help="Sluice's log verbosity (libraries: warnings only); INFO logs one line per request.",
)
@click.option(
    "--log-format",
    default="text",
    show_default=True,
    type=click.Choice(["text", "json"]),
    help="json: one JSON object per line; a request's line has its account, key prefix, "
    "front door, model, provider, status, TTFT, duration, tokens and cost.",
)
@click.option(
    "--workers",
    type=click.IntRange(1, 256),
    default=None,
    help="Gateway processes on the port, each on its own core [default: [server] workers, 1].",
)
def serve(
    *,
    config_path: Path | None,
    host: str | None,
    port: int | None,
    home: str | None,
    log_level: str,
    log_format: str,
    workers: int | None,
) -> None:
    """Run the gateway (SQLite and the demo provider unless a config says otherwise)."""
    configure_logging(log_level, log_format)
    try:
        settings = load_settings(config_path, home, host=host, port=port, workers=workers)
        # a reload reads the same file against this environment and home again
        source = SettingsSource(
            config_path, os.environ, settings.home, host=host, port=port, workers=workers
        )
        role = worker_role()
        count = settings.server.workers
        if role is not None:
            become_worker(role[1])
            _start(settings, source, worker=True)
        elif count > 1:
            if settings.server.metrics_listen is not None:
                raise ConfigError(
                    "[server] metrics_listen serves one process's counters and cannot be "
                    "shared by several workers: run one worker, or take totals from the "
                    "request log (docs/deploy.md#workers)."
                )
            options = ["--log-level", log_level, "--log-format", log_format]
            if config_path is not None:
                options += ["--config", str(config_path)]
            _start_workers(settings, count, options)
        else:
            _start(settings, source)
    except ConfigError as exc:
        raise click.ClickException(str(exc)) from None
    except OSError as exc:
        raise click.ClickException(f"cannot start: {exc.strerror or exc}") from None


def configure_logging(level: str, kind: str = "text") -> None:
    """``level`` is Sluice's own; libraries log warnings and errors only. Their debug
    output can carry credentials (botocore logs the headers it signs, a session token
    among them), and a gateway's log must never. ``kind``: ``text`` or ``json``."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(log_formatter(kind))
    logging.basicConfig(level=logging.WARNING, handlers=[handler], force=True)
    logging.getLogger("sluice").setLevel(level.upper())


def _start(settings: Settings, source: SettingsSource, worker: bool = False) -> None:
    try:
        import uvloop
    except ImportError:  # pragma: no cover - uvloop is a dependency except on Windows
        asyncio.run(_run(settings, source, worker))
    else:
        uvloop.run(_run(settings, source, worker))


def _start_workers(settings: Settings, count: int, options: list[str]) -> None:
    server = settings.server
    port = server.port or free_port(server.host)
    # each worker knows how many share the port (the response cache's store follows)
    command = [sys.executable, "-m", "sluice", "serve", *options, "--workers", str(count)]
    command += ["--host", server.host, "--port", str(port), "--home", str(settings.home)]
    asyncio.run(_supervise(settings, Supervisor(command, count, server.shutdown_grace), port))


async def _supervise(settings: Settings, supervisor: Supervisor, port: int) -> None:
    dev = await prepare_storage(settings)
    try:
        await supervisor.start()
    except RuntimeError as exc:
        raise click.ClickException(f"cannot start: {exc}") from None
    loop = asyncio.get_running_loop()
    run = asyncio.ensure_future(supervisor.run())
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, run.cancel)
    loop.add_signal_handler(signal.SIGHUP, supervisor.signal_all, signal.SIGHUP)
    host = settings.server.host
    scheme = "https" if settings.server.tls_cert else "http"
    base_url = f"{scheme}://{f'[{host}]' if ':' in host else host}:{port}"
    workers = len(supervisor.pids)
    click.echo(banner(base_url, dev, settings, workers), err=True)
    with contextlib.suppress(asyncio.CancelledError):
        await run
    click.echo("Sluice: shutting down", err=True)
    await supervisor.stop()
