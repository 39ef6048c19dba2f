"""``[server]``: the HTTP server, its bounds and its secrets' variables."""

from __future__ import annotations

import re
from typing import Annotated

import msgspec

from sluice.wire.bounds import DEFAULT_MAX_EVENT_BYTES, DEFAULT_MAX_JSON_DEPTH

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8787


_ORIGIN = re.compile(r"https?://[^/\s:]+(:[0-9]{1,5})?")


class ServerConfig(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    host: str = DEFAULT_HOST
    """The address the gateway listens on (``0.0.0.0``: every interface)."""
    port: int = DEFAULT_PORT
    """Its port (``--port`` overrides; 0 picks a free one and prints it)."""
    workers: Annotated[int, msgspec.Meta(ge=1, le=256)] = 1
    """Gateway processes on the port, each on its own core (docs/deploy.md#workers)."""
    dev_key: bool | None = None
    """The development account and its key (``$SLUICE_HOME/dev-key``); None: on with the
    embedded SQLite store, off on shared storage (PostgreSQL), where only ``true`` turns
    it on."""
    demo: bool | None = None
    """The built-in demo connection; None: as ``dev_key``."""
    env_connections: bool = True
    """Create a connection for each provider whose key variable is set
    (``OPENAI_API_KEY``, ``ANTHROPIC_API_KEY``, ``DEEPSEEK_API_KEY``, …)."""
    max_body_bytes: Annotated[int, msgspec.Meta(gt=0)] = 16 * 1024 * 1024
    """Larger request bodies get 413."""
    max_header_bytes: Annotated[int, msgspec.Meta(gt=0)] = 64 * 1024
    """Larger request heads get 431."""
    header_timeout: Annotated[float, msgspec.Meta(gt=0)] = 10.0
    """Seconds a client may take to send its request head."""
    body_timeout: Annotated[float, msgspec.Meta(gt=0)] = 60.0
    """Seconds a client may take to send its body."""
    keepalive_timeout: Annotated[float, msgspec.Meta(gt=0)] = 75.0
    """Seconds an idle keep-alive connection stays open."""
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
    """Most of an upstream's error answer read to learn why it refused."""
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
