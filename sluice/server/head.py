"""What a request head must be before a handler sees it (RFC 9112), beyond what llhttp
checks itself: pure, so each rule is a row of a table test.

* the version is HTTP/1.0 or HTTP/1.1 (llhttp also reads ``HTTP/0.9`` request lines
  and ``HTTP/2.0``): else 505;
* exactly one ``Host`` in HTTP/1.1 (at most one in 1.0), and a valid one (a host name,
  an IPv4 address or a bracketed IPv6 address, and an optional port): else 400 (§3.2);
* ``Transfer-Encoding``, when sent, ends with ``chunked``: else the body's length cannot
  be known, 400 (§6.3);
* and is ``chunked`` alone: the gateway decodes no other coding, and ``gzip, chunked``
  read as plain chunks would be a different body than the one sent: else 501 (§6.1).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

_HOST = re.compile(
    rb"(?:\[[0-9A-Fa-f:.]{2,45}\]|[A-Za-z0-9\-._~%!$&'()*+,;=]*)(?::(?P<port>[0-9]{1,5}))?"
)
_VERSIONS = frozenset({"1.0", "1.1"})


def head_problem(version: str, headers: Sequence[tuple[bytes, bytes]]) -> tuple[int, str] | None:
    """``(status, message)`` when the head must be refused, else None."""
    if version not in _VERSIONS:
        return 505, "Only HTTP/1.1 and HTTP/1.0 are served."
    hosts = [value for name, value in headers if name.lower() == b"host"]
    if len(hosts) > 1 or (not hosts and version == "1.1"):
        return 400, "A request needs exactly one Host header."
    if hosts and not _valid_host(hosts[0]):
        return 400, "The Host header is not a valid host."
    fields = [value for name, value in headers if name.lower() == b"transfer-encoding"]
    codings = [c.strip(b" \t").lower() for c in b",".join(fields).split(b",") if c.strip(b" \t")]
    if fields and codings[-1:] != [b"chunked"]:
        return 400, "The body's length is unknown: chunked must be the last transfer coding."
    if len(codings) > 1:
        return 501, "Only the chunked transfer coding is supported."
    return None


def _valid_host(value: bytes) -> bool:
    match = _HOST.fullmatch(value.strip(b" \t"))
    if match is None:
        return False
    port = match.group("port")
    return port is None or 0 < int(port) <= 65535


def content_length(headers: Sequence[tuple[bytes, bytes]]) -> int | None:
    """The declared body length (llhttp refused a malformed or repeated one already)."""
    for name, value in headers:
        if name.lower() == b"content-length":
            try:
                return int(value)
            except ValueError:
                return None
    return None


def expects_continue(version: str, headers: Sequence[tuple[bytes, bytes]]) -> bool:
    """The client waits for ``100 Continue`` (one on HTTP/1.0 is ignored: RFC 9110 §10.1.1)."""
    expect = any(n.lower() == b"expect" and v.lower() == b"100-continue" for n, v in headers)
    return expect and version != "1.0"


def is_chunked(headers: Sequence[tuple[bytes, bytes]]) -> bool:
    return any(n.lower() == b"transfer-encoding" and b"chunked" in v.lower() for n, v in headers)


def header_fields(headers: Sequence[tuple[bytes, bytes]]) -> dict[str, str]:
    """Names lower-cased; a repeated field's values joined with ``, `` (RFC 9110 §5.3)."""
    fields: dict[str, str] = {}
    for raw_name, raw_value in headers:
        name = raw_name.decode("latin-1").lower()
        value = raw_value.decode("latin-1")
        fields[name] = f"{fields[name]}, {value}" if name in fields else value
    return fields
