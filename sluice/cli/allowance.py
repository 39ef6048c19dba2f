"""The options a key and an account share on the command line (its own per-minute
limits, a budget, metadata), and the changes they make (``none`` clears a value)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar, cast

import click
import msgspec
from msgspec import UNSET

from sluice.core.principal import BudgetPeriod

_Changes = TypeVar("_Changes", bound=msgspec.Struct)


def checked(kind: type[_Changes], fields: dict[str, Any]) -> _Changes:
    """``fields`` as ``kind``, checked as the admin API checks a body (lengths, patterns,
    ranges), so the command line stores nothing the API would refuse."""
    try:
        return msgspec.convert({k: v for k, v in fields.items() if v is not UNSET}, kind)
    except msgspec.ValidationError as exc:
        raise click.BadParameter(str(exc)) from None


def allowance_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """``--rpm --tpm --meta --budget --budget-period`` on ``command``."""
    for option in reversed(
        [
            click.option("--rpm", default=None, help="Requests per minute."),
            click.option("--tpm", default=None, help="Tokens per minute."),
            click.option("--meta", multiple=True, help="Metadata KEY=VALUE (repeatable)."),
            click.option("--budget", default=None, help="USD it may spend per period."),
            click.option(
                "--budget-period",
                type=click.Choice(["daily", "weekly", "monthly", "never"]),
                default=None,
                help="When the budget starts again (UTC) [never].",
            ),
        ]
    ):
        command = option(command)
    return command


def given(value: str | None) -> Any:
    """An option left out keeps the value (``UNSET``); ``none`` clears it."""
    return UNSET if value is None else (None if value == "none" else value)


def _count(value: str | None, name: str) -> Any:
    value = given(value)
    if isinstance(value, str):
        if not value.isdigit() or int(value) < 1:
            raise click.BadParameter(f"{name} must be a whole number of at least 1")
        return int(value)
    return value


def allowance_changes(
    *,
    rpm: str | None,
    tpm: str | None,
    meta: tuple[str, ...],
    budget: str | None,
    budget_period: str | None,
) -> dict[str, Any]:
    """The fields of an :class:`~sluice.accounts.policy.AllowanceChanges` these options
    give."""
    metadata: Any = UNSET
    if meta:
        pairs = [m.partition("=") for m in meta]
        if any(not sep or not k for k, sep, _ in pairs):
            raise click.BadParameter("--meta takes KEY=VALUE")
        metadata = {k: v for k, _, v in pairs}
    return {
        "rpm": _count(rpm, "--rpm"),
        "tpm": _count(tpm, "--tpm"),
        "metadata": metadata,
        "budget": given(budget),
        "budget_period": UNSET if budget_period is None else cast(BudgetPeriod, budget_period),
    }
