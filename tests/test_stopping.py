"""A component's tasks stopped at close (sluice/core/stopping.py), a lost cancel included."""

from __future__ import annotations

import asyncio

from sluice.core.stopping import stopped


async def _losing_one_cancel(lost: list[bool], then: float) -> None:
    """As a task whose cancel landed while an ``asyncio.wait_for`` inside it completed
    (Python 3.11 returns the result and drops the cancel), then ``then`` seconds more."""
    try:
        await asyncio.sleep(0.05)
    except asyncio.CancelledError:
        lost.append(True)
    await asyncio.sleep(then)


async def test_a_task_that_lost_its_cancel_is_cancelled_again() -> None:
    lost: list[bool] = []
    task = asyncio.ensure_future(_losing_one_cancel(lost, 300))
    await asyncio.sleep(0.01)
    assert await asyncio.wait_for(stopped([task]), 3)
    assert lost == [True] and task.cancelled()


async def test_within_bounds_the_wait_for_a_task_that_never_ends() -> None:
    deaf_until: list[bool] = []

    async def deaf() -> None:
        while not deaf_until:
            try:
                await asyncio.sleep(0.01)
            except asyncio.CancelledError:
                continue

    task = asyncio.ensure_future(deaf())
    await asyncio.sleep(0.02)
    loop = asyncio.get_running_loop()
    began = loop.time()
    assert not await stopped([task], within=0.3)
    assert 0.25 < loop.time() - began < 2 and not task.done()
    deaf_until.append(True)
    await task


async def test_what_a_task_raised_is_seen_and_ended_ones_are_left_alone() -> None:
    async def fails() -> None:
        raise RuntimeError("seen")

    failed = asyncio.ensure_future(fails())
    await asyncio.sleep(0)
    assert await stopped([failed], within=1.0) and isinstance(failed.exception(), RuntimeError)
