"""The real nginx in front of gateways, running deploy/nginx/sluice.conf as it is
(test support): ``nginx_in_front(root, port, …)``, one ``server`` line per replica.

nginx absent: its tests skip, except under ``CI=true``, where they fail (``make test``
installs it: scripts/deps.sh).
"""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import signal
import socket
import ssl
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import trustme

from tests.support.databases import missing
from tests.support.raw_http import RawClient

CONF = Path(__file__).parents[2] / "deploy" / "nginx" / "sluice.conf"
# Around the deployed file, what a distribution's nginx.conf would hold, in the temp
# dir; gzip on for event streams too, which the deployed file must turn off. The
# gateway's ``X-Accel-Buffering: no`` is ignored, so that the file's own
# ``proxy_buffering off`` is what is tested.
MAIN = """
pid {root}/nginx.pid;
error_log {root}/error.log info;
worker_processes 1;
events {{ worker_connections 128; }}
http {{
    access_log {root}/access.log;
    client_body_temp_path {root}/body;
    proxy_temp_path {root}/proxy;
    fastcgi_temp_path {root}/fastcgi;
    uwsgi_temp_path {root}/uwsgi;
    scgi_temp_path {root}/scgi;
    gzip on;
    gzip_min_length 1;
    gzip_types text/event-stream application/json;
    proxy_ignore_headers X-Accel-Buffering;
    include {root}/sluice.conf;
}}
"""


def nginx_binary() -> str:
    found = shutil.which("nginx") or shutil.which("nginx", path="/usr/sbin:/usr/local/sbin")
    if found is None:
        missing("nginx is not installed (make test installs it: scripts/deps.sh)")
    return found


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def render(conf: str, *, gateway_ports: list[int], port: int, cert: Path, key: Path) -> str:
    """The deployed file with this test's addresses (one ``server`` line per replica, as
    docs/deploy.md says) and certificate; each replaced line must be there exactly once,
    so the file and the test cannot drift apart."""
    servers = "\n    ".join(f"server 127.0.0.1:{p};" for p in gateway_ports)
    for old, new in (
        ("server 127.0.0.1:8787;", servers),
        ("listen 443 ssl;", f"listen 127.0.0.1:{port} ssl;"),
        ("/etc/ssl/sluice/fullchain.pem;", f"{cert};"),
        ("/etc/ssl/sluice/privkey.pem;", f"{key};"),
    ):
        assert conf.count(old) == 1, old
        conf = conf.replace(old, new)
    return conf


class Proxy:
    def __init__(self, port: int, ca: trustme.CA) -> None:
        self.port = port
        self.base_url = f"https://127.0.0.1:{port}"
        self.ca = ca

    def tls(self) -> ssl.SSLContext:
        context = ssl.create_default_context()
        self.ca.configure_trust(context)
        return context

    async def client(self) -> RawClient:
        reader, writer = await asyncio.open_connection("127.0.0.1", self.port, ssl=self.tls())
        return RawClient(reader, writer)


def prepare(root: Path, gateway_ports: list[int], *, served_by: bool = False) -> Proxy:
    """A CA and a certificate for 127.0.0.1, the rendered site file and its nginx.conf;
    ``served_by``: each answer names the replica that served it (``X-Served-By``), for
    a test that must know (the deployed file has no such header)."""
    ca = trustme.CA()
    issued = ca.issue_cert("127.0.0.1")
    cert, key = root / "cert.pem", root / "key.pem"
    cert.write_bytes(b"".join(pem.bytes() for pem in issued.cert_chain_pems))
    issued.private_key_pem.write_to_path(key)
    port = free_port()
    site = render(CONF.read_text(), gateway_ports=gateway_ports, port=port, cert=cert, key=key)
    if served_by:
        site = site.replace(
            "location / {", "location / {\n        add_header X-Served-By $upstream_addr always;", 1
        )
    (root / "sluice.conf").write_text(site)
    (root / "nginx.conf").write_text(MAIN.format(root=root))
    return Proxy(port, ca)


def error_log(root: Path) -> str:
    path = root / "error.log"
    return path.read_text() if path.exists() else ""


async def wait_listening(port: int, proc: asyncio.subprocess.Process, root: Path) -> None:
    for _ in range(200):
        if proc.returncode is not None:
            break
        with contextlib.suppress(OSError):
            _, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.close()
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"nginx did not start (exit {proc.returncode}): {error_log(root)}")


@asynccontextmanager
async def nginx_in_front(
    root: Path, *gateway_ports: int, served_by: bool = False
) -> AsyncIterator[Proxy]:
    """The real nginx, running deploy/nginx/sluice.conf in front of these replicas."""
    binary = nginx_binary()
    proxy = prepare(root, list(gateway_ports), served_by=served_by)
    proc = await asyncio.create_subprocess_exec(
        binary,
        "-p",
        str(root),
        "-c",
        str(root / "nginx.conf"),
        "-g",
        "daemon off;",
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.DEVNULL,
    )
    try:
        await wait_listening(proxy.port, proc, root)
        yield proxy
    finally:
        if proc.returncode is None:
            proc.send_signal(signal.SIGTERM)
        try:
            await asyncio.wait_for(proc.wait(), 10)
        except TimeoutError:
            proc.kill()
            await proc.wait()
