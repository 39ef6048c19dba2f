"""The playground beyond one question (issue 24): several turns with a system prompt and
a temperature, sent as the page shows them; the request copied as curl, Python and JS
runs as printed and streams an answer; the request id opens its record; the operator
chats on behalf of an account, charged to that account."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path

from playwright.async_api import Page, Request, expect

from tests.console.test_console import FUNDS, SLOW_DEMO, base, leave, sign_in
from tests.server.test_admin import ADMIN, ENV
from tests.support.accounts import metered_key
from tests.support.gateway import running_gateway
from tests.support.raw_http import exchange, get, post

NODE_PROJECT = Path(__file__).resolve().parents[1] / "node"
"""Where the openai package for Node is installed (make test's deps)."""


async def test_several_turns_with_a_system_prompt_and_temperature(
    tmp_path: Path, page: Page
) -> None:
    async with running_gateway(tmp_path) as gw:
        key = await metered_key(gw.gateway.store, "team", FUNDS)
        sent: list[dict[str, object]] = []

        def seen(request: Request) -> None:
            if request.url.endswith("/v1/chat/completions"):
                sent.append(json.loads(request.post_data or "{}"))

        page.on("request", seen)
        await sign_in(page, base(gw), key)
        await page.select_option("#model", "sluice/demo-fast")
        await page.click("#system-box summary")
        await page.fill("#system", "Answer briefly.")
        await page.fill("#temperature", "0.3")
        await page.fill("#prompt", "First question")
        await page.click("#send")
        await expect(page.locator("#stat-state")).to_have_text("complete", timeout=10_000)
        first_answer = await page.text_content("#answer")
        await expect(page.locator("#transcript li")).to_have_count(2)
        await page.fill("#prompt", "Second question")
        await page.click("#send")
        await expect(page.locator("#transcript li")).to_have_count(4, timeout=10_000)
        await page.click("#new-chat")
        await expect(page.locator("#transcript")).to_be_hidden()
        await page.fill("#prompt", "Fresh start")
        await page.click("#send")
        await expect(page.locator("#transcript li")).to_have_count(2, timeout=10_000)
        await leave(page, "turns")
    assert len(sent) == 3
    assert sent[0]["temperature"] == 0.3 and sent[0]["stream"] is True
    assert sent[1]["messages"] == [
        {"role": "system", "content": "Answer briefly."},
        {"role": "user", "content": "First question"},
        {"role": "assistant", "content": first_answer},
        {"role": "user", "content": "Second question"},
    ]
    assert sent[2]["messages"] == [
        {"role": "system", "content": "Answer briefly."},
        {"role": "user", "content": "Fresh start"},
    ]


async def run(argv: list[str], key: str, cwd: Path) -> str:
    env = {**os.environ, "SLUICE_API_KEY": key}
    done = await asyncio.to_thread(
        subprocess.run, argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


async def test_the_request_copied_as_curl_python_and_js_runs_as_printed(
    tmp_path: Path, page: Page
) -> None:
    async with running_gateway(tmp_path) as gw:
        key = await metered_key(gw.gateway.store, "team", FUNDS)
        await sign_in(page, base(gw), key)
        await page.select_option("#model", "sluice/demo-fast")
        await page.click("#system-box summary")
        await page.fill("#system", "It's a 'quoted' \"test\".")  # quotes of every kind
        await page.fill("#temperature", "0.5")
        await page.fill("#max-tokens", "12")
        snippets = {}
        for kind in ("curl", "python", "js"):
            await page.click(f"[data-copy={kind}]")
            await expect(page.locator("#snippet")).to_have_attribute("data-kind", kind)
            snippets[kind] = await page.text_content("#snippet") or ""
        await leave(page, "snippets")
        assert key not in "".join(snippets.values())  # the key comes from the environment
        script = tmp_path / "ask.py"
        script.write_text(snippets["python"])
        module = NODE_PROJECT / f"ask-{os.getpid()}.mjs"  # beside node_modules
        module.write_text(snippets["js"])
        try:
            by_curl = await run(["bash", "-c", snippets["curl"]], key, tmp_path)
            by_python = await run([sys.executable, str(script)], key, tmp_path)
            by_node = await run(["node", str(module)], key, NODE_PROJECT)
        finally:
            module.unlink()
        listed = await exchange(gw.host, gw.port, get("/v1/requests?limit=3", key))
    assert by_curl.rstrip().endswith("data: [DONE]")
    assert by_python.strip() and by_node.strip()
    rows = listed.json()["data"]
    assert [r["status"] for r in rows] == ["truncated"] * 3  # max_tokens 12 as typed
    assert {r["requested_model"] for r in rows} == {"sluice/demo-fast"}


async def test_the_request_id_opens_its_record(tmp_path: Path, page: Page) -> None:
    async with running_gateway(tmp_path) as gw:
        key = await metered_key(gw.gateway.store, "team", FUNDS)
        await sign_in(page, base(gw), key)
        await page.select_option("#model", "sluice/demo-fast")
        await page.click("#send")
        await expect(page.locator("#stat-state")).to_have_text("complete", timeout=10_000)
        request_id = await page.text_content("#stat-request")
        await page.click("#stat-request")
        await expect(page.locator("#activity")).to_be_visible()
        await expect(page.locator("#record-id")).to_have_text(request_id or "?")
        await expect(page.locator("#record-life")).to_have_attribute("data-attempts", "1")
        await leave(page, "record-link")


async def test_the_operator_chats_on_behalf_of_an_account(tmp_path: Path, page: Page) -> None:
    async with running_gateway(tmp_path, env=ENV) as gw:
        for name in ("acme", "zeta"):
            doc = json.dumps({"name": name, "credits": 5}).encode()
            made = await exchange(gw.host, gw.port, post_admin("/admin/accounts", doc))
            assert made.status == 201
        await sign_in(page, base(gw), ADMIN)
        await page.click("#tabs button[data-tab=playground]")
        await expect(page.locator("#on-behalf")).to_be_visible()
        await page.select_option("#as-account", "zeta")
        await expect(page.locator("#model option")).not_to_have_count(0)
        await page.select_option("#model", "sluice/demo-fast")
        await page.click("#send")
        await expect(page.locator("#stat-state")).to_have_text("complete", timeout=10_000)
        request_id = await page.text_content("#stat-request")
        await gw.gateway.writer.flush()
        zeta = (await exchange(gw.host, gw.port, get("/admin/requests?account=zeta", ADMIN))).json()
        keys = (await exchange(gw.host, gw.port, get("/admin/accounts/zeta/keys", ADMIN))).json()
        account = (await exchange(gw.host, gw.port, get("/admin/accounts/zeta", ADMIN))).json()
        await page.click("#sign-out")  # revokes the key the console made
        await expect(page.locator("#sign-in")).to_be_visible()
        after = (await exchange(gw.host, gw.port, get("/admin/accounts/zeta/keys", ADMIN))).json()
        await page.wait_for_load_state("networkidle")  # the signed-out page's own loads
        await leave(page, "on-behalf-signed-out")
    assert [r["id"] for r in zeta["data"]] == [request_id]
    (made_key,) = keys["data"]
    assert made_key["name"] == "console playground" and made_key["expires_at"] is not None
    assert account["balance"] < 5 and zeta["data"][0]["cost"] > 0
    assert after["data"][0]["revoked"] is True


def post_admin(path: str, body: bytes) -> bytes:
    return post(path, body, ADMIN)


async def test_an_answer_still_streaming_survives_a_page_reload(tmp_path: Path, page: Page) -> None:
    """The playground's streams are resumable: reloaded mid-answer, the page picks the
    same answer up from its resume URL and finishes it; one request, read on by the
    gateway while the page was away (issue 25)."""
    async with running_gateway(tmp_path, SLOW_DEMO) as gw:
        key = await metered_key(gw.gateway.store, "team", FUNDS)
        await sign_in(page, base(gw), key)
        await page.select_option("#model", "sluice/demo")
        await page.fill("#max-tokens", "40")
        await page.click("#send")
        await expect(page.locator("#answer")).not_to_be_empty(timeout=10_000)
        before = await page.text_content("#answer") or ""
        await page.reload()
        await expect(page.locator("#stat-state")).to_have_text("truncated", timeout=20_000)
        after = await page.text_content("#answer") or ""
        request_id = await page.text_content("#stat-request")
        await leave(page, "reloaded")
        await gw.gateway.writer.flush()
        listed = (await exchange(gw.host, gw.port, get("/v1/requests?limit=10", key))).json()
    (row,) = listed["data"]  # one request: the reload asked nothing again
    assert row["id"] == request_id and row["disconnect"] == "resumable"
    assert row["status"] == "truncated" and row["completion_tokens"] == 40
    assert before and after.startswith(before) and len(after) > len(before)
