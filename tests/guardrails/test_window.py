"""The hold-back window: any split of a text gives what checking the whole text gives."""

from __future__ import annotations

import itertools
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sluice.guardrails.pii import luhn_valid
from sluice.guardrails.rule import Rule
from sluice.guardrails.window import Channel
from tests.guardrails.oracle import Spec, whole_text

# Bounded patterns (the derived window is exact) and cut ones (a smaller hold_back, or
# no finite longest match): anchors, word edges and lookarounds on both sides.
PATTERNS: list[tuple[str, int | None]] = [
    (r"ab{1,3}a", None),
    (r"sk-[0-9]{3,6}", None),
    (r"\bab\b", None),
    (r"(?<=a)bb", None),
    (r"b(?=a-)", None),
    (r"(?<!s)k-", None),
    (r"a$", None),
    (r"^ab", None),
    (r"(?m)^s", None),
    (r"(?i)AB-", None),
    (r"(?:[0-9][ -]?){3,5}[0-9]", None),
    (r"sk-[0-9]{3,}", None),
    (r"sk-[0-9]{3,}", 6),
    (r"a[ab]*b", 4),
    (r"sk-[0-9]{3,6}", 3),
]
ALPHABET = "ab-sk0123 \n"


@st.composite
def splits(draw: st.DrawFn, text: str) -> list[str]:
    cuts = sorted(draw(st.sets(st.integers(0, len(text)), max_size=len(text) + 1)))
    bounds = [0, *cuts, len(text)]
    return [text[a:b] for a, b in itertools.pairwise(bounds)]


@st.composite
def cases(draw: st.DrawFn) -> tuple[str, list[Spec], list[str]]:
    text = draw(st.text(ALPHABET, max_size=80))
    chosen = draw(st.lists(st.sampled_from(PATTERNS), min_size=1, max_size=3))
    specs = [
        Spec(
            f"r{i}",
            draw(st.sampled_from(["block", "redact", "log"])),
            pattern,
            hold_back=hold_back,
            accept=draw(st.sampled_from([None, luhn_valid])),
        )
        for i, (pattern, hold_back) in enumerate(chosen)
    ]
    return text, specs, draw(splits(text))


def stream(specs: list[Spec], pieces: list[str]) -> tuple[str, list[str], bool]:
    channel = Channel([s.rule for s in specs])
    hits: list[Rule] = []
    out = [channel.feed(piece, False, hits) for piece in pieces]
    out.append(channel.feed("", True, hits))
    blocked = bool(hits) and hits[-1].action == "block"
    return "".join(out), [h.name for h in hits], blocked


@settings(max_examples=600, deadline=None)
@given(cases())
def test_any_split_gives_the_whole_text_result(case: tuple[str, list[Spec], list[str]]) -> None:
    text, specs, pieces = case
    assert stream(specs, pieces) == whole_text(text, specs)


@settings(max_examples=300, deadline=None)
@given(st.text(ALPHABET, max_size=80), st.data())
def test_bounded_redaction_is_re_sub_and_block_is_re_search(text: str, data: st.DataObject) -> None:
    pattern = data.draw(st.sampled_from([p for p, hold in PATTERNS if hold is None]))
    pieces = data.draw(splits(text))
    redact = stream([Spec("r", "redact", pattern)], pieces)
    assert redact[0] == re.sub(pattern, "[REDACTED]", text)
    visible, _, blocked = stream([Spec("b", "block", pattern)], pieces)
    found = re.search(pattern, text)
    assert blocked == (found is not None)
    assert visible == (text if found is None else text[: found.start()])


@settings(max_examples=300, deadline=None)
@given(st.text(ALPHABET, max_size=80), st.data())
def test_an_unbounded_tail_blocks_exactly_where_the_whole_text_matches(
    text: str, data: st.DataObject
) -> None:
    pattern = data.draw(st.sampled_from([r"sk-[0-9]{3,}", r"(?<!s)k-[0-9ab]{2,}", r"a(?:b|-)+"]))
    spec = Spec("b", "block", pattern)
    assert spec.rule.hold_back < 10  # the shortest form's window, not the default
    visible, _, blocked = stream([spec], data.draw(splits(text)))
    found = re.search(pattern, text)
    assert blocked == (found is not None)
    assert visible == (text if found is None else text[: found.start()])


def test_text_goes_out_once_no_match_can_start_in_it() -> None:
    spec = Spec("key", "redact", r"sk-[0-9]{4}")  # 7 long: 8 characters held back
    assert spec.rule.hold_back == 8
    hits: list[Rule] = []
    channel = Channel([spec.rule])
    assert channel.feed("hello there, ", False, hits) == "hello"
    assert channel.feed("sk-12", False, hits) == " ther"
    assert channel.feed("34 and more text", False, hits) == "e, [REDACTED] and m"
    assert channel.feed("", True, hits) == "ore text"
    assert [h.name for h in hits] == ["key"]


def test_a_match_spanning_three_pieces_is_caught() -> None:
    spec = Spec("key", "block", r"sk-[A-Za-z0-9]{20}")
    hits: list[Rule] = []
    channel = Channel([spec.rule])
    released = [
        channel.feed(p, False, hits) for p in ["Here: sk-ab", "cdefghij", "klmnopqrst and then"]
    ]
    assert "".join(released) == "Here: "
    assert [h.name for h in hits] == ["key"] and channel.closed
    assert channel.feed("more", False, hits) == ""
    assert channel.feed("", True, hits) == ""


def test_a_whole_text_block_rule_holds_everything_until_the_end() -> None:
    class NotJson:
        name, action = "json", "block"

        def accepts(self, text: str) -> bool:
            return text.startswith("{")

    hits: list[Rule] = []

    channel = Channel([], [NotJson()])  # type: ignore[list-item]
    assert channel.feed('{"a": ', False, hits) == ""
    assert channel.feed("1}", True, hits) == '{"a": 1}'
    refused: list[Rule] = []
    channel = Channel([], [NotJson()])  # type: ignore[list-item]
    assert channel.feed("nope", False, refused) == ""
    assert channel.feed("", True, refused) == "" and [r.name for r in refused] == ["json"]


@pytest.mark.parametrize(
    ("pattern", "action", "held"),
    [
        (r"abc", "redact", 4),
        (r"a(?=bcd)", "redact", 5),
        (r"foo$", "redact", 4),
        (r"x{2,5}\b", "redact", 6),
        (r"sk-[a-z]{20,}", "redact", 256),
        (r"sk-[a-z]{20,}", "block", 24),
        (r"sk-[a-z]{20,}", "log", 24),
        (r"a.*b", "block", 256),
        (r"(?:sk-[a-z]{20,})", "block", 24),
    ],
    ids=[
        "literal",
        "lookahead",
        "dollar",
        "boundary",
        "unbounded-redact",
        "unbounded-tail-block",
        "unbounded-tail-log",
        "unbounded-middle",
        "non-capturing-group",
    ],
)
def test_hold_back_is_the_longest_reach_plus_margin(pattern: str, action: str, held: int) -> None:
    assert Spec("r", action, pattern).rule.hold_back == held
