"""Activity and the overview as an operator reads them (issue 24): account, key and code
columns with names, filters and paging past the newest 50, a stream's life drawn from
what the live feed showed, charts that count what the log holds; and every page of
both roles, at 1280 and at 390 px wide, no wider than its viewport."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from playwright.async_api import Page, expect

from sluice.server.lifecycle import RunningGateway
from tests.console.conftest import screenshot
from tests.console.test_console import SLOW_DEMO, base, drain, leave, sign_in
from tests.server.test_admin import ADMIN, ENV
from tests.support.gateway import running_gateway
from tests.support.raw_http import RawClient, exchange, post

WIDTHS = (1280, 390)


async def account_with_key(gw: RunningGateway, name: str, label: str) -> dict[str, str]:
    doc = json.dumps({"name": name, "credits": 5}).encode()
    assert (await exchange(gw.host, gw.port, post("/admin/accounts", doc, ADMIN))).status == 201
    doc = json.dumps({"label": label}).encode()
    made = await exchange(gw.host, gw.port, post(f"/admin/accounts/{name}/keys", doc, ADMIN))
    assert made.status == 201
    key: dict[str, str] = made.json()
    return key


async def ask(
    gw: RunningGateway, key: str, times: int, model: str = "sluice/demo-fast"
) -> list[str]:
    body = json.dumps({"model": model, "max_tokens": 4,
                       "messages": [{"role": "user", "content": "x"}]}).encode()  # fmt: skip
    ids = []
    for _ in range(times):
        answer = await exchange(gw.host, gw.port, post("/v1/chat/completions", body, key))
        ids.append(answer.headers["x-request-id"])
    await gw.gateway.writer.flush()
    return ids


async def test_activity_names_filters_and_pages(tmp_path: Path, page: Page) -> None:
    async with running_gateway(tmp_path, env=ENV) as gw:
        acme = await account_with_key(gw, "acme", "web")
        zeta = await account_with_key(gw, "zeta", "batch")
        acme_ids = await ask(gw, acme["key"], 55)
        zeta_ids = await ask(gw, zeta["key"], 3)
        await sign_in(page, base(gw), ADMIN)
        await page.click("#tabs button[data-tab=activity]")
        rows = page.locator("#recent tbody tr")
        newest = page.locator(f"#recent tr[data-id={zeta_ids[-1]}]")
        await expect(newest.locator("td").nth(2)).to_have_text("zeta")
        await expect(newest.locator("td").nth(3)).to_have_text(f"batch ({zeta['prefix']})")
        await expect(rows).to_have_count(50)
        await page.click("#older")
        await expect(rows).to_have_count(8)
        await expect(page.locator("#page-note")).to_have_text("51\u201358, newest first")
        await expect(page.locator(f"#recent tr[data-id={acme_ids[0]}]")).to_be_visible()
        await expect(page.locator("#older")).to_be_disabled()
        await page.click("#newest")
        await expect(rows).to_have_count(50)
        await page.select_option("#filter-account", "zeta")
        await page.click("#refresh")
        await expect(rows).to_have_count(3)
        await page.select_option("#filter-account", "")
        await page.fill("#filter-key", acme["id"])
        await page.click("#refresh")
        await expect(rows).to_have_count(50)
        await expect(page.locator(f"#recent tr[data-id={zeta_ids[0]}]")).to_have_count(0)
        await leave(page, "activity-paged")


async def test_a_streams_life_is_drawn_from_the_live_feed(tmp_path: Path, page: Page) -> None:
    async with running_gateway(tmp_path, SLOW_DEMO, env=ENV) as gw:
        acme = await account_with_key(gw, "acme", "web")
        await sign_in(page, base(gw), ADMIN)
        await expect(page.locator("#live-state")).to_have_text("(live)")
        body = {"model": "sluice/demo", "max_tokens": 30, "stream": True,
                "messages": [{"role": "user", "content": "hi"}]}  # fmt: skip
        client = await RawClient.connect(gw.host, gw.port)
        await client.send(post("/v1/chat/completions", json.dumps(body).encode(), acme["key"]))
        _, headers = await client.read_head()
        await drain(client)
        request_id = headers["x-request-id"]
        listed = page.locator(f"#recent tr[data-id={request_id}]")
        await expect(listed.locator(".status")).to_have_text("truncated", timeout=10_000)
        await listed.click()
        life = page.locator("#record-life")
        await expect(life).to_have_attribute("data-attempts", "1")
        samples = int(await life.get_attribute("data-samples") or "0")
        await expect(page.locator("#record-life-note")).to_contain_text("as seen live")
        await leave(page, "life")
    assert samples >= 3  # 30 tokens at 60 ms, sampled every 250 ms


async def test_the_overview_counts_what_the_log_holds(tmp_path: Path, page: Page) -> None:
    async with running_gateway(tmp_path, env=ENV) as gw:
        acme = await account_with_key(gw, "acme", "web")
        await ask(gw, acme["key"], 7)
        await ask(gw, acme["key"], 2, "sluice/demo")
        await ask(gw, acme["key"], 1, "nobody/none")  # an error
        await sign_in(page, base(gw), ADMIN)
        await page.click("#tabs button[data-tab=overview]")
        await expect(page.locator("#chart-requests")).to_have_attribute("data-total", "10")
        await expect(page.locator("#overview-note")).to_have_text("10 requests")
        legend = page.locator("#chart-models-legend li")
        await expect(legend).to_have_count(3)
        await expect(page.locator("#chart-errors")).to_have_attribute("data-last", "[0.1]")
        await expect(page.locator("#chart-ttft")).to_have_attribute("data-points", "2")
        await leave(page, "overview")


async def test_every_page_fits_its_viewport_at_1280_and_390(tmp_path: Path, page: Page) -> None:
    async with running_gateway(tmp_path, env=ENV) as gw:
        acme = await account_with_key(gw, "a-team-with-a-rather-long-name", "the web front end")
        ids = await ask(gw, acme["key"], 5)
        too_wide = []
        for width in WIDTHS:  # the pages before sign-in: the sign-in form and /docs
            await page.set_viewport_size({"width": width, "height": 900})
            for name, path in (("sign-in", "/"), ("docs", "/docs")):
                await page.goto(base(gw) + path)
                if name == "docs":
                    await expect(page.locator("body")).to_have_attribute("data-ready", "true")
                await screenshot(page, f"page-{name}-{width}")
                wide = await page.evaluate("document.documentElement.scrollWidth")
                if wide > width:
                    too_wide.append((name, "", width, wide))
        for role, key, tabs in (
            ("admin", ADMIN, ("activity", "overview", "operator", "models", "playground")),
            ("api", acme["key"], ("playground", "activity", "overview")),
        ):
            await sign_in(page, base(gw), key)
            for width in WIDTHS:
                await page.set_viewport_size({"width": width, "height": 900})
                for tab in tabs:
                    await page.click(f"#tabs button[data-tab={tab}]")
                    if tab == "activity":
                        await page.locator(f"#recent tr[data-id={ids[0]}]").click()
                    await asyncio.sleep(0.3)  # the page's own fetches draw it
                    await screenshot(page, f"page-{role}-{tab}-{width}")
                    wide = await page.evaluate("document.documentElement.scrollWidth")
                    if wide > width:
                        too_wide.append((role, tab, width, wide))
            await page.click("#sign-out")
            await expect(page.locator("#sign-in")).to_be_visible()
        await page.goto("about:blank")
    assert too_wide == []
