"""What the protocol rows share: the keys and environment of their gateways, a fake
upstream that answers every call, and figures that fit in the table."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

from bench.resilience.harness import Row
from bench.resilience.protocol_exchange import Answer
from tests.support.fake_openai import completion
from tests.support.fake_upstream import FakeUpstream, Reply
from tests.support.gateway import UPSTREAM_KEY

ADMIN_KEY = "admin-" + "p" * 40
ENV = {"FAKE_UPSTREAM_KEY": UPSTREAM_KEY, "SLUICE_ADMIN_KEY": ADMIN_KEY}
WRONG_KEY = "sk-sluice-" + "W" * 40


async def fake_upstream() -> FakeUpstream:
    """A started fake upstream answering every call with a completion."""
    fake = FakeUpstream()
    await fake.start()
    fake.default = Reply.json(completion("ok"))
    return fake


def statuses(answers: Iterable[Answer]) -> str:
    counts = Counter(a.status if a.status is not None else "none" for a in answers)
    return ", ".join(f"{k}: {v}" for k, v in sorted(counts.items(), key=lambda kv: str(kv[0])))


def table_row(name: str, figure: str, criterion: str, passed: bool) -> Row:
    """A row whose figure cannot break the markdown table (a ``|`` is escaped)."""
    return Row(name, figure.replace("|", "\\|"), criterion, passed)


def few(items: list[str], n: int = 3) -> str:
    more = f" (+{len(items) - n} more)" if len(items) > n else ""
    return "; ".join(items[:n]) + more
