"""sluice/metering/charges.py as tables: which rate applies, what a usage is charged, how
amounts round, and what a request holds (docs/metering.md). Every expected value is
worked out by hand from the prices below, never computed by the code under test."""

from __future__ import annotations

import math

import msgspec
import pytest

from sluice.core.connection import ConnectionSettings
from sluice.core.demand import chat_demand
from sluice.core.money import nano_from_usd_text, usd_from_nano
from sluice.core.usage import MAX_REPORTED_COST_USD, MAX_REPORTED_TOKENS, Price, TokenUsage
from sluice.metering.charges import (
    DEFAULT_OUTPUT_CEILING,
    Rate,
    as_priced,
    charge,
    hold_amount,
    nano_from_pico,
    nano_from_usd,
    resolve_rate,
)
from sluice.metering.meter import Ticket
from sluice.routing.catalog import CatalogModel
from sluice.wire.chat import ChatRequest

# pico-USD per token: input, output (cache rates default to input unless given)
LIST = Price.per_million(1.0, 2.0)  # 1_000_000 / 2_000_000
SONNET = Price.per_million(3.0, 15.0, cache_read=0.3, cache_write=3.75)
CONN = Price.per_million(5.0, 10.0)
ACCOUNT = Price.per_million(7.0, 14.0)
ONE_PICO = Price(input=1, output=1, cache_read=1, cache_write=1)

OPERATORS = Rate(SONNET, "list")
TENANTS = Rate(SONNET, "list", honours_provider_cost=False)
UNPRICED = Rate(None, "list")
UNPRICED_TENANTS = Rate(None, "list", honours_provider_cost=False)


def model(price: Price | None = LIST, max_output: int | None = None, id: str = "m") -> CatalogModel:
    return CatalogModel(id, {}, None, price, (), max_output, "x")


def connection(
    prices: dict[str, Price] | None = None, owner: str | None = None
) -> ConnectionSettings:
    return ConnectionSettings(
        id="conn_x", provider="demo", base_url="demo://local", prices=prices or {}, owner=owner
    )


@pytest.mark.parametrize(
    ("catalog", "conn", "account_prices", "expected"),
    [
        (model(), connection({"m": CONN}), {"m": ACCOUNT}, Rate(CONN, "custom_provider")),
        (model(None), connection({"m": CONN}), {}, Rate(CONN, "custom_provider")),
        (model(), connection(), {"m": ACCOUNT}, Rate(ACCOUNT, "custom")),
        (model(), connection({"other": CONN}), {"m": ACCOUNT}, Rate(ACCOUNT, "custom")),
        (model(), connection(), {}, Rate(LIST, "list")),
        (model(), connection({"other": CONN}), {"other": ACCOUNT}, Rate(LIST, "list")),
        (model(None), connection(), {}, Rate(None, "list")),
        (
            model(),
            connection({"m": CONN}, owner="acct_1"),
            {"m": ACCOUNT},
            Rate(CONN, "custom_provider", honours_provider_cost=False),
        ),
        (
            model(),
            connection(owner="acct_1"),
            {"m": ACCOUNT},
            Rate(ACCOUNT, "custom", honours_provider_cost=False),
        ),
        (
            model(None),
            connection(owner="acct_1"),
            {},
            Rate(None, "list", honours_provider_cost=False),
        ),
    ],
    ids=[
        "connection-over-account-and-list",
        "connection-prices-an-unlisted-model",
        "account-over-list",
        "connection-price-of-another-model-ignored",
        "list",
        "prices-of-other-models-ignored",
        "unpriced",
        "tenant-connection-price",
        "tenant-account-price",
        "tenant-unpriced",
    ],
)
def test_resolve_rate_most_specific_price_first(
    catalog: CatalogModel,
    conn: ConnectionSettings,
    account_prices: dict[str, Price],
    expected: Rate,
) -> None:
    assert resolve_rate(catalog, conn, account_prices) == expected


USAGE = TokenUsage(prompt_tokens=10, completion_tokens=5, cached_tokens=2)
REPORTED = TokenUsage(prompt_tokens=10, completion_tokens=5, cached_tokens=2, provider_cost=0.5)


@pytest.mark.parametrize(
    ("usage", "rate", "expected"),
    [
        (REPORTED, OPERATORS, REPORTED),
        (USAGE, OPERATORS, USAGE),
        (USAGE, TENANTS, USAGE),
        (REPORTED, TENANTS, USAGE),
        (REPORTED, UNPRICED_TENANTS, USAGE),
    ],
    ids=[
        "operator-keeps-cost",
        "no-cost",
        "tenant-no-cost",
        "tenant-drops-cost",
        "tenant-unpriced",
    ],
)
def test_as_priced_keeps_only_a_cost_the_rate_honours(
    usage: TokenUsage, rate: Rate, expected: TokenUsage
) -> None:
    assert as_priced(usage, rate) == expected


@pytest.mark.parametrize(
    ("pico", "nano"),
    [
        (0, 0),
        (1, 1),
        (999, 1),
        (1000, 1),
        (1001, 2),
        (2000, 2),
        (10**15 + 1, 10**12 + 1),
        (-1, 0),
        (-1999, -1),
    ],
    ids=["zero", "one-pico", "just-under", "exact", "just-over", "two", "huge", "minus-one", "neg"],
)
def test_nano_from_pico_rounds_up(pico: int, nano: int) -> None:
    assert nano_from_pico(pico) == nano


@pytest.mark.parametrize(
    ("usd", "nano"),
    [
        (0.0, 0),
        (1.0, 10**9),
        (1e-9, 1),
        (1.5e-9, 2),
        (1e-12, 1),
        (0.067, 67_000_000),  # as a float, 0.067 * 1e9 is 67000000.00000001
        (0.001842, 1_842_000),
        (MAX_REPORTED_COST_USD, 10**13),
    ],
    ids=["zero", "dollar", "nano", "half-nano-up", "pico-up", "no-float-noise", "cents", "max"],
)
def test_nano_from_usd_is_exact_and_rounds_up(usd: float, nano: int) -> None:
    assert nano_from_usd(usd) == nano


@pytest.mark.parametrize(
    ("nano", "usd"),
    [(0, 0.0), (1, 1e-9), (1_842_000, 0.001842), (10**13, 10_000.0), (-(10**9), -1.0)],
    ids=["zero", "nano", "cents", "max", "negative"],
)
def test_usd_from_nano(nano: int, usd: float) -> None:
    assert usd_from_nano(nano) == usd


@pytest.mark.parametrize(
    ("text", "nano"),
    [
        ("1000000000", 10**18),
        ("-1000000000", -(10**18)),
        ("1e9", 10**18),
        ("0.0000000010", 1),
        (" 2.5 ", 2_500_000_000),
        ("0", 0),
    ],
    ids=["max", "min", "exponent", "trailing-zero", "spaces", "zero"],
)
def test_operator_amounts_at_the_bounds(text: str, nano: int) -> None:
    assert nano_from_usd_text(text) == nano


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("1000000000.000000001", "at most"),
        ("-1000000000.000000001", "at most"),
        ("1e10", "at most"),
        ("", "not an amount"),
        ("1,000", "not an amount"),
        ("-inf", "not an amount"),
        ("sNaN", "not an amount"),
        ("0.0000000005", "9 decimals"),
    ],
    ids=["over", "under", "exponent-over", "empty", "comma", "minus-inf", "snan", "sub-nano"],
)
def test_operator_amounts_refused(text: str, why: str) -> None:
    with pytest.raises(ValueError, match=why):
        nano_from_usd_text(text)


HUGE = 10**18
MAX_OUTPUT_NANO = MAX_REPORTED_TOKENS * 15_000_000 // 1000  # 1e8 tokens at $15/M


@pytest.mark.parametrize(
    ("usage", "rate", "nano"),
    [
        # from the table: 24 in at $3/M + 118 out at $15/M = $0.001842
        (TokenUsage(prompt_tokens=24, completion_tokens=118), OPERATORS, 1_842_000),
        # 100 fresh, 600 cache reads, 300 cache writes, 100 out = $0.003105
        (
            TokenUsage(
                prompt_tokens=1000, completion_tokens=100, cached_tokens=600, cache_write_tokens=300
            ),
            OPERATORS,
            3_105_000,
        ),
        (TokenUsage(prompt_tokens=1), Rate(ONE_PICO, "list"), 1),  # 1 pico rounds up
        (TokenUsage(completion_tokens=3), Rate(Price.per_million(0.0015, 0.0015), "list"), 5),
        (TokenUsage(), OPERATORS, 0),
        # a reported cost wins where honoured
        (TokenUsage(prompt_tokens=10**6, provider_cost=0.5), OPERATORS, 500_000_000),
        (TokenUsage(provider_cost=1e-12), OPERATORS, 1),
        (TokenUsage(provider_cost=0.25), UNPRICED, 250_000_000),
        # untrusted costs: clamped to $10,000, or dropped for the table price
        (TokenUsage(provider_cost=1e300), OPERATORS, 10**13),
        (TokenUsage(completion_tokens=1, provider_cost=math.nan), OPERATORS, 15_000),
        (TokenUsage(completion_tokens=2, provider_cost=math.inf), OPERATORS, 30_000),
        (TokenUsage(completion_tokens=3, provider_cost=-math.inf), OPERATORS, 45_000),
        (TokenUsage(provider_cost=math.nan), UNPRICED, 0),
        # untrusted counts: each clamped to 0 .. MAX_REPORTED_TOKENS before pricing
        (TokenUsage(completion_tokens=HUGE), OPERATORS, MAX_OUTPUT_NANO),
        (TokenUsage(prompt_tokens=HUGE, cached_tokens=HUGE), OPERATORS, 30_000_000_000),
        (TokenUsage(prompt_tokens=-(10**9), completion_tokens=100), OPERATORS, 1_500_000),
        (TokenUsage(prompt_tokens=5, cached_tokens=-(10**9)), OPERATORS, 15_000),
        # a tenant's upstream is not a price: priced from the table, or unpriced
        (TokenUsage(completion_tokens=1, provider_cost=1e300), TENANTS, 15_000),
        (TokenUsage(completion_tokens=1, provider_cost=0.5), UNPRICED_TENANTS, 0),
        # unpriced without a reported cost costs nothing, however much was used
        (TokenUsage(prompt_tokens=HUGE, completion_tokens=HUGE), UNPRICED, 0),
    ],
    ids=[
        "table",
        "table-cache-mix",
        "round-up-one-pico",
        "round-up-half-nano",
        "nothing-used",
        "provider-cost",
        "provider-cost-rounds-up",
        "provider-cost-unpriced-model",
        "absurd-cost-clamped",
        "nan-cost-dropped",
        "inf-cost-dropped",
        "minus-inf-cost-dropped",
        "nan-cost-unpriced",
        "huge-completion-clamped",
        "huge-prompt-and-cache-clamped",
        "negative-count-cancels-nothing",
        "negative-cache-read",
        "tenant-absurd-cost-ignored",
        "tenant-unpriced-cost-ignored",
        "unpriced",
    ],
)
def test_charge(usage: TokenUsage, rate: Rate, nano: int) -> None:
    assert charge(usage, rate) == nano


def request(**fields: object) -> ChatRequest:
    body = {"model": "m", "messages": [{"role": "user", "content": "hi"}], **fields}
    return msgspec.json.decode(msgspec.json.encode(body), type=ChatRequest)


PROMPT = 3 + 4 + 2  # reply priming + one message's framing + 2 bytes of text


@pytest.mark.parametrize(
    ("req", "candidates", "nano"),
    [
        (request(max_tokens=100), [(model(), Rate(LIST, "list"))], 209_000),
        (
            request(max_tokens=100, max_completion_tokens=50),
            [(model(), Rate(LIST, "list"))],
            109_000,
        ),
        (request(), [(model(max_output=1000), Rate(LIST, "list"))], 2_009_000),
        (request(max_tokens=10), [(model(max_output=1000), Rate(LIST, "list"))], 29_000),
        (request(), [(model(), Rate(LIST, "list"))], 9_000 + DEFAULT_OUTPUT_CEILING * 2_000),
        (request(max_tokens=100, n=3), [(model(), Rate(LIST, "list"))], 609_000),
        # the prompt at the cache-write rate ($3.75/M) where that is dearer than input
        (request(max_tokens=100), [(model(), OPERATORS)], 1_533_750),
        (request(max_tokens=1), [(model(), Rate(ONE_PICO, "list"))], 1),  # 10 pico rounds up
        (request(max_tokens=100), [], 0),
        (request(max_tokens=100), [(model(None), UNPRICED), (model(None), UNPRICED)], 0),
        (
            request(max_tokens=100),
            [(model(), Rate(LIST, "list")), (model(None), UNPRICED), (model(), OPERATORS)],
            1_533_750,
        ),
        (
            request(),
            [
                (model(max_output=1000), Rate(LIST, "list")),
                (model(max_output=10), Rate(LIST, "list")),
            ],
            2_009_000,
        ),
        # the request sent there asks for the model's 10 at most (routing/caller.py)
        (request(max_tokens=100_000), [(model(max_output=10), Rate(LIST, "list"))], 29_000),
    ],
    ids=[
        "max-tokens",
        "max-completion-tokens-wins",
        "model-ceiling",
        "request-ceiling-over-model",
        "default-ceiling",
        "n-choices",
        "cache-write-dearer",
        "rounds-up",
        "no-candidates",
        "all-unpriced",
        "dearest-candidate",
        "largest-model-ceiling",
        "request-above-model-lowered",
    ],
)
def test_hold_amount(
    req: ChatRequest, candidates: list[tuple[CatalogModel, Rate]], nano: int
) -> None:
    assert hold_amount(chat_demand(req), candidates) == nano


@pytest.mark.parametrize(
    ("usage", "rate", "settled"),
    [
        (TokenUsage(completion_tokens=HUGE), OPERATORS, 1_533_750),
        (TokenUsage(provider_cost=1e300), OPERATORS, 1_533_750),
        (TokenUsage(completion_tokens=10), OPERATORS, 150_000),
        (TokenUsage(prompt_tokens=-(10**9), completion_tokens=-1), OPERATORS, 0),
    ],
    ids=["huge-counts", "absurd-cost", "within-hold", "negative-counts"],
)
def test_a_settled_charge_stays_within_zero_and_its_hold(
    usage: TokenUsage, rate: Rate, settled: int
) -> None:
    held = hold_amount(chat_demand(request(max_tokens=100)), [(model(), rate)])
    ticket = Ticket("hold_1", "acct", "key", "req", amount=held)
    assert (held, ticket.capped(charge(usage, rate))) == (1_533_750, settled)
