"""The whole-text reference the streaming guard must agree with, written from the
definition (every start tried in turn), not from the guard's search."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

from sluice.guardrails.regex import PatternRule


class Spec:
    """A rule as the test builds it: the guard's rule and what the oracle needs."""

    def __init__(
        self,
        name: str,
        action: str,
        pattern: str,
        *,
        hold_back: int | None = None,
        accept: Callable[[str], bool] | None = None,
    ) -> None:
        self.compiled = re.compile(pattern)
        self.accept = accept
        self.rule = PatternRule(
            name,
            action,  # type: ignore[arg-type]
            self.compiled,
            hold_back=hold_back,
            accept=accept,
        )

    def match_at(self, text: str, q: int) -> int | None:
        """Where a match starting at ``q`` ends, as seen within the rule's window."""
        m = self.compiled.match(text, q, min(q + self.rule.hold_back + 1, len(text)))
        if m is None or (self.accept is not None and not self.accept(m.group())):
            return None
        return m.end()


def whole_text(text: str, specs: Sequence[Spec]) -> tuple[str, list[str], bool]:
    """(client-visible text, names of the rules that matched in order, blocked)."""
    out: list[str] = []
    hits: list[str] = []
    pos = q = 0
    while q < len(text):
        for spec in specs:
            end = spec.match_at(text, q)
            if end is not None:
                break
        else:
            q += 1
            continue
        out.append(text[pos:q])
        hits.append(spec.rule.name)
        if spec.rule.action == "block":
            return "".join(out), hits, True
        out.append(spec.rule.replacement if spec.rule.action == "redact" else text[q:end])
        pos = q = end
    out.append(text[pos:])
    return "".join(out), hits, False
