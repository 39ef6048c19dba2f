"""``/metrics`` while a stream is drained (``on_disconnect = "drain"``): the client
has left, so the stream is no longer relayed, but the request, its drain and its hold
are open until the upstream's answer ends."""

from __future__ import annotations

import asyncio
from pathlib import Path

from tests.server.test_drain import drain_toml
from tests.server.test_metrics_mix import SCRAPE, open_stream, paused, scraped, settled
from tests.support.accounts import metered_key
from tests.support.fake_upstream import FakeUpstream
from tests.support.gateway import running_gateway


async def test_a_drain_is_in_flight_until_the_upstream_answer_ends(
    tmp_path: Path, fake: FakeUpstream
) -> None:
    config = f"[server]\nport = 0\n{SCRAPE}" + drain_toml(fake.base_url)
    release = asyncio.Event()
    async with running_gateway(tmp_path, config) as gw:
        key = await metered_key(gw.gateway.store, "team", 10**9)
        client, _ = await open_stream(gw, key, paused(release), fake, "test/gpt-fake")
        await client.close()
        async with asyncio.timeout(5):
            while (draining := await scraped(gw))["sluice_streams_in_flight", ()]:
                await asyncio.sleep(0.01)
        release.set()
        after = await settled(gw)
    assert draining["sluice_drains_in_flight", ()] == 1
    assert draining["sluice_requests_in_flight", ()] == draining["sluice_holds_open", ()] == 1
    assert after["sluice_drains_in_flight", ()] == after["sluice_credits_held_usd", ()] == 0
    assert fake.hangups == []  # read to its end
    assert after["sluice_drains_total", ()] == 1
