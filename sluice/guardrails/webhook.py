"""The external checker: an HTTP webhook asked about the input and, in batches, the output.

The gateway POSTs JSON ``{"guardrail", "stage", "request_id", "texts": [...],
"final"}`` and expects ``200`` with ``{"allowed": true|false}``. Anything else (a
timeout, a refused connection, another status, an unreadable answer) means the
guardrail could not be evaluated: the request fails closed with
``guardrail_unavailable`` unless the guardrail is ``fail_open``; either way the request
log says so. Calls go out through the gateway's one HTTP client (``transport/``), on the
operator's pool: the URL comes from the operator's config file, so it is not checked
like accounts' own connections. The answer is read up to ``MAX_ANSWER_BYTES``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Protocol

import msgspec

from sluice.config import Action, GuardrailConfig, Stage
from sluice.core.connection import Timeouts
from sluice.core.upstream_request import UpstreamRequest
from sluice.errors import ApiError, ConfigError, GuardrailUnavailableError
from sluice.guardrails.rule import Note, add_note, note_match
from sluice.transport.port import UpstreamResponse

MAX_ANSWER_BYTES = 64 * 1024
"""A checker's answer is one small JSON object; a longer one is not read further."""


class _Ask(msgspec.Struct):
    guardrail: str
    stage: Stage
    request_id: str
    texts: list[str]
    final: bool


class _Answer(msgspec.Struct):
    allowed: bool


_ANSWER = msgspec.json.Decoder(_Answer)
_ENCODER = msgspec.json.Encoder()


class Sender(Protocol):
    """The gateway's HTTP client (:class:`~sluice.transport.http.HttpTransport`)."""

    async def send(self, req: UpstreamRequest, timeouts: Timeouts) -> UpstreamResponse: ...


class WebhookClient:
    """Asks checkers over the gateway's HTTP client; the caller bounds the time."""

    __slots__ = ("_sender",)

    def __init__(self, sender: Sender) -> None:
        self._sender = sender

    async def ask(self, url: str, body: bytes) -> bool | str:
        """The checker's verdict (True: allowed), or why there is none."""
        headers = {"content-type": "application/json"}
        request = UpstreamRequest("POST", url, headers, body, stream=False)
        try:
            resp = await self._sender.send(request, Timeouts())
        except ApiError:
            return "the checker could not be reached"
        whole = False  # read to its end: the connection may serve the next ask
        try:
            if resp.status != 200:
                return f"the checker answered HTTP {resp.status}"
            answer = await resp.read_body(MAX_ANSWER_BYTES + 1)
            if len(answer) > MAX_ANSWER_BYTES:
                return "the checker's answer was too large"
            whole = True
            return _ANSWER.decode(answer).allowed
        except ApiError:
            return "the checker could not be reached"
        except (msgspec.DecodeError, RecursionError):
            return "the checker's answer was not understood"
        finally:
            if whole:
                resp.release()
            else:
                resp.close()


class WebhookRule:
    __slots__ = ("_client", "action", "batch_chars", "fail_open", "name", "timeout", "url")

    def __init__(self, conf: GuardrailConfig, client: WebhookClient) -> None:
        if not conf.url or not conf.url.startswith(("http://", "https://")):
            raise ConfigError(f"guardrail {conf.name!r}: a webhook needs an http(s) `url`")
        if conf.action == "redact":
            raise ConfigError(f"guardrail {conf.name!r}: a webhook can 'block' or 'log'")
        self.name: str = conf.name
        self.action: Action = conf.action
        self.url, self.timeout, self.fail_open = conf.url, conf.timeout, conf.fail_open
        self.batch_chars = conf.batch_chars
        self._client = client

    async def ask(self, stage: Stage, texts: list[str], request_id: str, final: bool) -> bool | str:
        body = _ENCODER.encode(_Ask(self.name, stage, request_id, texts, final))
        try:
            async with asyncio.timeout(self.timeout):
                return await self._client.ask(self.url, body)
        except TimeoutError:
            return "the checker did not answer in time"


async def run_webhooks(
    hooks: Sequence[WebhookRule],
    stage: Stage,
    texts: list[str],
    *,
    request_id: str,
    notes: list[Note],
    final: bool = True,
) -> ApiError | None:
    """Ask every webhook at once; the first that blocks or fails closed, as an error."""
    verdicts = await asyncio.gather(*(h.ask(stage, texts, request_id, final) for h in hooks))
    for hook, verdict in zip(hooks, verdicts, strict=True):
        if verdict is True:
            continue
        if verdict is False:
            failure = note_match(notes, hook, stage)
            if failure is not None:
                return failure
        elif hook.fail_open:
            add_note(notes, Note(hook.name, stage, hook.action, "failed_open"))
        else:
            add_note(notes, Note(hook.name, stage, hook.action, "unavailable"))
            return GuardrailUnavailableError(
                f"Guardrail '{hook.name}' could not be evaluated: {verdict}."
            )
    return None
