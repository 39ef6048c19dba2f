"""The operator's log line for an upstream failure: host and port as the URL spells them,
never its path or query, and never an exception of its own (a name that IDNA cannot
decode once turned a 502 into a 500)."""

from __future__ import annotations

import logging

import pytest

from sluice.errors import UpstreamError
from sluice.transport.failures import ConnectFailedError, log_failure, log_refusal

URLS = [
    ("http://127.0.0.1:9/v1/chat/completions?key=s3cret", "127.0.0.1:9"),
    (
        "http://\u24db\u24de\u24d2\u24d0\u24db\u24d7\u24de\u24e2\u24e3:8080/v1?key=s3cret",
        "\u24db\u24de\u24d2\u24d0\u24db\u24d7\u24de\u24e2\u24e3:8080",
    ),
    ("http://\u217cocalhost:8080/v1?key=s3cret", "\u217cocalhost:8080"),
    ("https://xn--bcher-kva.example/v1?key=s3cret", "xn--bcher-kva.example:443"),
    ("http://[::1]:8080/v1?key=s3cret", "::1:8080"),
]


@pytest.mark.parametrize(("url", "shown"), URLS)
def test_a_failure_is_logged_with_its_host_and_port_whatever_the_name(
    url: str, shown: str, caplog: pytest.LogCaptureFixture
) -> None:
    refused = ConnectFailedError(ConnectionRefusedError(111, "Connection refused"))
    with caplog.at_level(logging.WARNING, logger="sluice.upstream"):
        log_failure(url, refused)
        log_refusal(url, 503, UpstreamError("busy", code="upstream_unavailable"))
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 2
    assert all(shown in line for line in lines), lines
    assert "errno 111" in lines[0] and "HTTP 503" in lines[1]
    assert not any("s3cret" in line or "/v1" in line for line in lines)
