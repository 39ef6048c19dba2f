"""The gateway's unwatched work (sluice/exchange/tasks.py) ends when the gateway closes."""

from __future__ import annotations

import asyncio

from sluice.exchange.tasks import Tasks


async def test_close_ends_a_drain_that_lost_its_cancel() -> None:
    """On Python 3.11 a cancel landing as an ``asyncio.wait_for`` inside the drain
    completes is lost; the drain reads on. Closing cancels it again until it ends."""
    tasks = Tasks(asyncio.get_running_loop().time, hold_ttl=600.0)
    lost: list[bool] = []
    settled: list[bool] = []

    async def reads_on_after_one_cancel() -> None:
        try:
            await asyncio.sleep(0.05)
        except asyncio.CancelledError:
            lost.append(True)  # as wait_for returns what completed
        await asyncio.sleep(300)  # the rest of a long stream

    started = asyncio.get_running_loop().time()
    drain = tasks.drain(
        reads_on_after_one_cancel,
        started=started,
        request_id="req_x",
        then=lambda: settled.append(True),
    )
    await asyncio.sleep(0.01)
    closing = asyncio.ensure_future(tasks.close())
    done, _ = await asyncio.wait({closing}, timeout=3)
    if not done:  # the old close: cut it so the test ends
        assert drain is not None
        drain.cancel()
        await asyncio.wait({closing})
    assert lost == [True] and settled == [True] and done
