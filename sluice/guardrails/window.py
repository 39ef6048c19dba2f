"""The hold-back window over one text channel (a choice's content, a tool call's
arguments, …): text goes out once no match can start inside it any more.

With ``hold`` the largest ``hold_back`` of the rules, a position ``q`` of a text
received up to ``end`` is decided once ``q + hold < end`` (each rule's answer at ``q``
reads at most ``text[q - context : q + hold_back + 1]``), or when the channel ends.
Decided text is scanned as the whole text would be: at each step the earliest match
of any rule (the first rule on a tie) is taken, its action applied, and the scan goes
on after it. So the released text and the matches do not depend on how the text was
split (the property tests feed every split). A ``block`` match releases the text
before it and ends the channel. A whole-text rule with action ``block`` holds the
channel until its end.
"""

from __future__ import annotations

from collections.abc import Sequence

from sluice.guardrails.rule import Rule, SpanRule, WholeRule


class Channel:
    __slots__ = ("_context", "_hold", "_pos", "_rules", "_text", "_whole", "_wholes", "closed")

    def __init__(self, rules: Sequence[SpanRule], wholes: Sequence[WholeRule] = ()) -> None:
        self._rules = rules
        self._wholes = wholes
        self._hold: int | None = max((r.hold_back for r in rules), default=0)
        if any(w.action == "block" for w in wholes):
            self._hold = None  # until the end
        self._context = max((r.context for r in rules), default=0)
        self._text = ""  # received text from ``context`` characters before ``_pos``
        self._pos = 0  # where the undecided text starts in ``_text``
        self._whole: list[str] | None = [] if wholes else None  # the full text, for wholes
        self.closed = False

    def feed(self, piece: str, final: bool, hits: list[Rule]) -> str:
        """Take ``piece`` (``final``: nothing follows); return the text now released.

        Every rule that matched is appended to ``hits``; after a ``block`` one (the last
        hit) the channel is closed and releases nothing more.
        """
        if self.closed:
            return ""
        if self._whole is not None:
            self._whole.append(piece)
        text = self._text + piece if piece else self._text
        end = len(text)
        if final:
            self.closed = True
            if self._whole is not None and self._judge("".join(self._whole), hits):
                return ""
        limit = end if final else (self._pos if self._hold is None else end - self._hold)
        pos = self._pos
        out: list[str] = []
        while pos < limit:
            best: tuple[int, int, SpanRule] | None = None
            for rule in self._rules:
                found = rule.find(text, pos, end)
                if found is not None and found[0] < limit and (best is None or found[0] < best[0]):
                    best = (found[0], found[1], rule)
            if best is None:
                break
            start, stop, rule = best
            out.append(text[pos:start])
            hits.append(rule)
            if rule.action == "block":
                self.closed = True
                return "".join(out)
            out.append(rule.replacement if rule.action == "redact" else text[start:stop])
            pos = stop
        if pos < limit:
            out.append(text[pos:limit])
            pos = limit
        drop = pos - self._context
        if drop > 0:
            text, pos = text[drop:], pos - drop
        self._text, self._pos = text, pos
        return "".join(out)

    def _judge(self, whole: str, hits: list[Rule]) -> bool:
        """Run the whole-text rules; True when one blocked."""
        for rule in self._wholes:
            if not rule.accepts(whole):
                hits.append(rule)
                if rule.action == "block":
                    return True
        return False
