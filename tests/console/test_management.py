"""The operator runs the gateway from the console (issue 24), in a real browser against
a real gateway: every action is made by clicking, then checked through the API or the
database: the account and its credits are in the ledger, the key made in the page
works with the policy typed in, a rotated key's old secret and a revoked key get 401,
the account's budget and limits are stored, a refusal shows the gateway's message."""

from __future__ import annotations

import json
from pathlib import Path

from playwright.async_api import Page, expect

from sluice.core.money import NANO_PER_USD
from sluice.server.lifecycle import RunningGateway
from tests.console.test_console import admin_post, base, leave, sign_in
from tests.server.test_admin import ADMIN, ENV
from tests.support.gateway import running_gateway
from tests.support.raw_http import RawResponse, exchange, get, post

CHAT = {"model": "sluice/demo-fast", "messages": [{"role": "user", "content": "hi"}]}


async def chat(gw: RunningGateway, key: str, model: str = "sluice/demo-fast") -> RawResponse:
    body = json.dumps(CHAT | {"model": model}).encode()
    return await exchange(gw.host, gw.port, post("/v1/chat/completions", body, key))


async def admin_get(gw: RunningGateway, path: str) -> dict[str, object]:
    answer = await exchange(gw.host, gw.port, get(path, ADMIN))
    assert answer.status == 200, answer.body
    found: dict[str, object] = answer.json()
    return found


async def ledger(gw: RunningGateway, account: str) -> list[tuple[str, int]]:
    rows = await gw.gateway.store.all(  # type: ignore[attr-defined]
        "SELECT kind, amount FROM ledger WHERE account_id = "
        "(SELECT id FROM accounts WHERE name = ?) ORDER BY id",
        (account,),
    )
    return [(kind, amount) for kind, amount in rows]


async def open_accounts(page: Page, gw: RunningGateway) -> None:
    await sign_in(page, base(gw), ADMIN)
    await page.click("#tabs button[data-tab=operator]")


async def test_an_account_made_and_credited_in_the_console_is_in_the_ledger(
    tmp_path: Path, page: Page, allowed_console_errors: list[str]
) -> None:
    allowed_console_errors.append("409 (Conflict)")  # the browser's line for the refusal
    async with running_gateway(tmp_path, env=ENV) as gw:
        await open_accounts(page, gw)
        await page.click("#new-account-box summary")
        await page.fill("#new-account [name=name]", "acme")
        await page.fill("#new-account [name=credits]", "5")
        await page.click("#new-account button[type=submit]")
        await expect(page.locator("#accounts tr[data-name=acme]")).to_contain_text("$5.00")
        await expect(page.locator("#keys-account")).to_have_text("acme")
        await page.fill("#credit-form [name=amount]", "2.25")
        await page.click("#credit-form button[type=submit]")
        await expect(page.locator("#operator-message")).to_contain_text("the balance is $7.25")
        await page.fill("#credit-form [name=amount]", "-0.000000001")
        await page.click("#credit-form button[type=submit]")
        await expect(page.locator("#accounts tr[data-name=acme]")).to_contain_text("$7.249999999")
        await page.fill("#account-limits [name=budget]", "3")
        await page.select_option("#account-limits [name=budget_period]", "weekly")
        await page.fill("#account-limits [name=rpm]", "100")
        await page.click("#account-limits button[type=submit]")
        await expect(page.locator("#accounts tr[data-name=acme]")).to_contain_text("$3.00 weekly")
        account = await admin_get(gw, "/admin/accounts/acme")
        entries = await ledger(gw, "acme")
        # a second account of the same name: the gateway's refusal, shown as it said it
        await page.click("#new-account-box summary")
        await page.fill("#new-account [name=name]", "acme")
        await page.click("#new-account button[type=submit]")
        await expect(page.locator("#operator-message.error")).to_contain_text("exists already")
        await leave(page, "accounts")
    assert account["balance"] == 7.249999999 and account["metered"] is True
    assert (account["budget"], account["budget_period"], account["rpm"]) == (3.0, "weekly", 100)
    assert account["tpm"] is None
    usd = NANO_PER_USD
    assert entries == [("credit", 5 * usd), ("credit", 2 * usd + usd // 4), ("credit", -1)]


async def test_a_key_made_in_the_console_works_with_the_policy_typed_in(
    tmp_path: Path, page: Page
) -> None:
    async with running_gateway(tmp_path, env=ENV) as gw:
        made = await exchange(
            gw.host, gw.port, admin_post("/admin/accounts", {"name": "acme", "credits": 5})
        )
        assert made.status == 201
        await page.context.grant_permissions(["clipboard-read", "clipboard-write"])
        await open_accounts(page, gw)
        await page.click("#new-key")
        form = page.locator("#key-form")
        await form.locator("[name=label]").fill("web")
        await form.locator("[name=models]").fill("sluice/demo-fast, sluice/demo")
        await form.locator("[name=budget]").fill("1.5")
        await form.locator("[name=budget_period]").select_option("monthly")
        await form.locator("[name=rpm]").fill("30")
        await form.locator("[name=expires_at]").fill("2099-01-31T12:00")
        await page.click("#key-save")
        await expect(page.locator("#secret-box")).to_be_visible()
        secret = await page.text_content("#secret")
        await page.click("#copy-secret")
        copied = await page.evaluate("navigator.clipboard.readText()")
        await page.click("#dismiss-secret")
        await expect(page.locator("#secret-box")).to_be_hidden()
        assert secret is not None and copied == secret
        allowed = await chat(gw, secret)
        outside = await chat(gw, secret, "sluice/demo-embed")
        listed = await admin_get(gw, "/admin/accounts/acme/keys")
        key: dict[str, object] = listed["data"][0]  # type: ignore[index]
        row = page.locator(f"#keys tr[data-prefix='{key['prefix']}']")
        await expect(row).to_contain_text("$1.50 monthly")
        await expect(row).to_contain_text("2099-01-31 12:00:00 UTC")
        shown = await page.locator("main").inner_text()
        await leave(page, "key-made")
    assert secret not in shown  # once only: gone from the page when dismissed
    assert allowed.status == 200, allowed.body
    assert outside.status == 403 and outside.json()["error"]["code"] == "model_not_allowed"
    assert key["name"] == "web" and key["models"] == ["sluice/demo-fast", "sluice/demo"]
    assert (key["budget"], key["budget_period"], key["rpm"], key["tpm"]) == (
        1.5,
        "monthly",
        30,
        None,
    )
    assert key["expires_at"] == "2099-01-31T12:00:00Z"


async def test_a_key_edited_rotated_and_revoked_in_the_console(tmp_path: Path, page: Page) -> None:
    async with running_gateway(tmp_path, env=ENV) as gw:
        await exchange(
            gw.host, gw.port, admin_post("/admin/accounts", {"name": "acme", "credits": 5})
        )
        doc = {"label": "web", "rpm": 10, "models": ["sluice/*"]}
        first = (
            await exchange(gw.host, gw.port, admin_post("/admin/accounts/acme/keys", doc))
        ).json()
        await open_accounts(page, gw)
        row = page.locator(f"#keys tr[data-id={first['id']}]")
        await row.locator("button", has_text="Edit").click()
        form = page.locator("#key-form")
        await expect(form.locator("[name=rpm]")).to_have_value("10")
        await expect(form.locator("[name=models]")).to_have_value("sluice/*")
        await form.locator("[name=rpm]").fill("60")
        await form.locator("[name=models]").fill("")  # empty: any model
        await form.locator("[name=budget]").fill("2")
        await page.click("#key-save")
        await expect(row).to_contain_text("60 rpm")
        edited = (await admin_get(gw, "/admin/accounts/acme/keys"))["data"][0]  # type: ignore[index]
        rotate = row.locator("button", has_text="Rotate")
        await rotate.click()
        await expect(rotate).to_have_text("Confirm rotate")  # asked once more
        assert (await chat(gw, first["key"])).status == 200
        await rotate.click()
        await expect(page.locator("#secret-box")).to_be_visible()
        rotated = await page.text_content("#secret")
        assert rotated is not None and rotated != first["key"]
        old, new = await chat(gw, first["key"]), await chat(gw, rotated)
        revoke = page.locator(f"#keys tr[data-id={first['id']}] button", has_text="Revoke")
        await revoke.click()
        await revoke.click()
        await expect(page.locator(f"#keys tr[data-id={first['id']}]")).to_contain_text("revoked")
        revoked = await chat(gw, rotated)
        await leave(page, "key-revoked")
    assert (edited["rpm"], edited["models"], edited["budget"]) == (60, None, 2.0)
    assert old.status == 401 and new.status == 200
    assert revoked.status == 401, revoked.body


async def test_models_routes_and_a_reload_from_the_console(
    tmp_path: Path, page: Page, allowed_console_errors: list[str]
) -> None:
    allowed_console_errors.append("422 (Unprocessable")  # the browser's line for the refusal
    config = tmp_path / "sluice.toml"
    route = (
        '[[routes]]\nname = "chat"\n'
        'chain = [ { model = "sluice/demo-fast" }, { model = "sluice/demo" } ]\n'
    )
    async with running_gateway(tmp_path, route, env=ENV, config_path=config) as gw:
        await sign_in(page, base(gw), ADMIN)
        await page.click("#tabs button[data-tab=models]")
        chain = page.locator("#model-table tr[data-id=chat]")
        await expect(chain).to_contain_text("route")
        await expect(chain.locator(".targets li")).to_have_text(
            ["primary conn_demo → demo-fast", "standby_a conn_demo → demo"]
        )
        await page.click("#reload")
        await expect(page.locator("#reload-result")).to_have_text("Reloaded (nothing changed).")
        config.write_text(config.read_text().replace('name = "chat"', 'name = "talk"'))
        await page.click("#reload")
        await expect(page.locator("#reload-result")).to_contain_text("changed: routes")
        await expect(page.locator("#model-table tr[data-id=talk]")).to_be_visible()
        await expect(chain).to_have_count(0)
        config.write_text(config.read_text() + "[[routes]]\nname = 'broken'\nchain = []\n")
        await page.click("#reload")
        refused = page.locator("#reload-result.error")
        await expect(refused).to_contain_text("Not reloaded, the running config stays")
        await expect(refused).to_contain_text("broken")
        await leave(page, "models")
