"""``[storage]``: the request log's retention is a duration the config checks, and a
config nested too deeply for the TOML parser is refused like any bad config (issue 20)."""

from __future__ import annotations

import pytest

from sluice.config import StorageConfig, parse_config
from sluice.core.durations import duration_seconds
from sluice.errors import ConfigError


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("30d", 30 * 86_400), ("12h", 43_200), ("90m", 5400), ("3600s", 3600), ("2w", 1_209_600)],
)
def test_a_retention_is_a_number_and_a_unit(text: str, seconds: int) -> None:
    config = parse_config(f'[storage]\nrequest_log_retention = "{text}"\n')
    assert duration_seconds(text) == seconds == config.storage.request_log_retention_seconds


@pytest.mark.parametrize("text", ["0", "0d", "0s"])
def test_a_zero_retention_keeps_every_row(text: str) -> None:
    config = parse_config(f'[storage]\nrequest_log_retention = "{text}"\n')
    assert config.storage.request_log_retention_seconds is None


def test_by_default_rows_are_kept_thirty_days_and_not_bounded_in_number() -> None:
    assert StorageConfig().request_log_retention_seconds == 30 * 86_400
    assert StorageConfig().request_log_max_rows is None


@pytest.mark.parametrize(
    "value",
    ['"30"', '"30 d"', '"d"', '"-1d"', '"1.5h"', '"30D"', '"1y"', '""', '"9999999999d"', "30"],
)
def test_a_bad_retention_is_refused_naming_the_key(value: str) -> None:
    with pytest.raises(ConfigError, match="request_log_retention") as info:
        parse_config(f"[storage]\nrequest_log_retention = {value}\n", "sluice.toml")
    assert str(info.value).startswith("sluice.toml: ")


def test_max_rows_must_be_positive() -> None:
    with pytest.raises(ConfigError, match="request_log_max_rows"):
        parse_config("[storage]\nrequest_log_max_rows = 0\n")


@pytest.mark.parametrize(
    "toml",
    [
        "[server]\ncors_origins = " + "[" * 10_000 + "]" * 10_000 + "\n",
        "x = " + "{ a = " * 10_000 + "1" + " }" * 10_000 + "\n",
    ],
    ids=["arrays", "inline-tables"],
)
def test_a_config_nested_ten_thousand_deep_is_a_config_error(toml: str) -> None:
    with pytest.raises(ConfigError, match="nested too deeply") as info:
        parse_config(toml, "deep.toml")
    assert str(info.value).startswith("deep.toml: ")
