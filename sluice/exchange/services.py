"""What every exchange uses, built by the composition root for each config (a reload
builds another) and passed down; an exchange keeps the one it started with and holds
no other reference to the gateway."""

from __future__ import annotations

from collections.abc import Callable

from sluice.cache.flight import Flights
from sluice.cache.semantic import VectorIndex
from sluice.cache.store import AnswerStore
from sluice.config import LimitsConfig, LimitSpec
from sluice.core.principal import Allowance, Principal
from sluice.exchange.metrics import Metrics
from sluice.exchange.refusals import RepeatLog, Tarpit
from sluice.exchange.tasks import Tasks
from sluice.exchange.telemetry import NO_TELEMETRY, Telemetry
from sluice.exchange.tenants import Tenants
from sluice.guardrails.selection import Guardrails
from sluice.limits.base import Limiter
from sluice.limits.decision import Subject
from sluice.metering.meter import Meter
from sluice.routing.router import Router
from sluice.storage.writer import WriteBehind


class Services:
    __slots__ = (
        "answers",
        "clock",
        "flights",
        "guardrails",
        "keepalive_interval",
        "limiter",
        "limits",
        "log",
        "max_json_depth",
        "meter",
        "metrics",
        "repeats",
        "router",
        "tarpit",
        "tasks",
        "telemetry",
        "tenants",
        "vectors",
    )

    def __init__(
        self,
        *,
        router: Router,
        tenants: Tenants,
        meter: Meter,
        log: WriteBehind,
        limiter: Limiter,
        limits: LimitsConfig,
        guardrails: Guardrails,
        metrics: Metrics,
        tasks: Tasks,
        repeats: RepeatLog,
        tarpit: Tarpit,
        clock: Callable[[], float],
        keepalive_interval: float,
        max_json_depth: int,
        telemetry: Telemetry = NO_TELEMETRY,
        answers: AnswerStore | None = None,
        flights: Flights | None = None,
        vectors: VectorIndex | None = None,
    ) -> None:
        self.router = router
        self.tenants = tenants
        self.meter = meter
        self.log = log
        self.limiter = limiter
        self.limits = limits
        self.guardrails = guardrails
        self.metrics = metrics
        self.tasks = tasks
        self.repeats = repeats
        """Where a refusal before any upstream call is logged (coalesced per key)."""
        self.tarpit = tarpit
        """How long a refusal of a key that keeps being refused is held."""
        self.clock = clock
        self.keepalive_interval = keepalive_interval
        self.max_json_depth = max_json_depth
        self.telemetry = telemetry
        """Tracing (``[telemetry]``): the gateway's, or the no-op when it is off."""
        self.answers = answers if answers is not None else AnswerStore.in_memory(0, 1024, clock)
        """The response cache's store (docs/cache.md), the process's."""
        self.flights = flights if flights is not None else Flights(clock)
        """Cacheable misses streaming now, joined by identical requests."""
        self.vectors = vectors if vectors is not None else VectorIndex(0)
        """The semantic cache's vectors of the kept answers (docs/cache.md), the process's."""

    def limit_subject(self, principal: Principal) -> Subject | None:
        """The limits that apply to a caller; None when none do (no limiter call)."""
        limits = self.limits
        key = _own(principal.policy) or limits.keys.get(principal.key_prefix, limits.key)
        account = _own(principal.account_policy) or limits.accounts.get(
            principal.account_name, limits.account
        )
        if key is None and account is None:
            return None
        return Subject(principal.key_id, principal.account_id, key=key, account=account)


def _own(allowance: Allowance) -> LimitSpec | None:
    """A key's or an account's own per-minute limits (over the config file's), if set."""
    if allowance.rpm is None and allowance.tpm is None:
        return None
    return LimitSpec(requests=allowance.rpm, tokens=allowance.tpm, window=60.0)
