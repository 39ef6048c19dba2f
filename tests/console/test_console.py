"""The web console in a real browser (headless chromium through Playwright) against a
real gateway: the playground streams a demo answer and shows its numbers, Stop cancels
and the activity page shows the refund, a live request's token counter rises while it
streams, and the operator view lists a key made through the admin API."""

from __future__ import annotations

import asyncio
import itertools
import json
from collections.abc import Awaitable, Callable
from pathlib import Path

from playwright.async_api import Page, Route, expect

from sluice.core.money import NANO_PER_USD, usd_text
from tests.console.conftest import screenshot
from tests.server.test_admin import ADMIN, ENV
from tests.support.accounts import metered_key
from tests.support.gateway import running_gateway
from tests.support.raw_http import RawClient, exchange, get, post

SLOW_DEMO = (
    '[[connections]]\nid = "conn_demo"\nprovider = "demo"\n'
    "options = { first_token_ms = 50, token_ms = 60 }\n"
)
FUNDS = 10**9


def money(usd: float) -> str:
    """As the console prints money: the CLI's format (``$0.000123``, ``-$2.00``)."""
    return usd_text(round(usd * NANO_PER_USD))


def base(gw: object) -> str:
    return f"http://{gw.host}:{gw.port}"  # type: ignore[attr-defined]


async def sign_in(page: Page, url: str, key: str) -> None:
    answer = await page.goto(url + "/")
    assert answer is not None and answer.status == 200
    assert "script-src 'self'" in answer.headers["content-security-policy"]
    await page.fill("#key-input", key)
    await page.click("#sign-in-button")
    await expect(page.locator("#app")).to_be_visible()


async def test_the_playground_streams_a_demo_answer_with_its_numbers(
    tmp_path: Path, page: Page
) -> None:
    async with running_gateway(tmp_path) as gw:
        key = await metered_key(gw.gateway.store, "team", FUNDS)
        await sign_in(page, base(gw), key)
        await expect(page.locator("#model option")).to_have_count(2)
        await page.select_option("#model", "sluice/demo")
        await page.fill("#max-tokens", "256")
        await page.click("#send")
        await expect(page.locator("#stat-state")).to_have_text("complete", timeout=15_000)
        await expect(page.locator("#outcome")).to_have_text("Complete.")
        ttft = await page.text_content("#stat-ttft")
        cost = await page.text_content("#stat-cost")
        request_id = await page.text_content("#stat-request")
        answer = await page.text_content("#answer")
        assert await page.evaluate("sessionStorage.getItem('sluice.console')") is not None
        assert key not in page.url and await page.context.cookies() == []
        await leave(page, "playground")
        row = (await exchange(gw.host, gw.port, get(f"/v1/requests/{request_id}", key))).json()
    assert ttft is not None and ttft.endswith(" ms") and int(ttft.split()[0]) >= 0
    assert answer and len(answer.split()) > 5
    assert cost == money(row["cost"]) and row["cost"] > 0


async def test_stop_cancels_and_the_activity_page_shows_the_refund(
    tmp_path: Path, page: Page, allowed_console_errors: list[str]
) -> None:
    # a stopped stream ends without its terminator (docs/api.md); when the gateway's cut
    # reaches the browser before its own abort, the browser says so on the console
    allowed_console_errors.append("ERR_INCOMPLETE_CHUNKED_ENCODING")
    async with running_gateway(tmp_path, SLOW_DEMO) as gw:
        key = await metered_key(gw.gateway.store, "team", FUNDS)
        await sign_in(page, base(gw), key)
        await page.select_option("#model", "sluice/demo")
        await page.fill("#max-tokens", "400")
        await page.click("#send")
        await expect(page.locator("#answer")).not_to_be_empty(timeout=10_000)
        await page.click("#stop")
        await expect(page.locator("#stat-state")).to_have_text("cancelled")
        request_id = await page.text_content("#stat-request")
        assert request_id is not None and request_id.startswith("req_")
        # the user's own Stop is not drawn as a failure, and its numbers come from the log
        await expect(page.locator("#outcome")).to_have_class("outcome state-stopped")
        none = "\u2013"  # the dash the page shows for "not known"
        await expect(page.locator("#stat-cost")).not_to_have_text(none, timeout=5_000)
        stopped_tokens = await page.text_content("#stat-tokens")
        stopped_cost = await page.text_content("#stat-cost")
        await page.click("#tabs button[data-tab=activity]")
        recent = page.locator(f"#recent tr[data-id={request_id}]")
        await expect(recent.locator(".status")).to_have_text("cancelled", timeout=10_000)
        await recent.click()
        summary = page.locator("#record-summary")
        await expect(summary.locator("[data-field=cancel]")).to_have_text("cancel")
        refunded = await summary.locator("[data-field=refunded]").text_content()
        await leave(page, "activity")
        row = (await exchange(gw.host, gw.port, get(f"/v1/requests/{request_id}", key))).json()
    assert row["status"] == "cancelled" and row["disconnect"] == "cancel"
    refund = row["credits_held"] - row["credits_charged"]
    assert refund > 0 and refunded == money(refund)
    assert stopped_cost == money(row["cost"])
    assert stopped_tokens == f"{row['prompt_tokens']} in, {row['completion_tokens']} out"


async def test_a_live_requests_token_counter_rises_while_it_streams(
    tmp_path: Path, page: Page
) -> None:
    async with running_gateway(tmp_path, SLOW_DEMO) as gw:
        key = await metered_key(gw.gateway.store, "team", FUNDS)
        await sign_in(page, base(gw), key)
        await page.click("#tabs button[data-tab=activity]")
        await expect(page.locator("#live-state")).to_have_text("(live)")
        body = {"model": "sluice/demo", "max_tokens": 80, "stream": True}
        body["messages"] = [{"role": "user", "content": "hi"}]
        client = await RawClient.connect(gw.host, gw.port)
        await client.send(post("/v1/chat/completions", json.dumps(body).encode(), key))
        _, headers = await client.read_head()
        request_id = headers["x-request-id"]
        reader = asyncio.create_task(drain(client))
        tokens = page.locator(f"#live tr[data-id={request_id}] .tokens")
        seen: list[int] = []
        while not reader.done():
            if await tokens.count():
                text = await tokens.first.text_content(timeout=1000)
                if text and (not seen or int(text) != seen[-1]):
                    seen.append(int(text))
                    if len(seen) == 3:
                        await screenshot(page, "live")
            await asyncio.sleep(0.05)
        await reader
        await expect(page.locator(f"#recent tr[data-id={request_id}] .status")).to_have_text(
            "complete", timeout=10_000
        )
        await page.goto("about:blank")
    rises = sum(1 for a, b in itertools.pairwise(seen) if b > a)
    assert rises >= 3, seen


async def drain(client: RawClient) -> None:
    while await client.read_chunk() is not None:
        pass
    await client.close()


async def test_the_operator_view_lists_a_key_made_through_the_admin_api(
    tmp_path: Path, page: Page
) -> None:
    async with running_gateway(tmp_path, env=ENV) as gw:
        account = {"name": "acme", "credits": 5}
        made = await exchange(gw.host, gw.port, admin_post("/admin/accounts", account))
        assert made.status == 201, made.body
        key_doc = {"label": "web", "budget": 2.5, "budget_period": "monthly"}
        made = await exchange(gw.host, gw.port, admin_post("/admin/accounts/acme/keys", key_doc))
        assert made.status == 201, made.body
        key = made.json()
        chat = {"model": "sluice/demo-fast", "messages": [{"role": "user", "content": "hi"}]}
        spent = await exchange(
            gw.host, gw.port, post("/v1/chat/completions", json.dumps(chat).encode(), key["key"])
        )
        assert spent.status == 200, spent.body
        await sign_in(page, base(gw), ADMIN)
        await page.click("#tabs button[data-tab=operator]")
        await page.click("#accounts tr[data-name=acme]")
        listed = page.locator(f"#keys tr[data-prefix='{key['prefix']}']")
        await expect(listed).to_contain_text("web")
        await expect(listed).to_contain_text("$2.50 monthly")  # money as money, not $2.500000
        await page.click("#tabs button[data-tab=models]")
        demo = page.locator("#connections tr[data-id=conn_demo]")
        await expect(demo).to_contain_text("closed")
        await expect(demo.locator("td").nth(3)).to_have_text("1")
        await page.click("#tabs button[data-tab=overview]")
        await expect(page.locator("#spend-chart")).to_have_attribute("data-days", "1")
        await expect(page.locator("#spend-total")).to_contain_text("1 requests")
        await leave(page, "operator")


def admin_post(path: str, doc: object) -> bytes:
    return post(path, json.dumps(doc).encode(), ADMIN)


async def test_the_api_page_renders_the_gateways_own_document(tmp_path: Path, page: Page) -> None:
    async with running_gateway(tmp_path) as gw:
        answer = await page.goto(base(gw) + "/docs")
        assert answer is not None and answer.status == 200
        assert "default-src 'none'" in answer.headers["content-security-policy"]
        await expect(page.locator("body")).to_have_attribute("data-ready", "true")
        chat = page.locator("details[data-path='/v1/chat/completions'][data-method=post]")
        await chat.click()
        await expect(chat).to_contain_text("ChatRequest")
        await expect(page.locator("#schema-ChatRequest")).to_contain_text("messages")
        # descriptions' `code` spans are code, not raw backticks (issue 24)
        shown = await page.locator("main").inner_text()
        assert "`" not in shown, [line for line in shown.splitlines() if "`" in line][:5]
        assert await page.locator("main code").count() > 0
        await leave(page, "docs")


def cut(stream: bytes, keep: int) -> bytes:
    """The first ``keep`` events of a recorded stream: no finish_reason, no [DONE]."""
    return b"".join(event + b"\n\n" for event in stream.split(b"\n\n")[:keep])


async def test_the_playground_names_every_end_state(tmp_path: Path, page: Page) -> None:
    async with running_gateway(tmp_path) as gw:
        key = await metered_key(gw.gateway.store, "team", FUNDS)
        body = {
            "model": "sluice/demo",
            "stream": True,
            "messages": [{"role": "user", "content": "hi"}],
        }
        recorded = await exchange(
            gw.host, gw.port, post("/v1/chat/completions", json.dumps(body).encode(), key)
        )
        await sign_in(page, base(gw), key)
        await page.select_option("#model", "sluice/demo")
        await page.fill("#max-tokens", "3")
        await page.click("#send")
        await expect(page.locator("#stat-state")).to_have_text("truncated", timeout=10_000)
        await expect(page.locator("#outcome")).to_contain_text("token limit")
        endings = {
            "incomplete": cut(recorded.body, 4),
            "error": cut(recorded.body, 3)
            + b'data: {"error":{"type":"upstream_error","code":"upstream_stream_failed",'
            b'"message":"The provider stream failed.","param":null}}\n\n',
        }
        for state, stream in endings.items():
            await page.route("**/v1/chat/completions", answer_with(stream))
            await page.fill("#max-tokens", "256")
            await page.click("#send")
            await expect(page.locator("#stat-state")).to_have_text(state, timeout=10_000)
            await expect(page.locator("#answer")).not_to_be_empty()
            await page.unroute("**/v1/chat/completions")
        await expect(page.locator("#outcome")).to_contain_text("The provider stream failed.")
        await leave(page, "end-states")


def answer_with(stream: bytes) -> Callable[[Route], Awaitable[None]]:
    """A route handler that answers the page's chat request with ``stream``."""

    async def fulfill(route: Route) -> None:
        await route.fulfill(status=200, headers={"content-type": "text/event-stream"}, body=stream)

    return fulfill


async def test_tool_call_and_reasoning_fragments_show_as_they_assemble(
    tmp_path: Path, page: Page
) -> None:
    async with running_gateway(tmp_path) as gw:
        key = await metered_key(gw.gateway.store, "team", FUNDS)
        await sign_in(page, base(gw), key)
        await page.select_option("#model", "sluice/demo-fast")
        await page.check("#offer-tool")
        await page.click("#send")
        await expect(page.locator("#stat-state")).to_have_text("complete", timeout=10_000)
        shown = await page.text_content("#tool-calls")
        request_id = await page.text_content("#stat-request")
        row = (await exchange(gw.host, gw.port, get(f"/v1/requests/{request_id}", key))).json()
        thinking = [
            b'data: {"id":"req_x","object":"chat.completion.chunk","created":1,"model":"m",'
            b'"choices":[{"index":0,"delta":{"role":"assistant","reasoning_content":"Let me '
            b'think. "},"finish_reason":null}]}\n\n',
            b'data: {"id":"req_x","object":"chat.completion.chunk","created":1,"model":"m",'
            b'"choices":[{"index":0,"delta":{"content":"Done."},"finish_reason":"stop"}]}\n\n',
            b"data: [DONE]\n\n",
        ]
        await page.uncheck("#offer-tool")
        await page.route("**/v1/chat/completions", answer_with(b"".join(thinking)))
        await page.click("#send")
        await expect(page.locator("#stat-state")).to_have_text("complete")
        await expect(page.locator("#reasoning")).to_have_text("Let me think. ")
        await expect(page.locator("#answer")).to_have_text("Done.")
        await leave(page, "fragments")
    (call,) = row["tool_calls"]  # the log keeps no arguments: the page showed them
    assert call["name"] == "get_weather" and call["arguments_valid_json"]
    assert shown is not None and shown.startswith("get_weather(") and shown.endswith(")")
    assert "city" in json.loads(shown.removeprefix("get_weather(").removesuffix(")"))


async def leave(page: Page, name: str) -> None:
    """A screenshot, then off the console while the gateway still runs (the activity
    feed would otherwise try again a gateway that stopped, a console error)."""
    await screenshot(page, name)
    await page.goto("about:blank")


async def test_before_sign_in_only_the_sign_in_form_shows(tmp_path: Path, page: Page) -> None:
    """The tabs showed, and did nothing, before sign-in: ``nav { display: flex }`` beat
    the ``hidden`` attribute (issue 24)."""
    async with running_gateway(tmp_path) as gw:
        answer = await page.goto(base(gw) + "/")
        assert answer is not None and answer.status == 200
        await expect(page.locator("#sign-in")).to_be_visible()
        for hidden in ("#tabs", "#app", "#sign-out"):
            await expect(page.locator(hidden)).to_be_hidden()
        assert gw.dev_key is not None
        await sign_in(page, base(gw), gw.dev_key.key)
        await expect(page.locator("#tabs")).to_be_visible()
        await expect(page.locator("#sign-in")).to_be_hidden()


async def test_a_refused_request_shows_its_error_code_in_the_activity(
    tmp_path: Path, page: Page
) -> None:
    """A refusal read "error", tokens 0 + 0 and no cost, with no code (issue 24)."""
    async with running_gateway(tmp_path) as gw:
        key = await metered_key(gw.gateway.store, "team", FUNDS)
        body = json.dumps({"model": "nobody/none", "messages": [{"role": "user", "content": "x"}]})
        refused = await exchange(gw.host, gw.port, post("/v1/chat/completions", body.encode(), key))
        assert refused.status == 404
        request_id = refused.headers["x-request-id"]
        await gw.gateway.writer.flush()
        await sign_in(page, base(gw), key)
        await page.click("#tabs button[data-tab=activity]")
        listed = page.locator(f"#recent tr[data-id={request_id}]")
        await expect(listed.locator(".status")).to_have_text("error", timeout=10_000)
        await expect(listed.locator(".code")).to_have_text("model_not_found")


async def test_a_refusal_before_any_stream_is_named_a_refusal(
    tmp_path: Path, page: Page, allowed_console_errors: list[str]
) -> None:
    """A 402 before any answer read "Error event: the gateway ended the stream with an
    error." (issue 24): no stream had begun."""
    allowed_console_errors.append("status of 402 (Payment Required)")  # the browser's own
    async with running_gateway(tmp_path) as gw:
        key = await metered_key(gw.gateway.store, "team", 1)  # one nano-dollar
        await sign_in(page, base(gw), key)
        await page.select_option("#model", "sluice/demo")
        await page.click("#send")
        await expect(page.locator("#stat-state")).to_have_text("error", timeout=10_000)
        outcome = page.locator("#outcome")
        await expect(outcome).to_contain_text("Refused before any answer (HTTP 402, ")
        assert "Error event" not in (await outcome.text_content() or "")


async def test_a_requests_detail_opens_beside_the_table_or_in_view(
    tmp_path: Path, page: Page
) -> None:
    """The detail opened below 50 rows, off-screen (issue 24)."""
    async with running_gateway(tmp_path) as gw:
        key = await metered_key(gw.gateway.store, "team", FUNDS)
        body = json.dumps({"model": "sluice/demo", "max_tokens": 2,
                           "messages": [{"role": "user", "content": "x"}]}).encode()  # fmt: skip
        ids = []
        for _ in range(30):
            answer = await exchange(gw.host, gw.port, post("/v1/chat/completions", body, key))
            ids.append(answer.headers["x-request-id"])
        await gw.gateway.writer.flush()
        await page.set_viewport_size({"width": 1440, "height": 900})
        await sign_in(page, base(gw), key)
        await page.click("#tabs button[data-tab=activity]")
        oldest = page.locator(f"#recent tr[data-id={ids[0]}]")
        await oldest.click()
        await expect(page.locator("#record-id")).to_have_text(ids[0])
        table = await page.locator("#recent").bounding_box()
        record = await page.locator("#record").bounding_box()
        assert table is not None and record is not None
        assert record["x"] >= table["x"] + table["width"] - 1, (table, record)  # beside it
        assert record["y"] < 900  # in view, however long the table
        await page.set_viewport_size({"width": 390, "height": 844})
        await page.locator(f"#recent tr[data-id={ids[1]}]").click()
        await expect(page.locator("#record-id")).to_have_text(ids[1])
        await expect(page.locator("#record h3")).to_be_in_viewport()
