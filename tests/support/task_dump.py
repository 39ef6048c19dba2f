"""A test about to hit its pytest-timeout prints every asyncio task's stack first.

pytest-timeout shows the threads only, and a test whose event loop waits on an await
that never ends shows nothing but the loop's ``select``: the tasks say which await.
"""

from __future__ import annotations

import asyncio
import gc
import sys
import threading
from collections.abc import Generator, Iterator
from typing import Any

import pytest

MARGIN = 3.0
"""Seconds before the timeout the tasks are printed."""


def _timeout(item: pytest.Item) -> float:
    marker = item.get_closest_marker("timeout")
    if marker is not None and marker.args:
        return float(marker.args[0])
    return float(item.config.getini("timeout") or 0)


def _awaits(task: asyncio.Task[object]) -> Iterator[str]:
    """Where ``task`` waits, outermost first: each coroutine down the ``await`` chain
    (``Task.print_stack`` shows the outermost only), then what the last one awaits."""
    awaited: Any = task.get_coro()
    while awaited is not None:
        frame = getattr(awaited, "cr_frame", None) or getattr(awaited, "gi_frame", None)
        frame = frame or getattr(awaited, "ag_frame", None)
        if frame is None:
            # An async generator's ``asend``/``athrow`` hides its generator (an
            # ``async with`` of an ``@asynccontextmanager`` awaits one): found among
            # its referents, followed down; a bare future is shown with its own repr.
            referents = gc.get_referents(awaited)
            generators = [r for r in referents if getattr(r, "ag_frame", None) is not None]
            if type(awaited).__name__.startswith("async_generator_") and generators:
                awaited = generators[0]
                continue
            yield f"  awaiting {awaited!r}"
            for r in referents:
                if isinstance(r, asyncio.Future):
                    yield f"    future: {r!r}"
            return
        code = frame.f_code
        yield f"  {code.co_filename}:{frame.f_lineno} in {code.co_name}"
        awaited = (
            getattr(awaited, "cr_await", None)
            or getattr(awaited, "gi_yieldfrom", None)
            or getattr(awaited, "ag_await", None)
        )


def _print_tasks(loop: asyncio.AbstractEventLoop) -> None:
    tasks = asyncio.all_tasks(loop)
    print(f"+++ {len(tasks)} asyncio tasks, {MARGIN:.0f} s before the timeout +++", file=sys.stderr)
    for task in tasks:
        print(f"--- {task.get_name()}", file=sys.stderr)
        for line in _awaits(task):
            print(line, file=sys.stderr)
    sys.stderr.flush()


def _dump() -> None:
    """Ask each running loop to print its tasks (from the loop's own thread)."""
    for obj in gc.get_objects():
        # type(), not isinstance(): isinstance reads ``__class__``, which a lazy proxy
        # (openai's module client) answers by importing, from this thread, mid-test.
        if issubclass(type(obj), asyncio.AbstractEventLoop) and obj.is_running():
            obj.call_soon_threadsafe(_print_tasks, obj)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Generator[None, object, object]:
    seconds = _timeout(item)
    if seconds <= MARGIN:
        return (yield)
    timer = threading.Timer(seconds - MARGIN, _dump)
    timer.daemon = True
    timer.start()
    try:
        return (yield)
    finally:
        timer.cancel()
