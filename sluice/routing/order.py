"""The order a plan's attempts are tried in (pure: the random source is passed in).

Positions keep the plan's order. Within one position, the connections of a weighted
model are drawn by weight (:func:`sluice.routing.policy.weighted_order`) for every call,
a fastest model's are tried soonest expected end first (:class:`sluice.routing.speeds.Speeds`); any
other model's connections keep their configured order.
"""

from __future__ import annotations

from collections.abc import Sequence
from random import Random

from sluice.routing.plan import Attempt, Plan
from sluice.routing.policy import weighted_order
from sluice.routing.speeds import Speeds


def ordered_attempts(
    plan: Plan, rng: Random, speeds: Speeds, ceiling: int | None = None
) -> Sequence[Attempt]:
    """The plan's attempts, connections of a weighted model drawn by weight, of a
    fastest model soonest expected end first (for at most ``ceiling`` output tokens)."""
    if not any(a.model.weighted or a.model.fastest for a in plan.attempts):
        return plan.attempts
    out: list[Attempt] = []
    for group in _groups(plan.attempts):
        if len(group) > 1 and group[0].model.weighted:
            weights = [a.target.connection.weight for a in group]
            out.extend(weighted_order(group, weights, rng))
        elif len(group) > 1 and group[0].model.fastest:
            circuits = [(a.target.connection.id, a.target.model_id) for a in group]
            out.extend(speeds.fastest_first(group, circuits, rng, ceiling))
        else:
            out.extend(group)
    return out


def _groups(attempts: tuple[Attempt, ...]) -> list[list[Attempt]]:
    """Attempts grouped by position, in plan order."""
    groups: list[list[Attempt]] = []
    for attempt in attempts:
        if groups and groups[-1][0].position == attempt.position:
            groups[-1].append(attempt)
        else:
            groups.append([attempt])
    return groups
