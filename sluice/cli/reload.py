"""``sluice reload``: a running gateway reads its config file again, as on ``SIGHUP``
(``POST /admin/reload`` with the admin key; docs/admin.md, "Reload").

Plain ``http.client`` on purpose: no proxy from the environment and no redirect ever
sees the admin key.
"""

from __future__ import annotations

import http.client
import json
import os
from pathlib import Path
from types import MappingProxyType
from typing import Any
from urllib.parse import urlsplit

import click

from sluice.config import FileConfig, ServerConfig, read_config_file
from sluice.errors import ConfigError

DEFAULT_URL = "http://127.0.0.1:8787"
_WILDCARDS = MappingProxyType({"0.0.0.0": "127.0.0.1", "::": "::1", "": "127.0.0.1"})


def _server(config_path: Path | None) -> ServerConfig:
    try:
        return (read_config_file(config_path) if config_path else FileConfig()).server
    except ConfigError as exc:
        raise click.ClickException(str(exc)) from None


def gateway_url(server: ServerConfig) -> str:
    """Where a gateway listening as ``[server]`` says is reached from this host."""
    if server.port == 0:
        raise click.UsageError("the config listens on port 0 (any free one): give --url")
    host = _WILDCARDS.get(server.host, server.host)
    host = f"[{host}]" if ":" in host else host
    return f"{'https' if server.tls_cert else 'http'}://{host}:{server.port}"


def _post(url: str, key: str) -> tuple[int, Any]:
    try:
        parts = urlsplit(url)
        scheme, host, port, path = parts.scheme, parts.hostname, parts.port, parts.path
    except ValueError:  # an unclosed [, a port past 65535
        scheme, host, port, path = "", None, None, ""
    if scheme not in ("http", "https") or not host:
        raise click.UsageError(f"--url must be an http(s) URL, not {url!r}")
    kind = http.client.HTTPSConnection if scheme == "https" else http.client.HTTPConnection
    conn = kind(host, port, timeout=30)
    try:
        conn.request(
            "POST",
            path.rstrip("/").removesuffix("/v1") + "/admin/reload",
            body=b"",
            headers={"Authorization": f"Bearer {key}"},
        )
        resp = conn.getresponse()
        body = resp.read()
    except OSError as exc:
        raise click.ClickException(f"no gateway answered at {url}: {exc}") from None
    finally:
        conn.close()
    try:
        return resp.status, json.loads(body)
    except ValueError:
        return resp.status, None


def _summary(doc: dict[str, Any]) -> str:
    lines = [f"Reloaded: {', '.join(doc['changed']) or 'nothing changed'}."]
    for section in ("connections", "models", "routes", "guardrails"):
        if doc[section]:
            lines.append(f"  {section + ':':13}{', '.join(doc[section])}")
    if doc["needs_restart"]:
        lines.append(f"Changed, applied after a restart only: {', '.join(doc['needs_restart'])}.")
    return "\n".join(lines)


@click.command("reload")
@click.option(
    "--url",
    envvar="SLUICE_URL",
    default=None,
    help="The gateway [default: $SLUICE_URL, else --config's [server] host and port, "
    f"else {DEFAULT_URL}]; a trailing /v1 is dropped.",
)
@click.option(
    "--config",
    "config_path",
    type=click.Path(dir_okay=False, path_type=Path),
    help="The gateway's config file: its [server] address and admin_key_env.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the gateway's answer as JSON.")
def reload_command(url: str | None, config_path: Path | None, as_json: bool) -> None:
    """Make a running gateway re-read its config file: connections, models, routes,
    prices, limits and guardrails change for new requests, streams in flight finish on
    the old ones. A file the gateway refuses changes nothing (exit 1, the reason shown).
    The admin key comes from the variable [server] admin_key_env names
    (SLUICE_ADMIN_KEY unless the config says otherwise)."""
    server = _server(config_path)
    key = os.environ.get(server.admin_key_env)
    if not key:
        raise click.UsageError(f"set {server.admin_key_env} to the gateway's admin key")
    target = url or (gateway_url(server) if config_path else DEFAULT_URL)
    status, doc = _post(target, key)
    if status != 200 or not isinstance(doc, dict):
        error = doc.get("error", {}) if isinstance(doc, dict) else {}
        raise click.ClickException(
            f"{target} answered {status}: {error.get('message') or 'not a Sluice gateway?'}"
        )
    click.echo(json.dumps(doc, indent=2) if as_json else _summary(doc))
