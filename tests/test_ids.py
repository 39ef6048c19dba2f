"""Request, hold and tool-call ids: a prefix, 8 base62 digits of the clock, 14 from the OS."""

from __future__ import annotations

import re
import string
import time
from collections import Counter

from sluice.ids import TIME_DIGITS, ordered_id


def test_ids_have_the_prefix_and_22_base62_characters() -> None:
    ids = [ordered_id("req") for _ in range(20_000)]
    assert all(re.fullmatch(r"req_[0-9A-Za-z]{22}", i) for i in ids)
    assert len(set(ids)) == len(ids)


def test_every_random_digit_is_drawn_and_none_dominates() -> None:
    tails = "".join(ordered_id("x")[2 + TIME_DIGITS :] for _ in range(20_000))
    counts = Counter(tails)
    assert set(counts) == set(string.digits + string.ascii_uppercase + string.ascii_lowercase)
    expected = len(tails) / 62
    # 8 digits are 5/4 as likely as the others (256 = 4 * 62 + 8): within [0.8, 1.5]
    assert all(0.8 * expected < n < 1.5 * expected for n in counts.values())


def test_an_id_made_later_sorts_later_and_its_head_is_the_clock() -> None:
    alphabet = string.digits + string.ascii_uppercase + string.ascii_lowercase
    before = time.time_ns() // 1_000_000
    ids = []
    for _ in range(5):
        ids.append(ordered_id("req"))
        time.sleep(0.002)
    after = time.time_ns() // 1_000_000
    assert ids == sorted(ids) and len(set(ids)) == 5
    for one in ids:
        ms = 0
        for digit in one[4 : 4 + TIME_DIGITS]:
            ms = ms * 62 + alphabet.index(digit)
        assert before <= ms <= after
