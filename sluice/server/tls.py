"""HTTPS on the listener itself: the server-side TLS context from ``[server] tls_cert``
and ``tls_key`` (docs/deploy.md). TLS 1.2 or later, ALPN ``http/1.1`` only."""

from __future__ import annotations

import ssl
from collections.abc import Callable
from pathlib import Path
from typing import NoReturn

from sluice.config import ServerConfig
from sluice.errors import ConfigError


def server_tls(server: ServerConfig) -> ssl.SSLContext | None:
    """The listener's TLS context, or None for plain HTTP. Every problem with the two
    files is a :class:`ConfigError` that names the file and what is wrong with it."""
    if server.tls_cert is None or server.tls_key is None:
        return None
    cert, key = Path(server.tls_cert), Path(server.tls_key)
    for name, path in (("tls_cert", cert), ("tls_key", key)):
        try:
            with path.open("rb"):
                pass
        except OSError as exc:
            raise ConfigError(
                f"[server] {name}: cannot read {path}: {exc.strerror or exc}"
            ) from None
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.set_alpn_protocols(["http/1.1"])
    context.options |= ssl.OP_NO_COMPRESSION | ssl.OP_NO_RENEGOTIATION
    try:
        context.load_cert_chain(cert, key, password=_encrypted(key))
    except ssl.SSLError as exc:
        _explain(cert, key, exc)
    return context


def _encrypted(key: Path) -> Callable[[], bytes]:
    """The password callback: called only for an encrypted key, which we refuse (asking
    for a password on a terminal would hang a service)."""

    def refuse() -> bytes:
        raise ConfigError(f"[server] tls_key: {key} is encrypted; give an unencrypted key")

    return refuse


def _explain(cert: Path, key: Path, exc: ssl.SSLError) -> NoReturn:
    if not _is_certificate(cert):
        raise ConfigError(f"[server] tls_cert: {cert} holds no PEM certificate")
    if exc.reason == "KEY_VALUES_MISMATCH":
        raise ConfigError(f"[server] tls_key: {key} is not the key of the certificate {cert}")
    detail = f" ({exc.reason})" if exc.reason else ""
    raise ConfigError(f"[server] tls_key: {key} holds no usable PEM private key{detail}")


def _is_certificate(cert: Path) -> bool:
    try:
        ssl.create_default_context(cafile=cert)
    except ssl.SSLError:
        return False
    return True
