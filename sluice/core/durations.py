"""Durations written as text in the config: ``"30d"``, ``"12h"``."""

from __future__ import annotations

import re

_DURATION = re.compile(r"([0-9]{1,9})([smhdw])|0")
_UNITS = "smhdw"
_UNIT_SECONDS = (1, 60, 3600, 86_400, 604_800)


def duration_seconds(text: str) -> int:
    """``"30d"``, ``"12h"``, ``"90m"``, ``"3600s"``, ``"2w"`` (a whole number and one
    unit) in seconds; ``"0"`` is 0. ValueError for anything else."""
    found = _DURATION.fullmatch(text)
    if found is None:
        raise ValueError(text)
    return 0 if found[1] is None else int(found[1]) * _UNIT_SECONDS[_UNITS.index(found[2])]
