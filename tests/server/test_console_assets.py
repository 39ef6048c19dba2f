"""The console's files over HTTP: ``GET /`` is the page, ``text/html`` with a strict
Content-Security-Policy; every script, module and stylesheet a page names is served
from this origin with its type; the pages hold nothing the policy would refuse (inline
script, inline style, event-handler attributes)."""

from __future__ import annotations

import re
from importlib import resources
from pathlib import Path

from sluice.server.console import CONTENT_SECURITY_POLICY
from tests.support.gateway import running_gateway
from tests.support.raw_http import exchange, get

WEB = resources.files("sluice") / "web"
PAGES = ("index.html", "docs.html")
_REFERENCE = re.compile(r'(?:src|href)="(/console/[^"]+)"')
_IMPORT = re.compile(r'from "\./([a-z]+\.js)"')


def referenced() -> set[str]:
    """Every asset path the pages name, and every module their modules import."""
    paths = {m for page in PAGES for m in _REFERENCE.findall((WEB / page).read_text())}
    pending = [p.removeprefix("/console/") for p in paths if p.endswith(".js")]
    while pending:
        name = pending.pop()
        for imported in _IMPORT.findall((WEB / name).read_text()):
            if f"/console/{imported}" not in paths:
                paths.add(f"/console/{imported}")
                pending.append(imported)
    return paths


def test_the_pages_hold_nothing_the_policy_refuses() -> None:
    for page in PAGES:
        html = (WEB / page).read_text()
        assert not re.search(r"<script(?![^>]*\bsrc=)", html), page
        assert not re.search(r"<style|\sstyle=|\son[a-z]+=", html), page
        assert "http://" not in html and "https://" not in html, page  # no CDN


async def test_the_console_and_its_assets_are_served_with_the_policy(tmp_path: Path) -> None:
    async with running_gateway(tmp_path) as gw:
        root = await exchange(gw.host, gw.port, get("/", None))
        docs = await exchange(gw.host, gw.port, get("/docs", None))
        assets = {p: await exchange(gw.host, gw.port, get(p, None)) for p in referenced()}
        missing = await exchange(gw.host, gw.port, get("/console/nope.js", None))
    for page in (root, docs):
        assert page.status == 200
        assert page.headers["content-type"] == "text/html; charset=utf-8"
        assert page.headers["content-security-policy"] == CONTENT_SECURITY_POLICY
        assert page.headers["x-content-type-options"] == "nosniff"
        assert page.headers["x-frame-options"] == "DENY"
    assert b"<title>Sluice console</title>" in root.body
    assert {"/console/console.js", "/console/toolkit.js", "/console/console.css"} <= set(assets)
    for path, answer in assets.items():
        assert answer.status == 200, path
        kind = "text/css" if path.endswith(".css") else "text/javascript"
        assert answer.headers["content-type"] == f"{kind}; charset=utf-8", path
        assert answer.body == (WEB / path.removeprefix("/console/")).read_bytes()
    assert missing.status == 404
