"""Starting and stopping a whole gateway: storage, development key, upstream client,
listening socket."""

from __future__ import annotations

import asyncio
import os
import time

import msgspec

from sluice.accounts.dev_key import DevKey, ensure_dev_key
from sluice.ids import random_id
from sluice.server.app import Gateway
from sluice.server.http1 import serve
from sluice.settings import Settings
from sluice.storage.factory import open_store


class RunningGateway(msgspec.Struct):
    gateway: Gateway
    server: asyncio.Server
    dev_key: DevKey | None
    host: str
    port: int

    @property
    def base_url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"


async def start_gateway(settings: Settings) -> RunningGateway:
    settings.home.mkdir(parents=True, exist_ok=True, mode=0o700)
    store = await open_store(settings.storage_url)
    try:
        dev_key = None
        if settings.server.dev_key:
            dev_key = await ensure_dev_key(
                store, settings.home, random_id, os.urandom(32), int(time.time())
            )
        gateway = Gateway(settings, store)
        await gateway.start()
        server = await serve(
            gateway.handle,
            gateway.limits,
            gateway.refused,
            settings.server.host,
            settings.server.port,
        )
    except BaseException:
        await store.close()
        raise
    host, port = server.sockets[0].getsockname()[:2]
    return RunningGateway(gateway, server, dev_key, host, port)


async def stop_gateway(running: RunningGateway) -> None:
    running.server.close()
    await running.gateway.close()
    await running.gateway.store.close()
