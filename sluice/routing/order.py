"""The order a plan's attempts are tried in (pure: the random source is passed in).

Positions keep the plan's order. Within one position, the connections of a weighted
model are drawn by weight (:func:`sluice.routing.policy.weighted_order`) for every call;
any other model's connections keep their configured order.
"""

from __future__ import annotations

from collections.abc import Sequence
from random import Random

from sluice.routing.plan import Attempt, Plan
from sluice.routing.policy import weighted_order


def ordered_attempts(plan: Plan, rng: Random) -> Sequence[Attempt]:
    """The plan's attempts, connections of a weighted model drawn by weight."""
    if not any(a.model.weighted for a in plan.attempts):
        return plan.attempts
    out: list[Attempt] = []
    for group in _groups(plan.attempts):
        if len(group) > 1 and group[0].model.weighted:
            weights = [a.target.connection.weight for a in group]
            out.extend(weighted_order(group, weights, rng))
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
