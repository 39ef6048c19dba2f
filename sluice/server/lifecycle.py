"""Starting and stopping a whole gateway: storage, development key, upstream client,
listening socket (and the scrape listener of ``[server] metrics_listen``)."""

from __future__ import annotations

import os
import time
from collections.abc import Callable

import msgspec

from sluice.accounts.dev_key import DevKey, ensure_dev_key
from sluice.config import listen_address
from sluice.ids import IdFactory, ordered_id
from sluice.server.app import Gateway
from sluice.server.compose import create_app
from sluice.server.listener import Listener, listen
from sluice.server.reload import SettingsSource
from sluice.server.scrape import Scrape
from sluice.server.tls import server_tls
from sluice.settings import Settings, is_shared_storage
from sluice.storage.factory import open_store


class RunningGateway(msgspec.Struct):
    gateway: Gateway
    listener: Listener
    dev_key: DevKey | None
    host: str
    port: int
    scheme: str = "http"
    scrape: Listener | None = None
    """The ``metrics_listen`` listener, if configured."""

    @property
    def base_url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.scheme}://{host}:{self.port}"


def free_traffic(settings: Settings) -> str:
    """Which of the development key and the demo connection are on, in one line; on
    shared storage, the setting that turns an off one on (by default both are off
    there: each replica would mint unmetered traffic into the shared database)."""
    dev_key, demo = settings.server.dev_key is True, settings.server.demo is True
    line = f"dev key {_on(dev_key)}, demo {_on(demo)}"
    off = [
        setting for setting, on in (("dev_key = true", dev_key), ("demo = true", demo)) if not on
    ]
    if off and is_shared_storage(settings.storage_url):
        them = "them" if len(off) > 1 else "it"
        line += f" (shared storage: [server] {' / '.join(off)} turns {them} on)"
    return line


def _on(on: bool) -> str:
    return "on" if on else "off"


async def start_gateway(
    settings: Settings,
    *,
    source: SettingsSource | None = None,
    new_id: IdFactory = ordered_id,
    wall_clock: Callable[[], float] = time.time,
    reuse_port: bool = False,
) -> RunningGateway:
    """``source``: where ``settings`` came from, read again on reload (none: no reload);
    ``reuse_port``: other processes listen on the same port (``--workers``)."""
    tls = server_tls(settings.server)  # before anything opens: a bad file stops here
    settings.home.mkdir(parents=True, exist_ok=True, mode=0o700)
    store = await open_store(settings.storage_url)
    try:
        dev_key = None
        if settings.server.dev_key is True:  # resolved: off on shared storage unless set
            dev_key = await ensure_dev_key(
                store, settings.home, new_id, os.urandom(32), int(wall_clock())
            )
        gateway = create_app(settings, store, source=source, new_id=new_id, wall_clock=wall_clock)
    except BaseException:
        await store.close()
        raise
    await gateway.start()
    try:
        listener = await listen(
            gateway.handle,
            gateway.limits,
            gateway.refused,
            settings.server.host,
            settings.server.port,
            tls=tls,
            gate=gateway.head_refusal,
            **({"reuse_port": True} if reuse_port else {}),
        )
        scrape = None
        if settings.server.metrics_listen is not None:
            scrape = await _listen_scrape(gateway, settings.server.metrics_listen, listener)
    except BaseException:
        await gateway.close()
        await store.close()
        raise
    host, port = listener.address
    scheme = "https" if tls else "http"
    return RunningGateway(gateway, listener, dev_key, host, port, scheme, scrape)


async def _listen_scrape(gateway: Gateway, address: str, main: Listener) -> Listener:
    """The plain-HTTP ``/metrics`` listener; if it cannot open, the main one closes."""
    host, port = listen_address(address)
    try:
        return await listen(Scrape(gateway).handle, gateway.limits, gateway.refused, host, port)
    except BaseException:
        await main.stop(0)
        raise


async def stop_gateway(running: RunningGateway, grace: float = 5.0) -> None:
    running.gateway.stop_draining()  # requests cut by the stop are not the client leaving
    await running.listener.stop(grace)
    if running.scrape is not None:
        await running.scrape.stop(0)
    await running.gateway.close()
    await running.gateway.store.close()
