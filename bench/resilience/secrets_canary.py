"""The canary row's machinery: connections of every provider kind whose keys are canaries,
against upstreams that quote them back, and the places the canaries must not reach."""

from __future__ import annotations

import random
import sqlite3
import string
from dataclasses import dataclass, field
from pathlib import Path

from cryptography.fernet import Fernet

from bench.resilience.harness import Context, Gateway, gateway
from bench.resilience.secrets_echo import (
    EVENTS,
    FORMS,
    STATUSES,
    Echo,
    EchoUpstream,
    Family,
    Scenario,
    gemini_whole_error,
    http_error,
    stream_error,
)
from bench.resilience.secrets_http import Needle, account_key, call, chat_body, text_of
from tests.support.raw_http import RawResponse

REGION = "us-east-1"
OWN_MODEL = "canary/own"
"""Served by accounts' own connections only (no operator connection to fail over to)."""
FAMILY = {
    "openai": "openai",
    "openai-compatible": "openai",
    "deepseek": "openai",
    "anthropic": "anthropic",
    "gemini": "gemini",
    "aws-bedrock": "bedrock",
}
NATIVE = {
    "openai": "gpt-canary",
    "anthropic": "claude-canary",
    "gemini": "gemini-canary",
    "bedrock": "anthropic.claude-canary-v1:0",
}


@dataclass
class Target:
    """One connection under test: an operator's (``owner`` None) or an account's own."""

    name: str
    provider: str
    key: str | None  # None: SigV4 from the AWS environment
    owner: str | None = None
    fake: EchoUpstream = field(init=False)
    client_key: str = ""
    model: str = ""

    def __post_init__(self) -> None:
        self.fake = EchoUpstream(FAMILY[self.provider])

    @property
    def family(self) -> Family:
        return FAMILY[self.provider]

    @property
    def conn_id(self) -> str:
        return "conn_" + self.name.replace("-", "_")

    @property
    def env(self) -> str:
        return "CANARY_" + self.name.upper().replace("-", "_")

    @property
    def base_url(self) -> str:
        slash_v1 = self.provider in ("openai", "openai-compatible", "deepseek")
        return self.fake.root_url + ("/v1" if slash_v1 else "")


class Canaries:
    """Distinctive, seeded secrets: ``/``, ``+`` and ``=`` in both halves, so that the
    URL-encoded form differs from the raw one."""

    def __init__(self, seed: int) -> None:
        self._rng = random.Random(seed)

    def part(self, n: int) -> str:
        return "".join(self._rng.choice(string.ascii_letters + string.digits) for _ in range(n))

    def key(self, tag: str) -> str:
        p = self.part
        return f"cnry-{tag[:8]}-{p(10)}/{p(6)}+{p(10)}/{p(6)}="


def targets(ctx: Context, canaries: Canaries) -> list[Target]:
    operator = [
        Target("openai", "openai", canaries.key("openai")),
        Target("openai-compatible", "openai-compatible", canaries.key("compat")),
        Target("anthropic", "anthropic", canaries.key("anthropic")),
        Target("gemini", "gemini", canaries.key("gemini")),
        Target("bedrock-bearer", "aws-bedrock", canaries.key("bedrock")),
        Target("bedrock-sigv4", "aws-bedrock", None),
        Target("deepseek", "deepseek", canaries.key("deepseek")),
    ]
    own = [
        Target(f"own-{kind}", kind, canaries.key("own" + kind[:5]), owner=f"tenant-{kind}")
        for kind in (
            "openai",
            "anthropic",
            "gemini",
            "aws-bedrock",
            "deepseek",
            "openai-compatible",
        )
    ]
    if ctx.tier == "fast":
        keep = {"openai", "gemini", "bedrock-sigv4", "own-anthropic"}
        return [t for t in operator + own if t.name in keep]
    return operator + own


def config(url: str, operator: list[Target]) -> str:
    text = f"""[storage]
url = "{url}"
[server]
env_connections = false
sse_keepalive_interval = 0
allow_private_upstreams = true  # accounts' own connections reach the fakes on 127.0.0.1
[routing]
breaker_failures = 1000000
max_retry_after = 0

[[models]]  # served by an account's own connection only
id = "{OWN_MODEL}"
providers = {{}}
price = {{ input = 1.0, output = 2.0 }}
"""
    for t in operator:
        text += f'\n[[connections]]\nid = "{t.conn_id}"\nprovider = "{t.provider}"\n'
        text += f'base_url = "{t.base_url}"\n'
        text += f'api_key_env = "{t.env}"\n' if t.key else ""
        text += f'region = "{REGION}"\n' if t.provider == "aws-bedrock" else ""
        text += f'\n[[models]]\nid = "canary/{t.name}"\n'
        text += f'providers = {{ {t.conn_id} = "{NATIVE[t.family]}" }}\n'
        text += "price = { input = 1.0, output = 2.0 }\n"
    return text


def scenarios(ctx: Context, family: Family) -> list[tuple[str, Scenario, bool]]:
    """(what, scenario, stream) for one connection, in this tier."""
    statuses = STATUSES if ctx.tier == "full" else (400, 429, 500)
    forms = FORMS if ctx.tier == "full" else ("echo",)
    out: list[tuple[str, Scenario, bool]] = []
    for status in statuses:
        for form in forms:
            for stream in (False, True):
                out.append((f"HTTP {status} {form}", http_error(family, status, form), stream))
    for variant in EVENTS[family](_NO_ECHO):
        for after in (False, True):
            where = "mid-stream" if after else "first event"
            out.append(
                (f"{variant} {where}", stream_error(family, variant, after_content=after), True)
            )
    if family == "gemini":
        for variant in EVENTS["gemini"](_NO_ECHO):
            out.append((f"200 whole {variant}", gemini_whole_error(variant), False))
    return out


@dataclass
class Outcome:
    sent: int = 0
    reached: int = 0
    connections: int = 0
    redacted: int = 0
    kinds: str = ""
    unsent_canaries: list[str] = field(default_factory=list)
    leaking: list[str] = field(default_factory=list)
    """The requests whose own response quoted a secret: connection, scenario."""
    places: dict[str, list[str]] = field(default_factory=dict)
    needles: list[Needle] = field(default_factory=list)


async def run(ctx: Context) -> Outcome:
    canaries = Canaries(ctx.seed)
    found = targets(ctx, canaries)
    access = "AKIDcnry" + canaries.part(16)
    secret = f"{canaries.part(20)}/{canaries.part(10)}+{canaries.part(9)}"
    token = f"IQoJcnry{canaries.part(40)}/{canaries.part(40)}+{canaries.part(30)}=="
    admin = "admin-" + canaries.part(40)
    vault = Fernet.generate_key().decode()
    env = {
        "SLUICE_ADMIN_KEY": admin,
        "SLUICE_SECRET_KEY": vault,
        "AWS_ACCESS_KEY_ID": access,
        "AWS_SECRET_ACCESS_KEY": secret,
        "AWS_SESSION_TOKEN": token,
        "AWS_CONFIG_FILE": "/nonexistent/aws-config",
        "AWS_SHARED_CREDENTIALS_FILE": "/nonexistent/aws-credentials",
        "AWS_EC2_METADATA_DISABLED": "true",
    }
    env |= {t.env: t.key for t in found if t.key and t.owner is None}
    out = Outcome(connections=len(found))
    own = sum(t.owner is not None for t in found)
    kinds = sorted({t.provider + (" SigV4" if t.key is None else "") for t in found})
    out.kinds = f"{', '.join(kinds)}; {own} of them accounts' own"
    out.needles = [Needle(t.name, t.key) for t in found if t.key]
    out.needles += [
        Needle("AWS_ACCESS_KEY_ID", access),
        Needle("AWS_SECRET_ACCESS_KEY", secret),
        Needle("AWS_SESSION_TOKEN", token),
        Needle("SLUICE_SECRET_KEY", vault),
        Needle("SLUICE_ADMIN_KEY", admin),
    ]
    for t in found:
        await t.fake.start()
    home = ctx.home("canary")
    db = home / "sluice.db"
    responses: list[RawResponse] = []
    chats: list[tuple[RawResponse, str]] = []
    try:
        operator = [t for t in found if t.owner is None]
        async with gateway(
            ctx,
            config(f"sqlite:///{db}", operator),
            name="canary",
            log_level="DEBUG",
            env=env,
            home=home,
        ) as gw:
            await _own_connections(gw, admin, found, responses)
            for t in found:
                for what, scenario, stream in scenarios(ctx, t.family):
                    t.fake.scenario = scenario
                    body = chat_body(t.model, stream)
                    resp = await call(gw, "POST", "/v1/chat/completions", t.client_key, body)
                    chats.append((resp, t.client_key))
                    out.sent += 1
                    if any(sum(n.count(text_of(resp))) for n in out.needles):
                        kind = "streamed" if stream else "whole"
                        out.leaking.append(f"{t.name} {what} ({kind})")
            responses += await _lookups(gw, admin, found, chats)
            metrics = await call(gw, "GET", "/metrics", admin)  # operators only
        out.places["chat responses (bodies, headers)"] = [text_of(r) for r, _ in chats]
        out.places["request log and admin API"] = [text_of(r) for r in responses]
        out.redacted = sum(r.body.count(b"[redacted]") for r, _ in chats)
        out.places["/metrics"] = [text_of(metrics)]
        out.places["gateway log (DEBUG)"] = [gw.log_text()]
        out.places["database file bytes"] = [
            p.read_bytes().decode("latin-1") for p in sorted(home.glob("sluice.db*"))
        ]
        out.places["database rows"] = _rows(db)
    finally:
        for t in found:
            await t.fake.close()
    out.reached = sum(t.fake.requests for t in found)
    for t in found:
        wanted = t.key or access
        if not any(wanted in c for c in t.fake.credentials):
            out.unsent_canaries.append(t.name)
    return out


async def _own_connections(
    gw: Gateway, admin: str, found: list[Target], responses: list[RawResponse]
) -> None:
    for t in found:
        if t.owner is None:
            t.client_key, t.model = gw.key, f"canary/{t.name}"
            continue
        t.client_key, made = await account_key(gw, admin, t.owner)
        t.model = OWN_MODEL
        spec: dict[str, object] = {
            "provider": t.provider,
            "base_url": t.base_url,
            "api_key": t.key,
            "models": {OWN_MODEL: NATIVE[t.family]},
        }
        if t.provider == "aws-bedrock":
            spec["region"] = REGION
        put = await call(
            gw, "PUT", f"/admin/accounts/{t.owner}/connections/{t.conn_id}", admin, spec
        )
        if put.status != 200:
            raise RuntimeError(f"saving {t.name}: {put.status} {put.body[:300]!r}")
        responses += [*made, put]


async def _lookups(
    gw: Gateway, admin: str, found: list[Target], chats: list[tuple[RawResponse, str]]
) -> list[RawResponse]:
    """Every request's log record (``GET /v1/requests/{id}``, with the key that sent
    it) and each account's connections as the admin API lists them."""
    out: list[RawResponse] = []
    for resp, key in chats:
        request_id = resp.headers.get("x-request-id", "")
        if request_id:
            out.append(await call(gw, "GET", f"/v1/requests/{request_id}", key))
    for t in found:
        if t.owner is not None:
            out.append(await call(gw, "GET", f"/admin/accounts/{t.owner}/connections", admin))
    return out


def _rows(db: Path) -> list[str]:
    """Every row of every table, as SQL text."""
    with sqlite3.connect(db) as conn:
        return list(conn.iterdump())


_NO_ECHO = Echo("", "")  # only the variants' names are read from it
