"""The bytes a client receives for every recorded upstream stream, pinned.

Each recording in ``tests/fixtures/<provider>/*.raw`` is served by the fake upstream to
a deterministic gateway (counting ids, a fixed clock); the streamed body the client
reads (usage asked for), after a first line with the HTTP status (a recording that
fails before its first event is an HTTP error), must equal
``tests/fixtures/wire/<provider>/<name>.sse`` byte for byte. The golden files were
written by the gateway before the request-core reshaping (issue 11);
``SLUICE_UPDATE_FIXTURES=1`` rewrites them, and a commit that does must say why.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import aiohttp
import pytest

from tests.server.test_anthropic_gateway import config as anthropic_toml
from tests.server.test_bedrock_gateway import aws_environment, bedrock_toml
from tests.server.test_gemini_gateway import gemini_toml
from tests.support.fake_bedrock import stream_reply
from tests.support.fake_upstream import FakeUpstream, Reply
from tests.support.gateway import openai_connection_toml, running_gateway
from tests.support.transcript import FIXTURES, RECORDED_CHOICES, UPDATE

GOLDEN = FIXTURES / "wire"
__all__ = ["aws_environment"]  # its credentials, autouse here too


# provider -> (config for the fake, model to ask for)
PROVIDERS: dict[str, tuple[Callable[[FakeUpstream], str], str]] = {
    "openai": (lambda fake: openai_connection_toml(fake.base_url), "test/gpt-fake"),
    "anthropic": (anthropic_toml, "test/claude"),
    "gemini": (gemini_toml, "google/gemini-test"),
    "aws-bedrock": (bedrock_toml, "test/claude-bedrock"),
}
CASES = sorted(
    (provider, path.stem) for provider in PROVIDERS for path in (FIXTURES / provider).glob("*.raw")
)


def _reply(provider: str, raw: bytes) -> Reply:
    return stream_reply(raw) if provider == "aws-bedrock" else Reply.stream(raw)


@pytest.mark.parametrize(("provider", "name"), CASES, ids=[f"{p}/{n}" for p, n in CASES])
async def test_the_client_receives_the_recorded_bytes(
    tmp_path: Path, fake: FakeUpstream, provider: str, name: str
) -> None:
    toml, model = PROVIDERS[provider]
    fake.queue(_reply(provider, (FIXTURES / provider / f"{name}.raw").read_bytes()))
    body = {
        "model": model,
        "messages": [{"role": "user", "content": "Say hello"}],
        "stream": True,
        "stream_options": {"include_usage": True},
        "n": RECORDED_CHOICES.get(name, 1),
    }
    async with running_gateway(tmp_path, toml(fake), deterministic=True) as gw:
        assert gw.dev_key is not None
        headers = {"authorization": f"Bearer {gw.dev_key.key}"}
        async with (
            aiohttp.ClientSession() as session,
            session.post(
                gw.base_url + "/v1/chat/completions", data=json.dumps(body), headers=headers
            ) as resp,
        ):
            received = b"%d\n" % resp.status + await resp.read()
    golden = GOLDEN / provider / f"{name}.sse"
    if UPDATE:
        golden.parent.mkdir(parents=True, exist_ok=True)
        golden.write_bytes(received)
    assert received == golden.read_bytes()
