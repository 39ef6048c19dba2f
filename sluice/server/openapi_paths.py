"""What ``GET /openapi.json`` describes: one :class:`Endpoint` per operation (its path
and method, body and answer types, parameters, the statuses it answers and the keys it
takes), with the parameters' bounds, the ones the code checks (a value outside them is
a 400). :mod:`~sluice.server.openapi` builds the document from this table.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final, Literal

import msgspec

from sluice.accounts.policy import AllowanceChanges, KeyChanges
from sluice.config import PriceConfig
from sluice.server.admin import ConnectionBody, Credits, NewAccount
from sluice.server.admin_cache import CacheView
from sluice.server.admin_connections import ConnectionList
from sluice.server.admin_keys import Revoke
from sluice.server.admin_models import ModelViewList
from sluice.server.generation import Reloaded
from sluice.server.openapi_answers import (
    AccountConnections,
    AccountPage,
    AccountShown,
    ConnectionDeleted,
    ConnectionShown,
    Health,
    InputItemPage,
    KeyPage,
    KeyShown,
    NewKey,
    PriceSet,
    Readiness,
    RequestPage,
    ResponseDeleted,
    Revoked,
    Schema,
    SpendReport,
    chat_events,
    live_events,
    messages_events,
    responses_events,
)
from sluice.server.streams import StreamState
from sluice.storage.base import REQUEST_STATUSES, RequestRecord
from sluice.wire.chat import ChatRequest
from sluice.wire.chunks import ChatCompletion, ModelEntry, ModelList
from sluice.wire.embeddings import EmbeddingList, EmbeddingRequest
from sluice.wire.messages import CountTokens, CountTokensRequest, Message, MessagesRequest
from sluice.wire.responses import InputTokens, Response, ResponsesRequest


class Param(msgspec.Struct, frozen=True, kw_only=True):
    name: str
    where: Literal["path", "query"] = "query"
    description: str
    required: bool = False
    type: Literal["string", "integer"] = "string"
    minimum: int | None = None
    maximum: int | None = None
    pattern: str | None = None
    enum: tuple[str, ...] = ()
    text: bool = False
    """A filter's text: 1 to 256 characters."""
    example: str | None = None
    literal_slashes: bool = False
    """A value whose ``/`` are sent as they are (more path segments, not ``%2F``)."""


def _seconds(name: str, description: str) -> Param:
    return Param(name=name, description=description, type="integer", minimum=0,
                 maximum=10**12 - 1)  # fmt: skip


# fmt: off
_FORMAT = Param(name="format", enum=("json", "csv", "jsonl"), description="json (the "
                "default), or the page as an export (its next cursor in x-next-cursor)")
_PAGE = (
    Param(name="limit", type="integer", minimum=1, maximum=500, description="Rows per page "
          "(default 50)"),
    Param(name="cursor", description="next_cursor of the page before"),
)
_FILTERS = (
    Param(name="key", text=True, description="Only this key id's"),
    Param(name="model", text=True, description="Only this model's"),
    Param(name="provider", text=True, description="Only this provider's"),
    _seconds("since", "From this Unix time on (inclusive)"),
    _seconds("until", "Before this Unix time"),
)
_REQUEST_PARAMS = (*_PAGE, _FORMAT, Param(name="status", enum=REQUEST_STATUSES,
                                           description="Only rows of this status"), *_FILTERS)
_SPEND_PARAMS = (Param(name="by", enum=("key", "model", "provider", "day"), required=True,
                       description="What the charges are grouped by"), *_PAGE, _FORMAT,
                 *_FILTERS)
_ACCOUNT = Param(name="account", description="Only the account of this name")
_LIVE = (Param(name="interval_ms", type="integer", minimum=100, maximum=10_000,
               description="Milliseconds between events (default 500)"),)
_ID = Param(name="id", where="path", required=True, pattern="^req_[0-9A-Za-z]{1,64}$",
            description="The request's id (its x-request-id)")
_NAME = Param(name="name", where="path", required=True, description="The account's name",
              example="dev", pattern=r"^[A-Za-z0-9][A-Za-z0-9_.\-]{0,63}$")
_PREFIX = Param(name="prefix", where="path", required=True,
                pattern="^sk-sluice-[0-9A-Za-z]{4,40}$",
                description="The start of the key: at least 4 characters after sk-sluice-")
_CONN_ID = Param(name="conn_id", where="path", required=True, example="conn_team_byo",
                 pattern=r"^conn_[A-Za-z0-9_\-]{1,64}$", description="The connection's id")
_MODEL = Param(name="model", where="path", required=True, literal_slashes=True,
               example="team/model", description="A catalog model's id. Its `/` are "
               "literal: they are sent as they are, as more path segments "
               "(`/admin/accounts/dev/prices/team/model`), never as `%2F`, which "
               "the gateway reads as part of a segment (no such model: 404)")
_SERVED_MODEL = Param(name="model", where="path", required=True, literal_slashes=True,
                      example="sluice/demo", description="A model id, route, alias or "
                      "pass-through id; its `/` literal or sent as `%2F`")
_RESPONSE_ID = Param(name="response_id", where="path", required=True,
                     pattern="^resp_[0-9A-Za-z]{1,64}$", description="The stored response's id")
_INCLUDE = Param(name="include", description="Accepted and ignored")
_STREAM_ID = Param(name="request_id", where="path", required=True,
                   pattern="^req_[0-9A-Za-z]{1,64}$",
                   description="The stream's request id (X-Sluice-Resume-Url names it)")
_STORED = (_RESPONSE_ID, Param(name="stream", enum=("false", "true"), description="true: a "
                               "background response's events as SSE (400 for another)"),
           Param(name="starting_after", type="integer", description="With stream=true: the "
                 "events after this sequence number (400 past the last sent)"), _INCLUDE)
_ITEMS = (_RESPONSE_ID,
          Param(name="after", description="An item's id: the items after it (400: the "
                "response has no such item)"),
          Param(name="limit", type="integer", minimum=1, maximum=100, description="Items per "
                "page (default 20)"),
          Param(name="order", enum=("asc", "desc"), description="desc (the default: the last "
                "item first) or asc"), _INCLUDE)
# fmt: on


def _chat_example() -> Schema:
    return {
        "model": "sluice/demo",
        "max_tokens": 16,
        "messages": [{"role": "user", "content": "Hi"}],
    }


def _embeddings_example() -> Schema:
    return {"model": "sluice/demo-embed", "input": ["The sun rose.", "Dawn broke."]}


def _count_example() -> Schema:
    return {"model": "sluice/demo", "messages": [{"role": "user", "content": "Hi"}]}


def _responses_example() -> Schema:
    return {"model": "sluice/demo", "input": "Hi", "stream": True}


def _input_tokens_example() -> Schema:
    return {"model": "sluice/demo", "input": "Hi"}


def _account_example() -> Schema:
    return {"name": "example", "credits": "25", "budget": "100", "budget_period": "monthly"}


def _credits_example() -> Schema:
    return {"amount": "2.50"}


def _price_example() -> Schema:
    return {"input": 0.15, "output": 0.6}


def _revoke_example() -> Schema:
    return {"id": "key_4Xb9TqLmZ0aRc7Yd2Ke5Wf"}


class Endpoint(msgspec.Struct, frozen=True, kw_only=True):
    path: str
    method: str
    summary: str
    body: type | None = None
    answer: type | None = None
    """The JSON answer's type."""
    text: tuple[str, ...] = ()
    """Media types of answers that are text (an export, metrics, a page)."""
    stream: Callable[[], Schema] | None = None
    """The schema of one event of a streamed answer."""
    key: tuple[str, ...] = ("apiKey",)
    """The security schemes, any one of which will do (none: public)."""
    params: tuple[Param, ...] = ()
    ok: tuple[int, ...] = (200,)
    """The statuses whose body is the answer."""
    errors: tuple[int, ...] = (401,)
    """The 4xx statuses answered with the error envelope."""
    messages_wire: bool = False
    """Errors in the Messages wire's envelope."""
    example: Callable[[], Schema] | None = None


_RUN = (400, 401, 402, 403, 404, 413, 429)
_ADMIN = ("adminKey",)
_MESSAGES_KEY = ("apiKey", "messagesKey")
_AUTHZ = (401, 404)
"""The admin key is wrong, or the admin API is off (404)."""
EXPORTS = ("text/csv", "application/x-ndjson")

ENDPOINTS: Final = (
    Endpoint(path="/", method="get", summary="The web console", text=("text/html",), key=(),
             errors=()),
    Endpoint(path="/docs", method="get", summary="This document, rendered", text=("text/html",),
             key=(), errors=()),
    Endpoint(path="/v1/chat/completions", method="post", summary="A chat completion, streamed "
             "(stream: true) or whole", body=ChatRequest, answer=ChatCompletion,
             stream=chat_events, errors=_RUN, example=_chat_example),
    Endpoint(path="/v1/messages", method="post", summary="A message, streamed or whole (the "
             "Messages wire)", body=MessagesRequest, answer=Message, stream=messages_events,
             key=_MESSAGES_KEY, errors=_RUN, messages_wire=True, example=_chat_example),
    Endpoint(path="/v1/messages/count_tokens", method="post", summary="Input tokens of a "
             "Messages prompt", body=CountTokensRequest, answer=CountTokens, key=_MESSAGES_KEY,
             errors=(400, 401, 403, 404, 413, 429), messages_wire=True, example=_count_example),
    Endpoint(path="/v1/responses", method="post", summary="A response, streamed or whole (the "
             "Responses wire)", body=ResponsesRequest, answer=Response, stream=responses_events,
             errors=_RUN, example=_responses_example),
    Endpoint(path="/v1/responses/input_tokens", method="post", summary="Input tokens of a "
             "Responses prompt", body=ResponsesRequest, answer=InputTokens,
             errors=(400, 401, 403, 404, 413, 429), example=_input_tokens_example),
    Endpoint(path="/v1/responses/{response_id}", method="get", summary="A stored response "
             "of this account, whole, or a background one as it stands; `stream=true` "
             "streams a background one again (after `starting_after`) (404 "
             "`response_not_found`: none by that id, or another account's; 400: an unknown "
             "query parameter; 410 `stream_expired`)", answer=Response, params=_STORED,
             errors=(400, 401, 404, 410, 429)),
    Endpoint(path="/v1/responses/{response_id}/cancel", method="post", summary="Stop a "
             "background response now, charged for what it produced (409 or 400 "
             "`response_not_cancellable`: it ended, or was not made with `background`)",
             answer=Response, params=(_RESPONSE_ID,), errors=(400, 401, 404, 409, 429)),
    Endpoint(path="/v1/responses/{response_id}", method="delete", summary="Delete a stored "
             "response of this account and its input items (404 `response_not_found`)",
             answer=ResponseDeleted, params=(_RESPONSE_ID,), errors=(401, 404, 429)),
    Endpoint(path="/v1/responses/{response_id}/input_items", method="get", summary="A page "
             "of a stored response's input items (404 `response_not_found`; 400 naming the "
             "parameter that is wrong)", answer=InputItemPage, params=_ITEMS,
             errors=(400, 401, 404, 429)),
    Endpoint(path="/v1/streams/{request_id}", method="get", summary="A resumable stream "
             "again: the events after the one `Last-Event-ID` names (none: from the start), "
             "then the live tail and the end (404: none of this account's; 410 "
             "`stream_expired`: past its retention or its buffer)", text=("text/event-stream",),
             params=(_STREAM_ID,), errors=(400, 401, 404, 410, 429)),
    Endpoint(path="/v1/streams/{request_id}", method="delete", summary="Stop a resumable "
             "stream now: what it produced is charged, the rest of the hold released",
             answer=StreamState, params=(_STREAM_ID,), errors=(401, 404, 410, 429)),
    Endpoint(path="/v1/embeddings", method="post", summary="Embeddings of one input or a "
             "batch (floats or base64), metered on input tokens", body=EmbeddingRequest,
             answer=EmbeddingList, errors=_RUN, example=_embeddings_example),
    Endpoint(path="/v1/models", method="get", summary="The models and routes this key may "
             "ask for", answer=ModelList, errors=(401, 429)),
    Endpoint(path="/v1/models/{model}", method="get", summary="One model or route, also by "
             "an alias or a pass-through id (404 `model_not_found`; 400 `model_ambiguous`)",
             answer=ModelEntry, params=(_SERVED_MODEL,), errors=(400, 401, 404, 429)),
    Endpoint(path="/v1/requests", method="get", summary="This account's request log, newest "
             "first (a page)", answer=RequestPage, text=EXPORTS, params=_REQUEST_PARAMS,
             errors=(400, 401, 429)),
    Endpoint(path="/v1/requests/live", method="get", summary="The requests in flight: an "
             "`event: requests` per interval until the client leaves (the admin key: every "
             "account's)", stream=live_events, key=("apiKey", "adminKey"), params=_LIVE,
             errors=(400, 401, 429)),
    Endpoint(path="/v1/requests/{id}", method="get", summary="One request of this account "
             "(still running: its row so far)", answer=RequestRecord, params=(_ID,),
             errors=(401, 404, 429)),
    Endpoint(path="/v1/spend", method="get", summary="This account's spend, grouped by key, "
             "model, provider or day", answer=SpendReport, text=EXPORTS, params=_SPEND_PARAMS,
             errors=(400, 401, 429)),
    Endpoint(path="/health/live", method="get", summary="The process answers", answer=Health,
             key=(), errors=()),
    Endpoint(path="/health/ready", method="get", summary="Storage and the rate limiter answer "
             "(503 naming what failed otherwise)", answer=Readiness, key=(), ok=(200, 503),
             errors=()),
    Endpoint(path="/metrics", method="get", summary="Prometheus metrics (operators; an API "
             "key is refused with 403)", text=("text/plain",), key=_ADMIN,
             errors=(401, 403, 404)),
    Endpoint(path="/admin/accounts", method="post", summary="Make an account, with its "
             "starting credits and its own budget and limits (409: the name is taken)",
             body=NewAccount, answer=AccountShown, key=_ADMIN, ok=(201,),
             errors=(400, *_AUTHZ, 409, 413), example=_account_example),
    Endpoint(path="/admin/accounts", method="get", summary="A page of accounts",
             answer=AccountPage, key=_ADMIN, params=_PAGE, errors=(400, *_AUTHZ)),
    Endpoint(path="/admin/accounts/{name}", method="get", summary="An account: balance, "
             "holds, its limits and what it spent this budget period", answer=AccountShown,
             key=_ADMIN, params=(_NAME,), errors=_AUTHZ),
    Endpoint(path="/admin/accounts/{name}", method="patch", summary="Change an account's "
             "budget and limits", body=AllowanceChanges, answer=AccountShown, key=_ADMIN,
             params=(_NAME,), errors=(400, *_AUTHZ, 413)),
    Endpoint(path="/admin/accounts/{name}/credits", method="post", summary="Credit the "
             "account (a negative amount debits it), through the ledger", body=Credits,
             answer=AccountShown, key=_ADMIN, params=(_NAME,), errors=(400, *_AUTHZ, 413),
             example=_credits_example),
    Endpoint(path="/admin/accounts/{name}/keys", method="get", summary="A page of the "
             "account's keys, oldest first, never their secrets", answer=KeyPage, key=_ADMIN,
             params=(_NAME, *_PAGE), errors=(400, *_AUTHZ)),
    Endpoint(path="/admin/accounts/{name}/keys", method="post", summary="Make a key (its "
             "secret is shown once)", body=KeyChanges, answer=NewKey, key=_ADMIN,
             params=(_NAME,), ok=(201,), errors=(400, *_AUTHZ, 413)),
    Endpoint(path="/admin/keys/{prefix}", method="patch", summary="Change a key's policy "
             "(409: the prefix names several live keys)", body=KeyChanges, answer=KeyShown,
             key=_ADMIN, params=(_PREFIX,), errors=(400, *_AUTHZ, 409, 413)),
    Endpoint(path="/admin/keys/{prefix}/rotate", method="post", summary="A new secret for "
             "the key, shown once; the old one stops (409: the prefix names several)",
             answer=NewKey, key=_ADMIN, params=(_PREFIX,), errors=(400, *_AUTHZ, 409)),
    Endpoint(path="/admin/keys/revoke", method="post", summary="Revoke a key by its id or "
             "the whole key (matched by its digest), or every live key whose prefix starts so "
             "(`sk-sluice-` and 4 or more); 404 `key_not_found`: none was live",
             body=Revoke, answer=Revoked, key=_ADMIN, errors=(400, *_AUTHZ, 413),
             example=_revoke_example),
    Endpoint(path="/admin/accounts/{name}/connections", method="get", summary="The "
             "account's own connections, never their provider keys",
             answer=AccountConnections, key=_ADMIN, params=(_NAME,), errors=_AUTHZ),
    Endpoint(path="/admin/accounts/{name}/connections/{conn_id}", method="put", summary="Make "
             "or replace one of the account's own connections, its provider key encrypted "
             "(400: a private base_url; 409: another account holds the id)",
             body=ConnectionBody, answer=ConnectionShown, key=_ADMIN,
             params=(_NAME, _CONN_ID), errors=(400, *_AUTHZ, 409, 413)),
    Endpoint(path="/admin/accounts/{name}/connections/{conn_id}", method="delete",
             summary="Delete one of the account's own connections", answer=ConnectionDeleted,
             key=_ADMIN, params=(_NAME, _CONN_ID), errors=_AUTHZ),
    Endpoint(path="/admin/accounts/{name}/prices/{model}", method="put", summary="The "
             "account's own price for a catalog model", body=PriceConfig, answer=PriceSet,
             key=_ADMIN, params=(_NAME, _MODEL), errors=(400, *_AUTHZ, 413),
             example=_price_example),
    Endpoint(path="/admin/accounts/{name}/prices/{model}", method="delete", summary="Remove "
             "the account's own price for a model (the catalog's applies)", answer=PriceSet,
             key=_ADMIN, params=(_NAME, _MODEL), errors=_AUTHZ),
    Endpoint(path="/admin/connections", method="get", summary="The config's connections: "
             "breaker state, attempts, error rate, mean time to first token (this replica)",
             answer=ConnectionList, key=_ADMIN, errors=_AUTHZ),
    Endpoint(path="/admin/models", method="get", summary="Every served model and route with "
             "the targets a request tries in order and each one's circuit breaker",
             answer=ModelViewList, key=_ADMIN, errors=_AUTHZ),
    Endpoint(path="/admin/cache", method="get", summary="The response cache: its store, "
             "hits, misses and bypasses since this replica started, the hit ratio, requests "
             "in flight shared, and each cached model's and route's settings",
             answer=CacheView, key=_ADMIN, errors=_AUTHZ),
    Endpoint(path="/admin/requests", method="get", summary="Every account's request log (a "
             "page)", answer=RequestPage, text=EXPORTS, key=_ADMIN,
             params=(*_REQUEST_PARAMS, _ACCOUNT), errors=(400, *_AUTHZ)),
    Endpoint(path="/admin/spend", method="get", summary="Spend of every account or one",
             answer=SpendReport, text=EXPORTS, key=_ADMIN, params=(*_SPEND_PARAMS, _ACCOUNT),
             errors=(400, *_AUTHZ)),
    Endpoint(path="/admin/reload", method="post", summary="Read the config file again (422: "
             "refused, the running config kept)", answer=Reloaded, key=_ADMIN,
             errors=(*_AUTHZ, 422)),
)  # fmt: skip
"""What the document describes (the admin API in full is in docs/admin.md)."""
