"""The web console (``GET /``) and the API page (``GET /docs``): static files shipped in
the package (``sluice/web/``), read once when the gateway starts, served with a strict
Content-Security-Policy. Scripts and styles come from this origin only (no inline
script, no CDN); the pages call the gateway's own API with ``fetch``.
"""

from __future__ import annotations

from collections.abc import Iterator
from functools import partial
from importlib import resources
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from sluice.server.call import Call, Endpoint
    from sluice.server.context import GatewayContext

CONTENT_SECURITY_POLICY = (
    "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; "
    "img-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)
_PAGES = (("/", "index.html"), ("/docs", "docs.html"))
_ASSETS = (
    "console.js",
    "api.js",
    "playground.js",
    "activity.js",
    "operator.js",
    "keys.js",
    "forms.js",
    "account.js",
    "models.js",
    "cache.js",
    "charts.js",
    "life.js",
    "snippets.js",
    "docs.js",
    "toolkit.js",
    "console.css",
    "docs.css",
)
ASSET_PREFIX = "/console/"
_TYPES = (
    (".html", "text/html; charset=utf-8"),
    (".js", "text/javascript; charset=utf-8"),
    (".css", "text/css; charset=utf-8"),
)
_SECURITY_HEADERS = (
    ("content-security-policy", CONTENT_SECURITY_POLICY),
    ("x-content-type-options", "nosniff"),
    ("referrer-policy", "no-referrer"),
    ("x-frame-options", "DENY"),
    ("cache-control", "no-cache"),
)


def _content_type(name: str) -> str:
    return next(kind for suffix, kind in _TYPES if name.endswith(suffix))


async def _serve(body: bytes, content_type: str, gw: GatewayContext, call: Call) -> None:
    headers = [*call.headers, ("content-type", content_type), *_SECURITY_HEADERS]
    await call.writer.send(200, headers, body)


def console_routes() -> Iterator[tuple[str, Endpoint]]:
    """``(path, endpoint)`` for every page and asset, each file read now."""
    web = resources.files("sluice") / "web"
    files = [*_PAGES, *((ASSET_PREFIX + name, name) for name in _ASSETS)]
    for path, name in files:
        body = (web / name).read_bytes()
        yield path, partial(_serve, body, _content_type(name))
