"""The SSRF row's machinery: canary listeners on loopback, the encodings of their
addresses, and three gateways over them.

A: the guard on (the default): every encoding is saved through the admin API (each must
be refused) and used in a chat request. B: ``allow_private_upstreams = true`` on a
database of its own: the loopback encodings are saved and used, the control (it shows
which of them do reach a listener when nothing guards), and redirects from an upstream
are sent towards another listener (none may be followed). C: the guard on again, over
B's database: the connections B saved are used (each must be refused at connect).
"""

from __future__ import annotations

import asyncio
import contextlib
from asyncio import StreamReader, StreamWriter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from cryptography.fernet import Fernet

from bench.resilience.harness import Context, Gateway, gateway
from bench.resilience.secrets_encodings import BAD, ELSEWHERE, FAST, LOOPBACK, A, D, hosts_names
from bench.resilience.secrets_http import account_key, call, chat_body
from tests.support.fake_upstream import FakeUpstream, Reply
from tests.support.gateway import UPSTREAM_KEY
from tests.support.raw_http import RawResponse

REDIRECTS = (301, 302, 303, 307, 308)


class Listeners:
    """Canary TCP listeners on one port of 127.0.0.1 and, where they can be bound, ::1
    and 127.0.0.2. Every accepted connection is counted, answered 503 and closed."""

    def __init__(self) -> None:
        self.counts: dict[str, int] = {}
        self.servers: list[asyncio.Server] = []
        self.port = 0

    async def start(self) -> None:
        first = await asyncio.start_server(self._counter("127.0.0.1"), "127.0.0.1", 0)
        self.servers.append(first)
        self.port = first.sockets[0].getsockname()[1]
        self.counts["127.0.0.1"] = 0
        for host in ("::1", "127.0.0.2"):
            try:
                server = await asyncio.start_server(self._counter(host), host, self.port)
            except OSError:
                continue
            self.servers.append(server)
            self.counts[host] = 0

    def _counter(self, host: str) -> Callable[[StreamReader, StreamWriter], Awaitable[None]]:
        async def accept(reader: StreamReader, writer: StreamWriter) -> None:
            self.counts[host] += 1
            with contextlib.suppress(ConnectionError):
                writer.write(
                    b"HTTP/1.1 503 canary\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"
                )
                await writer.drain()
            writer.close()

        return accept

    @property
    def total(self) -> int:
        return sum(self.counts.values())

    async def close(self) -> None:
        for server in self.servers:
            server.close()
            await server.wait_closed()


@dataclass
class Encoding:
    n: int
    url: str
    expected: str
    loopback: bool
    refusal: str = ""  # the code it was refused with at save time, "" when saved
    right_error: bool = False
    saved_b: bool = False
    reached_b: bool = False  # the control: it reached a listener with the guard off
    connect_status: int = 0  # phase C
    connect_code: str = ""

    @property
    def model(self) -> str:
        return f"ssrf/e{self.n:03d}"

    @property
    def conn_id(self) -> str:
        return f"conn_e{self.n:03d}"


@dataclass
class Results:
    encodings: list[Encoding] = field(default_factory=list)
    names: list[str] = field(default_factory=list)
    connects_a: int = 0
    connects_c: int = 0
    control: int = 0
    redirects_sent: int = 0
    redirects_seen: int = 0
    redirect_statuses: dict[int, int] = field(default_factory=dict)
    redirect_connects: int = 0
    per_listener: str = ""
    control_per_listener: str = ""


def encodings(ctx: Context, port: int, names: list[str]) -> list[Encoding]:
    """Every case (the fast tier: a dozen), ``{p}`` filled in."""
    named = [(f"http://{name}:{{p}}", D, True) for name in names]
    chosen = [(t, e, True) for t, e in LOOPBACK] + [(u, D, False) for u in ELSEWHERE]
    if ctx.tier == "fast":
        chosen = [c for c in chosen if c[0] in FAST]
        named = named[:1]
    chosen += named
    return [
        Encoding(n, t.replace("{p}", str(port)), e, loop) for n, (t, e, loop) in enumerate(chosen)
    ]


def config(url: str, found: list[Encoding], redirect_url: str, *, allow: bool) -> str:
    text = f"""[storage]
url = "{url}"
[server]
env_connections = false
allow_private_upstreams = {str(allow).lower()}
[routing]
breaker_failures = 1000000

[[connections]]
id = "conn_redirect_op"
provider = "openai-compatible"
base_url = "{redirect_url}"
api_key_env = "FAKE_UPSTREAM_KEY"

[[models]]
id = "ssrf/redirect-op"
providers = {{ conn_redirect_op = "m" }}
price = {{ input = 1.0, output = 2.0 }}
"""
    for model in [e.model for e in found] + ["ssrf/redirect"]:
        # served by an account's own connection only
        text += f'\n[[models]]\nid = "{model}"\nproviders = {{}}\n'
        text += "price = { input = 1.0, output = 2.0 }\n"
    return text


def _spec(url: str, model: str) -> dict[str, object]:
    return {
        "provider": "openai-compatible",
        "base_url": url,
        "api_key": "sk-ssrf-canary-0123456789",
        "models": {model: "m"},
        "timeouts": {"connect": 3.0, "first_event": 5.0, "total": 10.0},
    }


async def _put(gw: Gateway, admin: str, e: Encoding, url: str | None = None) -> RawResponse:
    path = f"/admin/accounts/ssrf/connections/{e.conn_id}"
    return await call(gw, "PUT", path, admin, _spec(url or e.url, e.model))


def _error(resp: RawResponse) -> dict[str, object]:
    try:
        err = resp.json()["error"]
    except (ValueError, KeyError, TypeError):
        return {}
    return err if isinstance(err, dict) else {}


def _code(resp: RawResponse) -> str:
    return str(_error(resp).get("code") or "")


def _judge_refusal(e: Encoding, resp: RawResponse) -> None:
    if resp.status == 200:
        e.refusal = ""
        return
    err = _error(resp)
    e.refusal = str(err.get("code") or resp.status)
    codes = {D, BAD} if e.expected == A else {e.expected}
    e.right_error = (
        resp.status == 400
        and err.get("type") == "invalid_request_error"
        and err.get("param") == "base_url"
        and e.refusal in codes
    )


async def run(ctx: Context) -> Results:
    out = Results()
    listeners, target = Listeners(), Listeners()
    await listeners.start()
    await target.start()
    redirector = FakeUpstream()
    await redirector.start()
    admin = "admin-" + "s" * 40
    env = {
        "SLUICE_ADMIN_KEY": admin,
        "SLUICE_SECRET_KEY": Fernet.generate_key().decode(),
        "FAKE_UPSTREAM_KEY": UPSTREAM_KEY,
    }
    out.names = hosts_names() if ctx.tier == "full" else hosts_names()[:1]
    found = out.encodings = encodings(ctx, listeners.port, out.names)
    try:
        # A: the guard on; save and use every encoding.
        home_a = ctx.home("ssrf-guarded")
        conf = config(f"sqlite:///{home_a / 'sluice.db'}", found, redirector.base_url, allow=False)
        async with gateway(ctx, conf, name="ssrf-a", env=env, home=home_a) as gw:
            key, _ = await account_key(gw, admin, "ssrf")
            for e in found:
                _judge_refusal(e, await _put(gw, admin, e))
                await call(gw, "POST", "/v1/chat/completions", key, chat_body(e.model, False))
        out.connects_a = listeners.total
        # B: private upstreams allowed; save the loopback ones, the control, redirects.
        home = ctx.home("ssrf-shared")
        url = f"sqlite:///{home / 'sluice.db'}"
        conf = config(url, found, redirector.base_url, allow=True)
        async with gateway(ctx, conf, name="ssrf-b", env=env, home=home) as gw:
            key, _ = await account_key(gw, admin, "ssrf")
            for e in found:
                if e.loopback:
                    e.saved_b = (await _put(gw, admin, e)).status == 200
            for e in found:
                if e.saved_b:
                    before = listeners.total
                    await call(gw, "POST", "/v1/chat/completions", key, chat_body(e.model, False))
                    e.reached_b = listeners.total > before
            out.control = listeners.total - out.connects_a
            await _redirects(gw, admin, key, redirector=redirector, target=target, out=out)
        # C: the guard on again over what B saved. (The harness finds a gateway's port in
        # its log, which a reused home already holds: B's log is moved aside.)
        (home / "gateway.log").rename(home / "gateway-b.log")
        conf = config(url, found, redirector.base_url, allow=False)
        before = listeners.total
        async with gateway(ctx, conf, name="ssrf-c", env=env, home=home) as gw:
            for e in found:
                if e.saved_b:
                    body = chat_body(e.model, False)
                    used = await call(gw, "POST", "/v1/chat/completions", key, body)
                    e.connect_status, e.connect_code = used.status, _code(used)
        out.connects_c = listeners.total - before
        out.per_listener = ", ".join(listeners.counts)
        out.control_per_listener = ", ".join(str(n) for n in listeners.counts.values())
    finally:
        await listeners.close()
        await target.close()
        await redirector.close()
    return out


async def _redirects(
    gw: Gateway, admin: str, key: str, *, redirector: FakeUpstream, target: Listeners, out: Results
) -> None:
    """Redirects towards another listener, from an operator's and an account's own
    upstream (private addresses allowed, so only the redirect rule stands)."""
    spec = _spec(redirector.base_url, "ssrf/redirect")
    saved = await call(gw, "PUT", "/admin/accounts/ssrf/connections/conn_redirect", admin, spec)
    if saved.status != 200:
        raise RuntimeError(f"saving the redirecting upstream: {saved.status} {saved.body!r}")
    before = len(redirector.requests)
    hosts = [h if ":" not in h else f"[{h}]" for h in target.counts]
    for status in REDIRECTS:
        for n, host in enumerate(hosts):
            location = f"http://{host}:{target.port}/v1/chat/completions"
            redirector.default = Reply(status, {"location": location})
            if n % 2:
                redirector.default.headers["content-type"] = "application/json"
            for model in ("ssrf/redirect", "ssrf/redirect-op"):
                for stream in (False, True):
                    resp = await call(
                        gw, "POST", "/v1/chat/completions", key, chat_body(model, stream)
                    )
                    out.redirects_sent += 1
                    out.redirect_statuses[resp.status] = (
                        out.redirect_statuses.get(resp.status, 0) + 1
                    )
    out.redirects_seen = len(redirector.requests) - before
    out.redirect_connects = target.total
