"""The gateway's one route table: every path, its methods, their endpoints and whether
each needs an API key; the paths under a prefix (a request's log row, a stored
response, the admin API); and the front door that answers each door's path, whose
wire the errors there are written in. Matched on the raw path only; a path under
``/v1`` also answers without it (:meth:`Routes.canonical`). State one endpoint
keeps for the gateway's lifetime (the live feeds, the token-count cache) is bound to
it here."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

from sluice.accounts.sealing import AccountSeal
from sluice.exchange.ports import FrontDoor
from sluice.exchange.relay import RESUME_PREFIX, Relays
from sluice.frontdoors.chat import ChatCompletionsDoor
from sluice.frontdoors.embeddings import EmbeddingsDoor
from sluice.frontdoors.messages.door import MessagesDoor
from sluice.frontdoors.responses.decode import decode_responses_request
from sluice.frontdoors.responses.door import ResponsesDoor
from sluice.frontdoors.responses.memory import ResponseMemory
from sluice.frontdoors.responses.reasoning import ReasoningSeal
from sluice.server import endpoints, request_list, spend_report, stored_responses
from sluice.server.admin import ADMIN_PREFIX, admin
from sluice.server.admin_cache import CACHE_PATH, cache_view
from sluice.server.admin_connections import CONNECTIONS_PATH, connections
from sluice.server.admin_models import MODELS_PATH, model_views
from sluice.server.background import Backgrounds
from sluice.server.call import Endpoint
from sluice.server.console import console_routes
from sluice.server.count_tokens import (
    COUNT_TOKENS_PATH,
    INPUT_TOKENS_PATH,
    CountCache,
    count_tokens,
    responses_count,
)
from sluice.server.doors import serve_door
from sluice.server.embeddings import EMBEDDINGS_PATH, embeddings
from sluice.server.endpoints import REQUEST_LOG_PREFIX
from sluice.server.live import LIVE_PATH, LiveFeeds, live_requests
from sluice.server.models import MODELS_PREFIX
from sluice.server.openapi import OPENAPI_PATH
from sluice.server.reload import RELOAD_PATH, reload_endpoint
from sluice.server.streams import cancel_stream, resume_stream

Methods = dict[str, tuple[Endpoint, bool]]
"""A path's methods: each one's endpoint and whether it needs an API key."""
_ADMIN_METHODS = ("GET", "POST", "PUT", "PATCH", "DELETE")
_V1 = "/v1"


class Routes:
    """``paths``: the exact paths; ``prefixes``: the paths under a prefix, tried in
    order after the exact ones; ``doors``: the door answering each door's path."""

    __slots__ = ("_versioned", "doors", "paths", "prefixes")

    def __init__(
        self,
        memory: ResponseMemory,
        seal: AccountSeal,
        openapi_body: bytes,
        *,
        feeds: LiveFeeds,
        counts: CountCache,
        relays: Relays,
        wall_clock: Callable[[], float],
    ) -> None:
        messages = MessagesDoor()
        responses = ResponsesDoor(memory, ReasoningSeal(seal), wall_clock)
        door = partial(serve_door, relays=relays)
        backgrounds = Backgrounds(responses, relays)
        counted_input = partial(
            count_tokens, counts, decode=decode_responses_request, answer=responses_count
        )
        self.paths: dict[str, Methods] = {
            "/health": {"GET": (endpoints.health, False)},
            "/health/live": {"GET": (endpoints.health, False)},
            "/health/ready": {"GET": (endpoints.ready, False)},
            OPENAPI_PATH: {"GET": (partial(endpoints.document, openapi_body), False)},
            "/v1/models": {"GET": (endpoints.models, True)},
            "/v1/chat/completions": {"POST": (partial(door, ChatCompletionsDoor()), True)},
            "/v1/messages": {"POST": (partial(door, messages), True)},
            "/v1/responses": {
                "POST": (partial(door, responses, memory=responses, background=backgrounds), True)
            },
            EMBEDDINGS_PATH: {"POST": (partial(embeddings, EmbeddingsDoor()), True)},
            COUNT_TOKENS_PATH: {"POST": (partial(count_tokens, counts), True)},
            INPUT_TOKENS_PATH: {"POST": (counted_input, True)},
            request_list.LIST_PATH: {"GET": (request_list.own_requests, True)},
            LIVE_PATH: {"GET": (partial(live_requests, feeds), False)},  # an API key or admin
            request_list.ADMIN_LIST_PATH: {"GET": (request_list.all_requests, False)},
            spend_report.SPEND_PATH: {"GET": (spend_report.own_spend, True)},
            spend_report.ADMIN_SPEND_PATH: {"GET": (spend_report.all_spend, False)},
            "/metrics": {"GET": (endpoints.metrics, False)},  # the admin key
            CONNECTIONS_PATH: {"GET": (connections, False)},  # the admin key
            MODELS_PATH: {"GET": (model_views, False)},  # the admin key
            CACHE_PATH: {"GET": (cache_view, False)},  # the admin key
            RELOAD_PATH: dict.fromkeys(_ADMIN_METHODS, (reload_endpoint, False)),
        }
        for path, page in console_routes():
            self.paths[path] = {"GET": (page, False)}
        self.prefixes: tuple[tuple[str, Methods], ...] = (
            (REQUEST_LOG_PREFIX, {"GET": (endpoints.request_log, True)}),
            (MODELS_PREFIX, {"GET": (endpoints.model, True)}),
            (
                RESUME_PREFIX,
                {
                    "GET": (partial(resume_stream, relays), True),
                    "DELETE": (partial(cancel_stream, relays), True),
                },
            ),
            (
                stored_responses.RESPONSES_PREFIX,
                {
                    "GET": (partial(stored_responses.read, backgrounds), True),
                    "POST": (partial(stored_responses.cancel, backgrounds), True),
                    "DELETE": (stored_responses.delete, True),
                },
            ),
            (ADMIN_PREFIX, dict.fromkeys(_ADMIN_METHODS, (admin, False))),
        )
        self.doors: dict[str, FrontDoor] = {"/v1/messages": messages, COUNT_TOKENS_PATH: messages}
        self._versioned = tuple(p for p, _ in self.prefixes if p.startswith(_V1 + "/"))

    def canonical(self, path: str) -> str:
        """``path`` as the table names it: one the table lacks that it has under ``/v1``
        (``/chat/completions``, ``/models/{id}``) is that one; else as sent."""
        if path in self.paths or not path.startswith("/"):
            return path
        versioned = _V1 + path
        if versioned in self.paths or versioned.startswith(self._versioned):
            return versioned
        return path

    def find(self, path: str) -> Methods | None:
        """The methods served at ``path`` (:meth:`canonical` already); None: no such path."""
        methods = self.paths.get(path)
        if methods is not None:
            return methods
        for prefix, under in self.prefixes:
            if path.startswith(prefix):
                return under
        return None
