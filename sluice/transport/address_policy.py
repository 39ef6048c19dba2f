"""Which upstream addresses an account-owned connection may reach (SSRF guard), pure.

Two questions, no sockets and no DNS: is this IP address a public one
(:func:`address_denial`), and is this ``base_url`` well formed, and if its host is an
IP literal, public (:func:`check_url`)? Names are resolved elsewhere
(:mod:`sluice.transport.guarded_resolver`) and each answer comes back here.

The URL is read by yarl, the parser aiohttp sends with, so the host checked is the host
connected to (full-width digits, IDNA and ``user@host`` tricks included). IPv4 hosts are
read the way ``inet_aton`` reads them (``2130706433``, ``0x7f.1``, ``0177.0.0.1``).
``allow_private`` (operator config) switches the address checks off; the scheme,
userinfo and host-syntax checks stay.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from ipaddress import IPv4Address, IPv4Network, IPv6Address, IPv6Network

from yarl import URL

from sluice.errors import InvalidRequestError

IPAddress = IPv4Address | IPv6Address

PARAM = "base_url"
CODE_INVALID = "invalid_base_url"
CODE_DENIED = "base_url_not_allowed"

# First match wins: the narrow metadata entries stand before the ranges holding them.
_V4_DENIED: tuple[tuple[IPv4Network, str], ...] = tuple(
    (IPv4Network(net), reason)
    for net, reason in (
        ("169.254.169.254/32", "metadata"),  # AWS, GCP, Azure, OpenStack, …
        ("100.100.100.200/32", "metadata"),  # Alibaba Cloud
        ("168.63.129.16/32", "metadata"),  # Azure WireServer (a public-looking address)
        ("0.0.0.0/8", "unspecified"),
        ("10.0.0.0/8", "private"),
        ("100.64.0.0/10", "shared (carrier-grade NAT)"),
        ("127.0.0.0/8", "loopback"),
        ("169.254.0.0/16", "link-local"),
        ("172.16.0.0/12", "private"),
        ("192.0.0.0/24", "reserved"),  # IETF protocol assignments
        ("192.0.2.0/24", "documentation"),
        ("192.88.99.0/24", "reserved"),  # deprecated 6to4 relay anycast
        ("192.168.0.0/16", "private"),
        ("198.18.0.0/15", "benchmarking"),
        ("198.51.100.0/24", "documentation"),
        ("203.0.113.0/24", "documentation"),
        ("224.0.0.0/4", "multicast"),
        ("255.255.255.255/32", "broadcast"),
        ("240.0.0.0/4", "reserved"),
    )
)

_V6_DENIED: tuple[tuple[IPv6Network, str], ...] = tuple(
    (IPv6Network(net), reason)
    for net, reason in (
        ("fd00:ec2::254/128", "metadata"),  # AWS IMDS over IPv6
        ("::/128", "unspecified"),
        ("::1/128", "loopback"),
        ("64:ff9b:1::/48", "private"),  # local-use NAT64 (RFC 8215)
        ("100::/64", "reserved"),  # discard-only
        ("2001:2::/48", "benchmarking"),
        ("2001:db8::/32", "documentation"),
        ("2001::/23", "reserved"),  # IETF protocol assignments, Teredo
        ("3fff::/20", "documentation"),
        ("fc00::/7", "private"),  # unique local
        ("fe80::/10", "link-local"),
        ("fec0::/10", "private"),  # deprecated site-local
        ("ff00::/8", "multicast"),
    )
)

_GLOBAL_UNICAST = IPv6Network("2000::/3")
_NAT64 = IPv6Network("64:ff9b::/96")
_V4_COMPATIBLE = IPv6Network("::/96")
_HOST_CHARS = frozenset("abcdefghijklmnopqrstuvwxyz0123456789-._")
_SCHEMES = frozenset({"http", "https"})
_HEX = re.compile(r"0[xX][0-9a-fA-F]+")
_OCTAL = re.compile(r"0[0-7]*")
_DECIMAL = re.compile(r"[1-9][0-9]*")


@dataclass(frozen=True, slots=True)
class UpstreamHost:
    """What :func:`check_url` read: the host to resolve (or the literal) and the port."""

    host: str
    port: int
    address: IPAddress | None  # set when the host is an IP literal


def address_denial(addr: IPAddress) -> str | None:
    """Why ``addr`` may not be an upstream (``"loopback"``, ``"metadata"``, …), or None."""
    if isinstance(addr, IPv4Address):
        return _v4_denial(addr)
    return _v6_denial(addr)


def is_allowed_address(addr: IPAddress, *, allow_private: bool = False) -> bool:
    return allow_private or address_denial(addr) is None


def _v4_denial(addr: IPv4Address) -> str | None:
    for net, reason in _V4_DENIED:
        if addr in net:
            return reason
    return None if addr.is_global else "reserved"


def _v6_denial(addr: IPv6Address) -> str | None:
    embedded = _embedded_v4(addr)
    if embedded is not None:
        return _v4_denial(embedded)
    if addr.scope_id is not None:
        addr = IPv6Address(int(addr))  # a zone does not change the range
    for net, reason in _V6_DENIED:
        if addr in net:
            return reason
    if addr in _V4_COMPATIBLE:  # deprecated ::a.b.c.d, public or not
        return _v4_denial(IPv4Address(int(addr) & 0xFFFFFFFF)) or "reserved"
    if addr not in _GLOBAL_UNICAST:
        return "reserved"
    if addr.sixtofour is not None:
        return _v4_denial(addr.sixtofour)
    return None


def _embedded_v4(addr: IPv6Address) -> IPv4Address | None:
    """The IPv4 address an IPv4-mapped (``::ffff:a.b.c.d``) or NAT64 address reaches."""
    if addr.ipv4_mapped is not None:
        return addr.ipv4_mapped
    if addr in _NAT64:
        return IPv4Address(int(addr) & 0xFFFFFFFF)
    return None


def parse_ipv4(text: str) -> IPv4Address | None:
    """``text`` read as ``inet_aton`` reads it (1 to 4 parts, each decimal, ``0``-octal
    or ``0x``-hex, the last part filling the remaining bytes), or None."""
    parts = text.split(".")
    if len(parts) > 4:
        return None
    values = [_inet_number(part) for part in parts]
    numbers = [v for v in values if v is not None]
    if len(numbers) != len(values):
        return None
    *head, last = numbers
    if any(n > 0xFF for n in head) or last >= 1 << (8 * (4 - len(head))):
        return None
    value = last
    for i, n in enumerate(head):
        value |= n << (8 * (3 - i))
    return IPv4Address(value)


def _inet_number(part: str) -> int | None:
    if _HEX.fullmatch(part):
        return int(part[2:], 16)
    if _OCTAL.fullmatch(part):
        return int(part, 8)
    if _DECIMAL.fullmatch(part):
        return int(part)
    return None


def parse_ip_host(host: str) -> IPAddress | None:
    """An IP literal in any spelling a socket call would accept, or None for a name."""
    if ":" in host:
        try:
            return IPv6Address(host)
        except ValueError:
            return None
    return parse_ipv4(host[:-1] if host.endswith(".") else host)


def check_url(url: str, *, allow_private: bool = False) -> UpstreamHost:
    """Read ``url`` as an upstream base URL; raise :class:`InvalidRequestError` saying why
    it cannot be one. A name is returned unresolved: its addresses are checked by the
    caller (save time) and by the guarded resolver (connect time)."""
    if any(c.isspace() or ord(c) < 0x20 or ord(c) == 0x7F for c in url):
        raise _invalid("base_url must not contain spaces or control characters")
    try:
        parsed = URL(url)
        host = parsed.host
        raw_host = parsed.raw_host
        port = parsed.port
    except (ValueError, UnicodeError):
        raise _invalid("base_url is not a valid URL") from None
    if parsed.scheme not in _SCHEMES:
        raise _invalid("base_url must be an http or https URL")
    if parsed.raw_user is not None or parsed.raw_password is not None or "@" in _authority(url):
        raise _invalid("base_url must not contain a user name or password")
    if not host or not raw_host or port is None:
        raise _invalid("base_url has no host")
    if port == 0:
        raise _invalid("base_url port must be between 1 and 65535")
    address = parse_ip_host(host)
    if address is None and not (set(raw_host) <= _HOST_CHARS and _labels_fit(raw_host)):
        raise _invalid("base_url host is not a valid host name")
    target = UpstreamHost(raw_host if address is None else str(address), port, address)
    if allow_private:
        return target
    reason = address_denial(address) if address is not None else _name_denial(raw_host)
    if reason is not None:
        raise denied(f"base_url points to {article(reason)} address")
    return target


def _labels_fit(host: str) -> bool:
    """Every dot-separated label 1-63 characters (a final dot allowed), 253 in all: what
    a resolver can be asked about at all."""
    labels = (host[:-1] if host.endswith(".") else host).split(".")
    return len(host) <= 253 and all(0 < len(label) <= 63 for label in labels)


def _authority(url: str) -> str:
    """The authority as written, before yarl drops an empty ``@`` (a second opinion)."""
    rest = url.partition("//")[2]
    for end in "/?#":
        rest = rest.partition(end)[0]
    return rest


def article(reason: str) -> str:
    """``"a loopback"``, ``"an unspecified"``: the reason inside an error message."""
    return f"{'an' if reason[0] in 'aeiou' else 'a'} {reason}"


def _name_denial(host: str) -> str | None:
    """Names that are loopback by definition (RFC 6761), refused before any lookup."""
    name = host.rstrip(".")
    return "loopback" if name == "localhost" or name.endswith(".localhost") else None


def denied(message: str) -> InvalidRequestError:
    return InvalidRequestError(message, code=CODE_DENIED, param=PARAM)


def _invalid(message: str) -> InvalidRequestError:
    return InvalidRequestError(message, code=CODE_INVALID, param=PARAM)
