"""A headless Debian ``chromium`` driven by Playwright, for the console's browser tests.

``make test`` installs chromium (scripts/deps.sh) and playwright (the dev extra). Where
no browser can be found the tests skip with the reason, except under ``CI=true``, where
they fail. Every page's console errors (a Content-Security-Policy violation is one) and
uncaught exceptions are collected; a test that saw any fails.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from playwright.async_api import Browser, Page, async_playwright

ARTIFACTS = Path(__file__).resolve().parents[1] / "artifacts"


def chromium_path() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found is None:
        message = "no chromium on PATH (make test installs Debian's chromium)"
        if os.environ.get("CI") == "true":
            pytest.fail(message + " — CI=true requires it")
        pytest.skip(message)
    return found


@pytest.fixture
async def browser() -> AsyncIterator[Browser]:
    executable = chromium_path()
    async with async_playwright() as driver:
        launched = await driver.chromium.launch(
            executable_path=executable, headless=True, args=["--no-sandbox"]
        )
        try:
            yield launched
        finally:
            await launched.close()


@pytest.fixture
def allowed_console_errors() -> list[str]:
    """Console errors a test expects (a substring each), such as the browser's own line
    for a refused fetch; any other fails the test."""
    return []


@pytest.fixture
async def page(browser: Browser, allowed_console_errors: list[str]) -> AsyncIterator[Page]:
    context = await browser.new_context(viewport={"width": 1200, "height": 900})
    opened = await context.new_page()
    problems: list[str] = []
    opened.on("console", lambda m: problems.append(m.text) if m.type == "error" else None)
    opened.on("pageerror", lambda e: problems.append(str(e)))
    try:
        yield opened
    finally:
        await context.close()
    unexpected = [p for p in problems if not any(a in p for a in allowed_console_errors)]
    assert unexpected == [], unexpected


async def screenshot(page: Page, name: str) -> None:
    """Saved under tests/artifacts/ for a person to look at."""
    ARTIFACTS.mkdir(exist_ok=True)
    await page.screenshot(path=str(ARTIFACTS / f"{name}.png"), full_page=True)
