"""The response cache on the console's Models page (issue 26), in a real browser against
a real gateway and a fake upstream: the operator opens it before any request (nothing
kept, no ratio yet), a miss and then a hit are made through the API, and the panel,
refreshing itself, shows the entry, its bytes of the bound, the ratio with its counts,
and the cached model's settings."""

from __future__ import annotations

import re
from pathlib import Path

from playwright.async_api import Page, expect

from tests.console.test_console import base, leave, sign_in
from tests.server.test_admin import ADMIN, ENV
from tests.server.test_cache import FUNDS, ask, config, fake
from tests.support.accounts import metered_key
from tests.support.fake_upstream import FakeUpstream
from tests.support.gateway import running_gateway

__all__ = ["fake"]  # the fixture, with the cache tests' answer


async def test_the_models_page_shows_the_cache_after_a_miss_and_a_hit(
    tmp_path: Path, page: Page, fake: FakeUpstream
) -> None:
    cache = '{ ttl = 600, scope = "global", replay = "paced" }'
    async with running_gateway(tmp_path, config(fake, cache), env=ENV) as gw:
        key = await metered_key(gw.gateway.store, "team", FUNDS)
        await sign_in(page, base(gw), ADMIN)
        await page.click("#tabs button[data-tab=models]")
        await expect(page.locator("#cache-entries")).to_have_text("0")
        await expect(page.locator("#cache-ratio")).to_have_text("\u2013 (0 hit, 0 miss, 0 bypass)")
        await expect(page.locator("#cache-kind")).to_have_text("(this process's memory)")
        cached = page.locator("#cache-models tbody tr")
        await expect(cached).to_have_count(1)
        await expect(cached.locator("td")).to_have_text(
            ["test/m", "model", "600 s", "global", "paced", "0 %", "exact only"]
        )
        outcomes = [(await ask(gw, key)).headers["x-sluice-cache"] for _ in range(2)]
        refreshed = page.locator("#cache-entries")  # the page reads the cache every 5 s
        await expect(refreshed).to_have_text("1", timeout=10_000)
        await expect(page.locator("#cache-ratio")).to_have_text("50.0 % (1 hit, 1 miss, 0 bypass)")
        await expect(page.locator("#cache-bytes")).to_have_text(
            re.compile(r"^\d+(\.\d)? (B|KiB) of 64 MiB \(one answer at most 1 MiB\)$")
        )
        await expect(page.locator("#cache-evictions")).to_have_text("0")
        await expect(page.locator("#cache-flights")).to_have_text("0 streaming, 0 joined")
        await expect(page.locator("#cache-none")).to_be_hidden()
        await leave(page, "models-cache")
    assert outcomes == ["miss", "hit"]
