"""Regular-expression rules, and how far each can reach (the stream's hold-back window).

The reach of a pattern comes from its parse tree (``sre_parse``): the longest match,
plus the longest lookahead (it reads past the match), plus 2 characters so that ``$``
and ``\\b`` at the end of a match are decided by real text, never by where the text
received so far happens to stop. Lookbehinds (and ``\\b`` at the start) read before the
match: that is the rule's ``context``. A rule whose answer at a start ``q`` depends
only on ``text[q - context : q + hold_back + 1]`` gives the same result on a stream,
whatever its split, as on the whole text.

A pattern without a finite longest match (``+``, ``*``, ``{20,}``) is matched within
a window instead: a match may be at most ``hold_back + 1`` characters long (default
:data:`DEFAULT_UNBOUNDED_HOLD_BACK`), longer ones are cut there. ``hold_back`` set
below the derived value does the same to a bounded pattern (less delay, long matches
cut). Either way the result still does not depend on how the stream was split.

One common shape needs far less: a bounded part, then an unbounded repeat of a
bounded item, nothing after it and no lookahead (``sk-[A-Za-z0-9]{20,}``). It has a
match exactly where its shortest form (``sk-`` and 20 characters) has one, so for
``block`` and ``log``, which only need to know that there is a match, the window of
the shortest form decides exactly (24 characters instead of 256).
"""

from __future__ import annotations

import re
import warnings
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, NamedTuple, cast

from sluice.config import Action, GuardrailConfig
from sluice.errors import ConfigError

if TYPE_CHECKING:
    from sre_parse import SubPattern

DEFAULT_UNBOUNDED_HOLD_BACK = 256
_END_MARGIN = 2  # ``$`` matches before a final newline: it needs two characters of look


class Reach(NamedTuple):
    """In characters, from a match start: ``ahead`` may be None (unbounded)."""

    min_width: int
    ahead: int | None
    behind: int
    shortest: int | None = None
    """Unbounded patterns of the shape above: the reach of their shortest form."""


def pattern_reach(pattern: re.Pattern[str]) -> Reach:
    with warnings.catch_warnings():  # the parser is public only under its deprecated name
        warnings.simplefilter("ignore", DeprecationWarning)
        import sre_parse
    tree = sre_parse.parse(pattern.pattern, pattern.flags)
    lookarounds = frozenset({sre_parse.ASSERT, sre_parse.ASSERT_NOT})
    ahead = _ahead(tree, lookarounds)
    if ahead < sre_parse.MAXREPEAT:
        return Reach(tree.getwidth()[0], ahead, _behind(tree, lookarounds))
    shortest = None
    repeats = (sre_parse.MAX_REPEAT, sre_parse.MIN_REPEAT, sre_parse.POSSESSIVE_REPEAT)
    if tree.data and tree.data[-1][0] in repeats:
        least, _, item = cast("tuple[int, int, SubPattern]", tree.data[-1][1])
        head = _ahead(sre_parse.SubPattern(tree.state, tree.data[:-1]), lookarounds)
        unit = _ahead(item, lookarounds)
        if head < sre_parse.MAXREPEAT and unit == item.getwidth()[1] < sre_parse.MAXREPEAT:
            shortest = head + least * unit
    return Reach(tree.getwidth()[0], None, _behind(tree, lookarounds), shortest)


def _ahead(tree: SubPattern, lookarounds: frozenset[object]) -> int:
    subs = _lookarounds(tree, lookarounds)
    return tree.getwidth()[1] + max((_ahead(s, lookarounds) for d, s in subs if d > 0), default=0)


def _behind(tree: SubPattern, lookarounds: frozenset[object]) -> int:
    subs = _lookarounds(tree, lookarounds)
    return max((s.getwidth()[1] + _behind(s, lookarounds) for d, s in subs if d < 0), default=0)


def _lookarounds(
    tree: SubPattern, lookarounds: frozenset[object]
) -> Iterator[tuple[int, SubPattern]]:
    """(direction, subpattern) of every lookaround, outermost ones only."""
    stack: list[object] = [tree]
    while stack:
        node = stack.pop()
        data = getattr(node, "data", None)
        if isinstance(data, list):  # a SubPattern
            for op, av in data:
                if op in lookarounds:
                    yield av
                else:
                    stack.append(av)
        elif isinstance(node, list | tuple):
            stack.extend(node)


class PatternRule:
    """A span rule from one compiled pattern, optionally with a check of each match
    (a card number's Luhn digit); a rejected candidate is skipped."""

    __slots__ = (
        "_accept",
        "_exact",
        "_match",
        "_search",
        "_window",
        "action",
        "context",
        "hold_back",
        "name",
        "replacement",
    )

    def __init__(
        self,
        name: str,
        action: Action,
        pattern: re.Pattern[str],
        *,
        replacement: str = "[REDACTED]",
        hold_back: int | None = None,
        accept: Callable[[str], bool] | None = None,
    ) -> None:
        reach = pattern_reach(pattern)
        if reach.min_width == 0:
            raise ConfigError(f"guardrail {name!r}: the pattern can match empty text")
        needed = None if reach.ahead is None else reach.ahead + _END_MARGIN
        if hold_back is not None:
            window = hold_back + 1
        elif needed is not None:
            window = needed
        elif reach.shortest is not None and action != "redact":
            window = reach.shortest + _END_MARGIN
        else:
            window = DEFAULT_UNBOUNDED_HOLD_BACK + 1
        self.name, self.action, self.replacement = name, action, replacement
        self.hold_back = window - 1
        self.context = reach.behind + 1  # one more for ``\b`` at the start
        self._window = window
        self._exact = needed is not None and window >= needed
        self._search, self._match, self._accept = pattern.search, pattern.match, accept

    def find(self, text: str, pos: int, end: int) -> tuple[int, int] | None:
        search, match, accept = self._search, self._match, self._accept
        while (found := search(text, pos, end)) is not None:
            start = found.start()
            if not self._exact:  # the match as seen within its window
                found = match(text, start, min(start + self._window, end))
            if found is not None and (accept is None or accept(found.group())):
                return start, found.end()
            pos = start + 1
        return None


def configured_rule(conf: GuardrailConfig, pattern: str) -> PatternRule:
    """The rule of a ``regex`` or ``keywords`` table, from the pattern it comes to."""
    try:
        compiled = re.compile(pattern, re.IGNORECASE if conf.case_insensitive else 0)
    except re.error as exc:
        raise ConfigError(f"guardrail {conf.name!r}: invalid pattern: {exc}") from None
    return PatternRule(
        conf.name, conf.action, compiled, replacement=conf.replacement, hold_back=conf.hold_back
    )


def regex_rule(conf: GuardrailConfig) -> PatternRule:
    if not conf.pattern:
        raise ConfigError(f"guardrail {conf.name!r}: kind 'regex' needs a `pattern`")
    return configured_rule(conf, conf.pattern)
