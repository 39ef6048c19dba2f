"""Stopping a component's own asyncio tasks when it closes."""

from __future__ import annotations

import asyncio
from collections.abc import Collection
from typing import Any

ASK_EVERY = 0.1
"""Seconds between two cancels of a task that has not ended."""


async def stopped(tasks: Collection[asyncio.Task[Any]], within: float | None = None) -> bool:
    """Cancel ``tasks`` until they end, asking again every :data:`ASK_EVERY` seconds: on
    Python 3.11 a cancel that lands as an ``asyncio.wait_for`` inside a task completes
    is lost (redis-py sends every command through one), and the task runs on. At most
    ``within`` seconds (None: until they end); True when all ended. What they raised
    is seen, not logged."""
    loop = asyncio.get_running_loop()
    deadline = None if within is None else loop.time() + within
    pending = {task for task in tasks if not task.done()}
    while pending:
        left = ASK_EVERY if deadline is None else min(ASK_EVERY, deadline - loop.time())
        if left <= 0:
            break
        for task in pending:
            task.cancel()
        _, pending = await asyncio.wait(pending, timeout=left)
    for task in tasks:
        if task.done() and not task.cancelled():
            task.exception()
    return not pending
