"""Request, hold and tool-call ids: a prefix and 22 base62 characters from the OS."""

from __future__ import annotations

import re
import string
from collections import Counter

from sluice.ids import random_id


def test_ids_have_the_prefix_and_22_base62_characters() -> None:
    ids = [random_id("req") for _ in range(20_000)]
    assert all(re.fullmatch(r"req_[0-9A-Za-z]{22}", i) for i in ids)
    assert len(set(ids)) == len(ids)


def test_every_digit_is_drawn_and_none_dominates() -> None:
    counts = Counter("".join(random_id("x")[2:] for _ in range(20_000)))
    assert set(counts) == set(string.digits + string.ascii_uppercase + string.ascii_lowercase)
    expected = 20_000 * 22 / 62
    # 8 digits are 5/4 as likely as the others (256 = 4 * 62 + 8): within [0.8, 1.5]
    assert all(0.8 * expected < n < 1.5 * expected for n in counts.values())
