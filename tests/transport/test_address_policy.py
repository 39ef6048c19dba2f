from __future__ import annotations

import socket
from ipaddress import IPv4Address, IPv6Address, ip_address
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sluice.errors import InvalidRequestError
from sluice.transport import address_policy
from sluice.transport.address_policy import (
    CODE_DENIED,
    CODE_INVALID,
    UpstreamHost,
    address_denial,
    check_url,
    is_allowed_address,
    parse_ip_host,
    parse_ipv4,
)
from tests.test_house_rules import IMPURE_MODULES, imports

DENIED_ADDRESSES = [
    ("127.0.0.1", "loopback"),
    ("127.255.255.254", "loopback"),
    ("10.0.0.1", "private"),
    ("172.16.0.1", "private"),
    ("172.31.255.255", "private"),
    ("192.168.1.1", "private"),
    ("169.254.169.254", "metadata"),
    ("100.100.100.200", "metadata"),
    ("168.63.129.16", "metadata"),
    ("169.254.170.2", "link-local"),
    ("0.0.0.0", "unspecified"),
    ("0.1.2.3", "unspecified"),
    ("100.64.0.1", "shared (carrier-grade NAT)"),
    ("100.127.255.255", "shared (carrier-grade NAT)"),
    ("192.0.0.8", "reserved"),
    ("192.0.2.10", "documentation"),
    ("198.51.100.7", "documentation"),
    ("203.0.113.99", "documentation"),
    ("198.18.0.1", "benchmarking"),
    ("198.19.255.255", "benchmarking"),
    ("224.0.0.1", "multicast"),
    ("239.255.255.250", "multicast"),
    ("240.0.0.1", "reserved"),
    ("255.255.255.255", "broadcast"),
    ("::", "unspecified"),
    ("::1", "loopback"),
    ("::ffff:127.0.0.1", "loopback"),
    ("::ffff:169.254.169.254", "metadata"),
    ("::ffff:10.1.2.3", "private"),
    ("::127.0.0.1", "loopback"),
    ("::8.8.8.8", "reserved"),
    ("64:ff9b::127.0.0.1", "loopback"),
    ("64:ff9b::169.254.169.254", "metadata"),
    ("64:ff9b:1::1", "private"),
    ("fd00:ec2::254", "metadata"),
    ("fd12:3456::1", "private"),
    ("fc00::1", "private"),
    ("fe80::1", "link-local"),
    ("fe80::1%eth0", "link-local"),
    ("febf::1", "link-local"),
    ("fec0::1", "private"),
    ("ff02::1", "multicast"),
    ("100::1", "reserved"),
    ("2001:db8::1", "documentation"),
    ("3fff::1", "documentation"),
    ("2001:2::1", "benchmarking"),
    ("2001::1", "reserved"),
    ("2002:7f00:1::1", "loopback"),
    ("2002:a9fe:a9fe::", "metadata"),
    ("4000::1", "reserved"),
]

PUBLIC_ADDRESSES = [
    "8.8.8.8",
    "1.1.1.1",
    "104.18.6.192",
    "2606:4700::1111",
    "2a00:1450:4001::200e",
    "::ffff:8.8.8.8",
    "64:ff9b::8.8.8.8",
    "2002:808:808::1",
]


@pytest.mark.parametrize(("text", "reason"), DENIED_ADDRESSES, ids=[a for a, _ in DENIED_ADDRESSES])
def test_denied_addresses_name_their_reason(text: str, reason: str) -> None:
    addr = ip_address(text)
    assert address_denial(addr) == reason
    assert not is_allowed_address(addr)
    assert is_allowed_address(addr, allow_private=True)


@pytest.mark.parametrize("text", PUBLIC_ADDRESSES)
def test_public_addresses_are_allowed(text: str) -> None:
    assert address_denial(ip_address(text)) is None
    assert is_allowed_address(ip_address(text))


LEGACY_IPV4 = [
    ("2130706433", "127.0.0.1"),
    ("0x7f.1", "127.0.0.1"),
    ("0X7F.0.0.1", "127.0.0.1"),
    ("0177.0.0.1", "127.0.0.1"),
    ("127.1", "127.0.0.1"),
    ("127.0.1", "127.0.0.1"),
    ("0x7f000001", "127.0.0.1"),
    ("017700000001", "127.0.0.1"),
    ("0", "0.0.0.0"),
    ("169.254.43518", "169.254.169.254"),
    ("0xa9.0xfe.0xa9.0xfe", "169.254.169.254"),
    ("8.8.8.8", "8.8.8.8"),
]


@pytest.mark.parametrize(("text", "expected"), LEGACY_IPV4, ids=[t for t, _ in LEGACY_IPV4])
def test_legacy_ipv4_spellings_are_read_as_inet_aton_reads_them(text: str, expected: str) -> None:
    assert parse_ipv4(text) == IPv4Address(expected)


@pytest.mark.parametrize(
    "text", ["", "1.2.3.4.5", "4294967296", "256.1.1.1", "1.16777216", "08", "0x", "0x.1", "1..1"]
)
def test_not_ipv4(text: str) -> None:
    assert parse_ipv4(text) is None


@given(st.text(alphabet="0123456789xXabfAF.", max_size=24))
def test_ipv4_reading_agrees_with_inet_aton(text: str) -> None:
    try:
        expected: IPv4Address | None = IPv4Address(socket.inet_aton(text))
    except OSError:
        expected = None
    assert parse_ipv4(text) == expected


def test_ip_host_reading() -> None:
    assert parse_ip_host("127.0.0.1.") == IPv4Address("127.0.0.1")
    assert parse_ip_host("::ffff:7f00:1") == IPv6Address("::ffff:127.0.0.1")
    assert parse_ip_host("api.openai.com") is None
    assert parse_ip_host("cafe.beef") is None
    assert parse_ip_host("not:v6") is None


DENIED_URLS = [
    ("http://127.0.0.1:8080/v1", "loopback"),
    ("http://localhost:11434/v1", "loopback"),
    ("http://LOCALHOST./v1", "loopback"),
    ("http://api.localhost/v1", "loopback"),
    ("http://169.254.169.254/latest/meta-data/", "metadata"),
    ("http://100.100.100.200/", "metadata"),
    ("http://[fd00:ec2::254]/", "metadata"),
    ("http://10.0.0.5/v1", "private"),
    ("http://192.168.0.10:8000/v1", "private"),
    ("http://0.0.0.0:8080/", "unspecified"),
    ("http://0/", "unspecified"),
    ("http://2130706433/", "loopback"),
    ("http://0x7f.1/", "loopback"),
    ("http://0177.0.0.1/", "loopback"),
    ("http://127.1/", "loopback"),
    ("http://127.0.0.1./", "loopback"),
    ("http://\uff11\uff12\uff17.\uff10.\uff10.\uff11/", "loopback"),  # full-width digits
    ("http://[::1]:8080/v1", "loopback"),
    ("http://[::ffff:127.0.0.1]/", "loopback"),
    ("http://[::ffff:7f00:1]/", "loopback"),
    ("http://[64:ff9b::a9fe:a9fe]/", "metadata"),
    ("http://[fe80::1%25eth0]/", "link-local"),
    ("https://[fc00::1]/", "private"),
    ("http://100.64.1.1/", "shared (carrier-grade NAT)"),
]


@pytest.mark.parametrize(("url", "reason"), DENIED_URLS, ids=[u for u, _ in DENIED_URLS])
def test_urls_to_internal_addresses_are_denied(url: str, reason: str) -> None:
    with pytest.raises(InvalidRequestError) as caught:
        check_url(url)
    assert caught.value.param == "base_url"
    assert caught.value.code == CODE_DENIED
    assert caught.value.message.startswith("base_url points to a")
    assert f" {reason} address" in caught.value.message
    assert check_url(url, allow_private=True).port > 0


MALFORMED_URLS = [
    ("ftp://api.example.com/", "must be an http or https URL"),
    ("file:///etc/passwd", "must be an http or https URL"),
    ("gopher://127.0.0.1:6379/", "must be an http or https URL"),
    ("//api.example.com/v1", "must be an http or https URL"),
    ("api.example.com/v1", "must be an http or https URL"),
    ("http://good.com@127.0.0.1/", "user name or password"),
    ("http://user:pass@api.example.com/", "user name or password"),
    ("http://@api.example.com/", "user name or password"),
    ("http://good.com%40evil@api.example.com/", "user name or password"),
    ("http:///v1", "has no host"),
    ("http://", "has no host"),
    ("http://a b.com/", "spaces or control characters"),
    ("http://api.example.com\n/v1", "spaces or control characters"),
    ("http://%31%32%37.0.0.1/", "not a valid host name"),
    ("http://exa$mple.com/", "not a valid host name"),
    ("http://a..b.com/v1", "not a valid host name"),  # IDNA refuses: once a 500 at save
    ("http://" + "a" * 64 + ".com/", "not a valid host name"),
    ("http://" + ".".join(["abcdefgh"] * 30) + "/", "not a valid host name"),
    ("http://127.0.0.1\\@good.com/", "not a valid URL"),
    ("http://[1.2.3.4]/", "not a valid URL"),
    ("http://api.example.com:99999/", "not a valid URL"),
    ("http://api.example.com:0/", "port must be between 1 and 65535"),
]


@pytest.mark.parametrize(("url", "why"), MALFORMED_URLS, ids=[u for u, _ in MALFORMED_URLS])
def test_malformed_urls_are_refused_even_when_private_is_allowed(url: str, why: str) -> None:
    for allow_private in (False, True):
        with pytest.raises(InvalidRequestError) as caught:
            check_url(url, allow_private=allow_private)
        assert caught.value.param == "base_url"
        assert caught.value.code == CODE_INVALID
        assert why in caught.value.message


ALLOWED_URLS = [
    ("https://api.openai.com/v1", UpstreamHost("api.openai.com", 443, None)),
    ("HTTPS://API.OpenAI.com:8443/v1", UpstreamHost("api.openai.com", 8443, None)),
    ("http://8.8.8.8:8080/v1", UpstreamHost("8.8.8.8", 8080, IPv4Address("8.8.8.8"))),
    (
        "https://[2606:4700::1111]/v1",
        UpstreamHost("2606:4700::1111", 443, IPv6Address("2606:4700::1111")),
    ),
    ("https://bücher.example/v1", UpstreamHost("xn--bcher-kva.example", 443, None)),
    ("http://0x7g.1/", UpstreamHost("0x7g.1", 80, None)),  # a name: resolved, then checked
]


@pytest.mark.parametrize(("url", "expected"), ALLOWED_URLS, ids=[u for u, _ in ALLOWED_URLS])
def test_public_urls_are_read(url: str, expected: UpstreamHost) -> None:
    assert check_url(url) == expected


def test_allow_private_lets_loopback_through() -> None:
    assert check_url("http://127.0.0.1:8000/v1", allow_private=True) == UpstreamHost(
        "127.0.0.1", 8000, IPv4Address("127.0.0.1")
    )
    assert check_url("http://0x7f.1/", allow_private=True).address == IPv4Address("127.0.0.1")


def test_address_policy_is_pure() -> None:
    path = Path(address_policy.__file__)
    assert imports(path) & IMPURE_MODULES == set()
