"""The answers the gateway builds as dicts or with looser types (health, pages, spend
reports, a stored response's input items and its deletion, accounts, keys and accounts'
own connections and prices in the admin API), described field for field as structs so
:mod:`~sluice.server.openapi` can give their schemas; and the schema of one event of
each streamed answer. Nothing encodes these: the schemathesis run
(``tests/server/test_schemathesis.py``) checks every real answer against them, so a
field added to a dict and not here fails it."""

from __future__ import annotations

from typing import Annotated, Any, Final, Literal

import msgspec
from msgspec import UNSET, UnsetType

from sluice.config import PriceConfig
from sluice.core.connection import Timeouts
from sluice.core.principal import BudgetPeriod
from sluice.server.live import LiveSnapshot
from sluice.storage.base import RequestRecord
from sluice.storage.spend import SpendBy
from sluice.wire.chunks import ChatCompletionChunk
from sluice.wire.errors import StreamErrorEvent
from sluice.wire.messages import ErrorEvent, MessageDelta, MessageStart
from sluice.wire.responses import InputItem, Response

REF_TEMPLATE: Final = "#/components/schemas/{name}"
Schema = dict[str, Any]
STREAMED_TYPES: Final = (ChatCompletionChunk, StreamErrorEvent, MessageStart, MessageDelta,
                         ErrorEvent, LiveSnapshot, Response)  # fmt: skip
"""The types the streamed answers' events carry (their schemas are components)."""


def ref(kind: type) -> Schema:
    return {"$ref": REF_TEMPLATE.format(name=kind.__name__)}


class Health(msgspec.Struct):
    status: Literal["ok"]


class Readiness(msgspec.Struct):
    """``checks``: ``ok`` or why not, per dependency (``config``, ``storage``, ``limits``)."""

    status: Literal["ready", "not_ready"]
    checks: dict[str, str]
    failing: list[str]


class RequestPage(msgspec.Struct):
    object: Literal["list"]
    data: list[RequestRecord]
    has_more: bool
    next_cursor: str | None


class ListedItem(InputItem, kw_only=True):
    """An input item of a stored response as the client sent it, with its ``id`` (made
    where it had none) and ``type`` (``message`` where left out), a message's string
    content as one text part."""

    id: str
    type: str


class InputItemPage(msgspec.Struct):
    """``first_id`` and ``last_id``: the page's first and last items' (null: no items)."""

    object: Literal["list"]
    data: list[ListedItem]
    first_id: str | None
    last_id: str | None
    has_more: bool


class ResponseDeleted(msgspec.Struct):
    id: str
    object: Literal["response.deleted"]
    deleted: Literal[True]


class SpendMoney(msgspec.Struct):
    """``spend`` in USD, ``spend_nano`` the same in nano-USD."""

    requests: int
    spend: float
    spend_nano: int


class SpendLine(SpendMoney, kw_only=True):
    """One group: the field named by ``by`` holds its value (a day is ``YYYY-MM-DD``,
    UTC; a model or provider the charge did not record is null); a key's group also
    has its ``prefix`` and ``label``."""

    key: str | UnsetType = UNSET
    prefix: str | UnsetType | None = UNSET
    label: str | UnsetType | None = UNSET
    model: str | UnsetType | None = UNSET
    provider: str | UnsetType | None = UNSET
    day: str | UnsetType = UNSET


class SpendReport(msgspec.Struct):
    """``total`` is the whole range's, whatever the page."""

    object: Literal["spend_report"]
    by: SpendBy
    since: int | None
    until: int | None
    data: list[SpendLine]
    total: SpendMoney
    has_more: bool
    next_cursor: str | None


class AccountShown(msgspec.Struct, kw_only=True):
    """Amounts in USD; ``spent``: in the budget's current period, where looked up."""

    id: str
    name: str
    metered: bool
    balance: float
    held: float
    available: float
    open_holds: int
    rpm: int | None
    tpm: int | None
    budget: float | None
    budget_period: BudgetPeriod
    spent: float | UnsetType = UNSET
    metadata: dict[str, str]


class AccountPage(msgspec.Struct):
    object: Literal["list"]
    data: list[AccountShown]
    has_more: bool
    next_cursor: str | None


class KeyShown(msgspec.Struct, kw_only=True):
    """A key, never its secret; ``expires_at`` ISO 8601, ``spent`` this period (USD)."""

    id: str
    prefix: str
    name: str | None
    created_at: int
    revoked: bool
    models: list[str] | None
    expires_at: str | None
    resumable: bool
    rpm: int | None
    tpm: int | None
    budget: float | None
    budget_period: BudgetPeriod
    spent: float
    metadata: dict[str, str]


class NewKey(KeyShown, kw_only=True):
    """The key made or rotated, with its (new) secret: shown this once."""

    key: str


class KeyPage(msgspec.Struct):
    object: Literal["list"]
    data: list[KeyShown]
    has_more: bool
    next_cursor: str | None


class RevokedKey(msgspec.Struct):
    """A key revoked now: its id, readable prefix and label (never its secret)."""

    id: str
    prefix: str
    name: str | None


class Revoked(msgspec.Struct):
    """The live keys revoked now (at least one: none is a 404 ``key_not_found``)."""

    revoked: Annotated[int, msgspec.Meta(ge=1)]
    keys: list[RevokedKey]


class ConnectionShown(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    """An account's own connection as stored: never its provider key, only whether it
    has one."""

    id: str
    provider: str
    models: dict[str, str]
    base_url: str | None
    region: str | None
    timeouts: Timeouts
    prices: dict[str, PriceConfig]
    has_api_key: bool


class AccountConnections(msgspec.Struct, forbid_unknown_fields=True):
    """The account's own connections, oldest first (all of them: no pages)."""

    object: Literal["list"]
    data: list[ConnectionShown]


class ConnectionDeleted(msgspec.Struct, forbid_unknown_fields=True):
    deleted: str
    """The connection's id."""


class PriceSet(msgspec.Struct, forbid_unknown_fields=True):
    """The account's own price for the model now; null: none (removed), the catalog's
    applies."""

    model: str
    price: PriceConfig | None


def _json_data(schema: Schema) -> Schema:
    return {"type": "string", "contentMediaType": "application/json", "contentSchema": schema}


def _event(name: str, data: Schema) -> Schema:
    properties = {"event": {"const": name}, "data": _json_data(data)}
    return {"type": "object", "required": ["event", "data"], "properties": properties}


def _typed(name: str) -> Schema:
    return {"type": "object", "required": ["type"], "properties": {"type": {"const": name}}}


def chat_events() -> Schema:
    """A chunk per unnamed event, or the error that ends the stream; then ``[DONE]``."""
    chunk = {"anyOf": [ref(ChatCompletionChunk), ref(StreamErrorEvent)]}
    data = {"anyOf": [{"const": "[DONE]"}, _json_data(chunk)]}
    return {"type": "object", "required": ["data"], "properties": {"data": data}}


def messages_events() -> Schema:
    named = ("content_block_start", "content_block_delta", "content_block_stop", "message_stop",
             "ping")  # fmt: skip
    return {"oneOf": [
        _event("message_start", ref(MessageStart)),
        _event("message_delta", ref(MessageDelta)),
        _event("error", ref(ErrorEvent)),
        *(_event(name, _typed(name)) for name in named),
    ]}  # fmt: skip


def responses_events() -> Schema:
    """Each event named by its ``type``; the ones that carry the response, described."""
    whole = ("response.created", "response.in_progress", "response.completed",
             "response.incomplete", "response.failed")  # fmt: skip
    carrying = {
        "type": "object",
        "required": ["type", "response", "sequence_number"],
        "properties": {"response": ref(Response), "sequence_number": {"type": "integer"}},
    }
    other = {"type": "object", "required": ["type", "sequence_number"]}
    return {"oneOf": [
        *(_event(name, carrying) for name in whole),
        {"type": "object", "required": ["event", "data"],
         "properties": {"event": {"not": {"enum": list(whole)}}, "data": _json_data(other)}},
    ]}  # fmt: skip


def live_events() -> Schema:
    return _event("requests", ref(LiveSnapshot))
