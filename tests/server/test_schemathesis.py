"""schemathesis against ``/openapi.json``: every operation the document describes, run
against a real gateway (the demo model, no upstream) with generated requests, valid and
invalid; no answer is a 5xx, and each answer's status, content type, headers and body
are the ones its schema says.

The gateway runs on its own event loop in a thread, because schemathesis calls it
synchronously; the cases are built from :func:`openapi_document` at collection (one
test per operation) and the first test proves the gateway serves exactly that document.

Operations that change or delete what a path or body names (rotate, revoke, an
account's own connections and prices) run against records made for them, a second
account ``spare`` and its keys: a case that would act on a real record is pointed at
the spare one (:data:`PINS`), so no case can rotate, revoke or reroute the run's own
key and account, whatever the generator draws.
"""

from __future__ import annotations

import asyncio
import json
import re
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import requests
import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis import Case
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
)
from schemathesis.specs.openapi.definitions import OPENAPI_31_VALIDATOR

from sluice.accounts.keys import key_prefix
from sluice.server.openapi import openapi_document
from sluice.server.openapi_paths import ENDPOINTS
from tests.server.test_admin import ADMIN, ENV
from tests.support.accounts import metered_key
from tests.support.gateway import running_gateway

SCHEMA = schemathesis.openapi.from_dict(openapi_document()).exclude(
    # It streams an event per interval until the client leaves: a synchronous call to it
    # never returns. tests/server/test_live_feed.py covers it.
    path="/v1/requests/live"
)
CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_headers_conformance,
    response_schema_conformance,
]
FAST_DEMO = """
[limits]
refused_burst = 1000000

[[connections]]
id = "conn_demo"
provider = "demo"
options = { first_token_ms = 0, token_ms = 0 }
"""
"""The demo's answers without its pace, so a case takes milliseconds; and no tarpit: one
key is refused thousands of times on purpose (docs/api.md#rate-limits)."""
KEYS = {(e.path, e.method.upper()): e.key for e in ENDPOINTS}
SPARE = "spare"
"""The account made for the operations that change or delete what they name."""
DEMO_MODEL = "sluice/demo"
NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.\-]{0,63}")
PREFIX = re.compile(r"sk-sluice-[0-9A-Za-z]{4,40}")
"""A prefix that can name a live key (shorter, or other characters: a 400)."""
ROTATE = "/admin/keys/{prefix}/rotate"
CONNECTION = "/admin/accounts/{name}/connections/{conn_id}"
PRICE = "/admin/accounts/{name}/prices/{model}"


@dataclass
class Served:
    url: str
    api_key: str
    session: requests.Session
    spare: dict[str, str]
    """The prefix of the spare account's key for each of ``rotate`` and ``revoke``
    (rotating gives the key a new prefix: kept here), and the id of a key no generated
    case can name, for the revocation that must answer 200 (``revoke_id``)."""

    def headers(self, path: str, method: str) -> dict[str, str]:
        """The key each operation's security asks for (an API key where either will do)."""
        schemes = KEYS[path, method]
        if not schemes:
            return {}
        return {"authorization": f"Bearer {self.api_key if 'apiKey' in schemes else ADMIN}"}


class GatewayThread(threading.Thread):
    """A gateway with the admin API on and a funded key, on its own loop until stopped."""

    def __init__(self, home: Path) -> None:
        super().__init__(daemon=True)
        self.home = home
        self.ready = threading.Event()
        self.url = self.key = self.spare = ""
        self.failure: BaseException | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._done: asyncio.Event | None = None

    def run(self) -> None:
        try:
            asyncio.run(self._serve())
        except BaseException as exc:  # reported to the test that waits for it
            self.failure = exc
            self.ready.set()

    async def _serve(self) -> None:
        self._loop, self._done = asyncio.get_running_loop(), asyncio.Event()
        async with running_gateway(self.home, FAST_DEMO, env=ENV) as gw:
            self.key = await metered_key(gw.gateway.store, "team", 10**12)
            self.spare = await metered_key(gw.gateway.store, SPARE, 10**12)
            self.url = f"http://{gw.host}:{gw.port}"
            self.ready.set()
            await self._done.wait()

    def stop(self) -> None:
        if self._loop is not None and self._done is not None:
            self._loop.call_soon_threadsafe(self._done.set)
        self.join(30)


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    thread = GatewayThread(tmp_path_factory.mktemp("schemathesis"))
    thread.start()
    assert thread.ready.wait(30) and thread.failure is None, thread.failure
    with requests.Session() as session:
        answer = session.post(
            f"{thread.url}/admin/accounts/{SPARE}/keys",
            json={"label": "to revoke"},
            headers={"authorization": f"Bearer {ADMIN}"},
            timeout=10,
        )
        assert answer.status_code == 201, answer.text
        last = session.post(
            f"{thread.url}/admin/accounts/{SPARE}/keys",
            json={"label": "to revoke by id"},
            headers={"authorization": f"Bearer {ADMIN}"},
            timeout=10,
        )
        assert last.status_code == 201, last.text
        spare = {
            "rotate": key_prefix(thread.spare),
            "revoke": answer.json()["prefix"],
            "revoke_id": last.json()["id"],
        }
        yield Served(thread.url, thread.key, session, spare)
    thread.stop()


def _on_spare(case: Case[Any], served: Served) -> None:
    """A name that could be an account's (not a 404 by its shape) becomes the spare's."""
    if NAME.fullmatch(str(case.path_parameters.get("name"))):
        case.path_parameters["name"] = SPARE


def _price_on_spare(case: Case[Any], served: Served) -> None:
    """schemathesis sends a generated path parameter's ``/`` as ``%2F``, which the gateway
    (routing on the raw path) reads as part of one segment: no generated model id can
    name a catalog model, so every case would stop at that 404 before the body is read.
    The model is pinned to the catalog's, sent with its ``/`` literal, and the body and
    account name are fuzzed."""
    _on_spare(case, served)
    case.path_parameters["model"] = DEMO_MODEL


def _rotate_spare(case: Case[Any], served: Served) -> None:
    if PREFIX.fullmatch(str(case.path_parameters.get("prefix"))):
        case.path_parameters["prefix"] = served.spare["rotate"]


def _revoke_spare(case: Case[Any], served: Served) -> None:
    if isinstance(case.body, dict) and PREFIX.fullmatch(str(case.body.get("prefix"))):
        case.body = {**case.body, "prefix": served.spare["revoke"]}


PINS: dict[tuple[str, str], Callable[[Case[Any], Served], None]] = {
    (ROTATE, "POST"): _rotate_spare,
    ("/admin/keys/revoke", "POST"): _revoke_spare,
    (CONNECTION, "PUT"): _on_spare,
    (CONNECTION, "DELETE"): _on_spare,
    (PRICE, "PUT"): _price_on_spare,
    (PRICE, "DELETE"): _price_on_spare,
}
"""The cases that would otherwise change or delete a record the run relies on (or, for
prices, can never reach the handler), pointed at ones made for them."""


def test_the_document_is_valid_openapi_3_1() -> None:
    doc = json.loads(json.dumps(openapi_document()))
    assert [error.message for error in OPENAPI_31_VALIDATOR.iter_errors(doc)] == []


def test_the_gateway_serves_the_document_under_test(served: Served) -> None:
    answer = served.session.get(f"{served.url}/openapi.json", timeout=10)
    assert answer.status_code == 200
    assert answer.json() == json.loads(json.dumps(openapi_document()))


@SCHEMA.parametrize()
@settings(
    max_examples=50,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
def test_every_answer_matches_the_document(case: Case[Any], served: Served) -> None:
    path, method = case.operation.path, case.operation.method.upper()
    pin = PINS.get((path, method))
    if pin is not None:
        pin(case, served)
    answer = case.call_and_validate(
        base_url=served.url,
        session=served.session,
        headers=served.headers(path, method),
        checks=CHECKS,
        timeout=20,
    )
    if path == ROTATE and answer.status_code == 200:
        served.spare["rotate"] = answer.json()["prefix"]


HI = [{"role": "user", "content": "Hi"}]


Reachable = tuple[str, str, dict[str, Any], int]


def reachable_cases(
    served: Served, request_id: str, response_id: str
) -> list[tuple[Case[Any], int]]:
    """Answers random cases rarely or never reach: streams, a stored row, a real key,
    the spare account's records, a stored response; each with the status it must
    have."""
    streamed = {"model": DEMO_MODEL, "max_tokens": 8, "stream": True, "messages": HI}
    usage = {**streamed, "stream_options": {"include_usage": True}}
    prefix = key_prefix(served.api_key)
    cases: list[Reachable] = [
        ("/v1/chat/completions", "POST", {"body": usage}, 200),
        ("/v1/messages", "POST", {"body": streamed}, 200),
        ("/v1/requests/{id}", "GET", {"path_parameters": {"id": request_id}}, 200),
        ("/admin/keys/{prefix}", "PATCH", {"path_parameters": {"prefix": prefix},
                                           "body": {"label": "ci", "rpm": 10_000}}, 200),
        ("/v1/requests", "GET", {"query": {"format": "csv", "limit": 1}}, 200),
        ("/admin/requests", "GET", {"query": {"format": "jsonl", "account": "team"}}, 200),
        *(("/v1/spend", "GET", {"query": {"by": by}}, 200) for by in ("key", "model", "day")),
        ("/admin/spend", "GET", {"query": {"by": "provider", "format": "csv"}}, 200),
    ]  # fmt: skip
    return [
        (SCHEMA[path][method].Case(**parts), status)
        for path, method, parts, status in [
            *cases,
            *spare_cases(served),
            *stored_response_cases(response_id),
        ]
    ]


def spare_cases(served: Served) -> list[Reachable]:
    """The admin operations on records made for them, to their success answers (and the
    refusals a fuzzed body seldom meets: a private base URL, an id another account
    holds)."""
    spare = {"name": SPARE}
    price = {**spare, "model": DEMO_MODEL}
    byo = {
        "provider": "openai",
        "models": {DEMO_MODEL: "gpt-4o-mini"},
        "api_key": "sk-byo-1",
        "base_url": "https://1.1.1.1/v1",
    }  # a public address: checked, never called
    owned = {**spare, "conn_id": "conn_spare"}
    return [
        ("/admin/accounts", "POST", {"body": {"name": "fresh", "credits": "1", "rpm": 60}}, 201),
        ("/admin/accounts/{name}", "GET", {"path_parameters": spare}, 200),
        ("/admin/accounts/{name}/credits", "POST", {"path_parameters": spare,
                                                    "body": {"amount": "-1.5"}}, 200),
        ("/admin/accounts/{name}/keys", "GET", {"path_parameters": spare,
                                                "query": {"limit": 1}}, 200),
        (ROTATE, "POST", {"path_parameters": {"prefix": served.spare["rotate"]}}, 200),
        ("/admin/keys/revoke", "POST", {"body": {"id": served.spare["revoke_id"]}}, 200),
        (CONNECTION, "PUT", {"path_parameters": owned, "body": byo}, 200),
        (CONNECTION, "PUT", {"path_parameters": {"name": "dev", "conn_id": "conn_spare"},
                             "body": byo}, 409),
        (CONNECTION, "PUT", {"path_parameters": {**spare, "conn_id": "conn_spare_local"},
                             "body": {**byo, "base_url": "http://127.0.0.1:9/v1"}}, 400),
        ("/admin/accounts/{name}/connections", "GET", {"path_parameters": spare}, 200),
        (CONNECTION, "DELETE", {"path_parameters": owned}, 200),
        (PRICE, "PUT", {"path_parameters": price, "body": {"input": 1, "output": 2}}, 200),
        (PRICE, "PUT", {"path_parameters": {**price, "model": "no/such"},
                        "body": {"input": 1, "output": 2}}, 404),
        (PRICE, "DELETE", {"path_parameters": price}, 200),
    ]  # fmt: skip


STORED = "/v1/responses/{response_id}"
ITEMS = "/v1/responses/{response_id}/input_items"


def stored_response_cases(response_id: str) -> list[Reachable]:
    """A stored response read whole and paged (a full page, a page after an item, a page
    past the end, a bad parameter), then deleted and gone."""
    stored = {"response_id": response_id}
    return [
        (STORED, "GET", {"path_parameters": stored, "query": {"stream": "false"}}, 200),
        (ITEMS, "GET", {"path_parameters": stored}, 200),
        (ITEMS, "GET", {"path_parameters": stored, "query": {"limit": 1, "order": "asc"}}, 200),
        (ITEMS, "GET", {"path_parameters": stored, "query": {"after": "msg_first",
                                                             "order": "asc"}}, 200),
        (ITEMS, "GET", {"path_parameters": stored, "query": {"after": "msg_first"}}, 200),
        (ITEMS, "GET", {"path_parameters": stored, "query": {"order": "up"}}, 400),
        (STORED, "DELETE", {"path_parameters": stored}, 200),
        (STORED, "GET", {"path_parameters": stored}, 404),
        (ITEMS, "GET", {"path_parameters": stored}, 404),
        (STORED, "DELETE", {"path_parameters": stored}, 404),
    ]  # fmt: skip


def test_answers_generated_cases_rarely_reach_match_too(served: Served) -> None:
    body = json.dumps({"model": "sluice/demo", "max_tokens": 8, "messages": HI})
    done = served.session.post(
        f"{served.url}/v1/chat/completions",
        data=body,
        headers=served.headers("/v1/chat/completions", "POST"),
        timeout=20,
    )
    assert done.status_code == 200
    # a stored response's input: an item with its own id, to page after, and one without
    stored_input: list[dict[str, Any]] = [
        {"role": "user", "content": "Hi", "id": "msg_first"},
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Again"}]},
    ]
    kept = served.session.post(
        f"{served.url}/v1/responses",
        json={"model": DEMO_MODEL, "max_output_tokens": 8, "input": stored_input},
        headers=served.headers("/v1/responses", "POST"),
        timeout=20,
    )
    assert kept.status_code == 200, kept.text
    cases = reachable_cases(served, done.headers["x-request-id"], kept.json()["id"])
    for case, status in cases:
        headers = served.headers(case.operation.path, case.operation.method.upper())
        answer = case.call_and_validate(
            base_url=served.url, session=served.session, headers=headers, checks=CHECKS
        )
        assert answer.status_code == status, (case.operation.label, answer.text)
