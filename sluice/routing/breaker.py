"""Circuit breakers per (connection, model) (pure: the caller passes the time): one
model failing at a provider (overloaded, withdrawn, rate-limited on its own quota)
no longer cools every model of its connection.

closed → after ``threshold`` failures in a row → open for ``cooldown`` seconds (skipped)
→ half-open: exactly one request is let through as a probe → its success closes the
circuit, its failure opens it again. A 429's ``Retry-After`` opens the circuit at once
for that long (capped), whatever the count. Only failures that allow failover count
(a 400 is the request's fault, not the connection's).
"""

from __future__ import annotations

import enum
from collections.abc import Callable

Circuit = tuple[str, str]
"""A circuit's key: the connection's id and the catalog id of the model it serves."""


class State(enum.Enum):
    CLOSED = "closed"
    OPEN = "open"
    HALF_OPEN = "half_open"


class _Circuit:
    __slots__ = ("failures", "open_until", "probing", "state")

    def __init__(self) -> None:
        self.state = State.CLOSED
        self.failures = 0
        self.open_until = 0.0
        self.probing = False


class Breaker:
    def __init__(self, threshold: int, cooldown: float, max_retry_after: float) -> None:
        self._threshold = threshold
        self._cooldown = cooldown
        self._max_retry_after = max_retry_after
        self._circuits: dict[Circuit, _Circuit] = {}
        self.on_open: Callable[[Circuit, float], None] | None = None
        """Told when a failure opens a circuit, and for how long (sharing it)."""

    def _circuit(self, key: Circuit) -> _Circuit:
        circuit = self._circuits.get(key)
        if circuit is None:
            circuit = self._circuits[key] = _Circuit()
        return circuit

    def allow(self, key: Circuit, now: float) -> bool:
        """May a request go to this connection now? (Claims the probe when half-open.)"""
        circuit = self._circuits.get(key)
        if circuit is None or circuit.state is State.CLOSED:
            return True
        if circuit.state is State.OPEN:
            if now < circuit.open_until:
                return False
            circuit.state = State.HALF_OPEN
            circuit.probing = False
        if circuit.probing:
            return False
        circuit.probing = True
        return True

    def release(self, key: Circuit) -> None:
        """A claimed attempt ended with no verdict on the connection (e.g. cancelled)."""
        circuit = self._circuits.get(key)
        if circuit is not None:
            circuit.probing = False

    def success(self, key: Circuit) -> None:
        circuit = self._circuits.get(key)
        if circuit is not None:
            circuit.state = State.CLOSED
            circuit.failures = 0
            circuit.probing = False

    def failure(self, key: Circuit, now: float, retry_after: float | None = None) -> float:
        """Count a failure; the seconds the circuit now stays open for (0: still closed)."""
        circuit = self._circuit(key)
        circuit.failures += 1
        circuit.probing = False
        wait = None
        if retry_after is not None and retry_after > 0:
            wait = min(retry_after, self._max_retry_after)
        elif circuit.state is State.HALF_OPEN or circuit.failures >= self._threshold:
            wait = self._cooldown
        if wait is None:
            return 0.0
        circuit.state = State.OPEN
        circuit.open_until = max(circuit.open_until, now + wait)
        if self.on_open is not None:
            self.on_open(key, circuit.open_until - now)
        return circuit.open_until - now

    def open_for(self, key: Circuit, now: float, seconds: float) -> None:
        """Another process opened this circuit for ``seconds``: skip it here too."""
        circuit = self._circuit(key)
        circuit.state = State.OPEN
        circuit.probing = False
        circuit.open_until = max(circuit.open_until, now + seconds)

    def state(self, key: Circuit, now: float) -> State:
        circuit = self._circuits.get(key)
        if circuit is None:
            return State.CLOSED
        if circuit.state is State.OPEN and now >= circuit.open_until:
            return State.HALF_OPEN
        return circuit.state

    def reopens_in(self, key: Circuit, now: float) -> float:
        circuit = self._circuits.get(key)
        if circuit is None or circuit.state is not State.OPEN:
            return 0.0
        return max(0.0, circuit.open_until - now)

    def states(self, now: float) -> dict[Circuit, State]:
        """Every circuit that has had a failure, and its state now (for metrics)."""
        return {key: self.state(key, now) for key in self._circuits}

    def connection_state(self, connection: str, now: float) -> State:
        """The worst state of the connection's circuits (open over half-open over closed)."""
        worst = State.CLOSED
        for key in self._circuits:
            if key[0] == connection:
                state = self.state(key, now)
                if _SEVERITY.index(state) > _SEVERITY.index(worst):
                    worst = state
        return worst


_SEVERITY = (State.CLOSED, State.HALF_OPEN, State.OPEN)
"""States from the best to the worst."""
