"""Stored responses: the Responses door's memory (docs/responses.md#stored-responses).

Before the plan, :meth:`ResponseMemory.recall` brings back the conversation a
``previous_response_id`` ended: its input items and its output, then this request's
input, decoded again as one conversation (a tool output may answer a call of an
earlier turn), whichever provider served the earlier turns. Once the answer is
complete (or incomplete), with ``store`` (the default), :meth:`~ResponseMemory.remember`
keeps it with those items, written with the write-behind's next batch. A lookup of
a response still being written waits for that batch: a client that sends the next
turn the moment the last one ended finds it (on this replica; another replica reads
storage).

Items are kept as the client sent them (a continued response's earlier items with
their ids); a listing shows them with what OpenAI's adds: an ``id`` where the item had
none (``msg_<response>_in<position>``, the same on every read), ``type`` ``message``
where it was left out, and a message's string content as one text part.
"""

from __future__ import annotations

from types import MappingProxyType

import msgspec
from msgspec import Raw

from sluice.errors import InvalidRequestError
from sluice.frontdoors.responses.decode import conversation, instructions
from sluice.frontdoors.responses.echo import Echo
from sluice.frontdoors.responses.reasoning import Unseal
from sluice.storage.responses import ResponseStore, StoredResponse
from sluice.storage.writer import WriteBehind
from sluice.wire.chat import ChatRequest, NativeFields
from sluice.wire.responses import InputItem

_ENCODER = msgspec.json.Encoder()
_ITEMS = msgspec.json.Decoder(list[dict[str, Raw]])
_INPUT = msgspec.json.Decoder(str | list[dict[str, Raw]])
_AS_INPUT = msgspec.json.Decoder(list[InputItem])
_OUTPUT = msgspec.json.Decoder(dict[str, Raw])
_MESSAGE = b'"message"'
_TEXT_PART = MappingProxyType({"assistant": "output_text"})
"""The part type a message's string content becomes, by role (else ``input_text``)."""


class _Head(msgspec.Struct):
    """What :meth:`ResponseMemory.remember` reads of a response object."""

    id: str
    created_at: int
    status: str
    store: bool = False


_HEAD = msgspec.json.Decoder(_Head)


class ResponseMemory:
    """One gateway's stored responses: read from its store, written in the
    write-behind's batches (the request log's)."""

    def __init__(self, store: ResponseStore, writer: WriteBehind) -> None:
        self._store = store
        self._writer = writer

    async def recall(self, req: ChatRequest, account_id: str, unseal: Unseal) -> ChatRequest:
        """``req`` served for ``account_id`` and continued from its
        ``previous_response_id``: its messages the whole conversation (reasoning items'
        sealed content opened by ``unseal``), its ``input`` the items that led to it.
        400 ``previous_response_not_found`` when the account has no such response."""
        native = req.native
        assert isinstance(native, NativeFields)
        native.owner = account_id
        fields = native.fields
        continued = bytes(fields.get("previous_response_id", b"null")) != b"null"
        if not continued and b'"encrypted_content"' not in bytes(fields.get("input", b"")):
            return req  # the common case: nothing to bring back
        echo = Echo(req)
        previous = echo.previous_response_id
        items = _input(fields.get("input", Raw(b"[]")))
        if previous is not None:
            items = [*await self._earlier(previous, account_id), *items]
        joined = Raw(_ENCODER.encode(items))
        messages = conversation(_AS_INPUT.decode(joined), unseal=unseal)
        kept = NativeFields(native.wire, {**fields, "input": joined}, owner=account_id)
        system = instructions(echo.instructions)
        return msgspec.structs.replace(req, messages=system + messages, native=kept)

    async def _earlier(self, previous: str, account_id: str) -> list[dict[str, Raw]]:
        """The items a stored response ended: its conversation, then its output."""
        stored = await self.find(previous, account_id)
        if stored is None:
            raise InvalidRequestError(
                f"Previous response with id '{previous[:64]}' not found.",
                code="previous_response_not_found",
                param="previous_response_id",
            )
        output = _OUTPUT.decode(stored.response).get("output", Raw(b"[]"))
        return [*listed_items(stored), *_ITEMS.decode(output)]

    def remember(
        self, req: ChatRequest, account_id: str, request_id: str, answer: bytes
    ) -> str | None:
        """Keep ``answer`` (a response object at its end) when its request asked to store
        it, written in the background; its id, or None when it is not kept."""
        head = _HEAD.decode(answer)
        if not head.store or head.status not in ("completed", "incomplete"):
            return None
        return self.keep(req, account_id, request_id, answer)

    def keep(self, req: ChatRequest, account_id: str, request_id: str, answer: bytes) -> str:
        """Keep ``answer`` whatever its status (a background response that failed or was
        cancelled is read as such); its id."""
        head = _HEAD.decode(answer)
        native = req.native
        assert isinstance(native, NativeFields)
        stored = StoredResponse(
            id=head.id,
            account_id=account_id,
            request_id=request_id,
            created_at=head.created_at,
            response=Raw(answer),
            items=native.fields.get("input", Raw(b"[]")),
        )
        self._writer.keep(stored)
        return stored.id

    async def find(self, response_id: str, account_id: str) -> StoredResponse | None:
        """The account's stored response, once a write of it under way ended."""
        await self._writer.flush_kept(response_id)
        return await self._store.get_response(response_id, account_id)

    async def forget(self, response_id: str, account_id: str) -> bool:
        """Delete the account's stored response; False when it has none by that id."""
        await self._writer.flush_kept(response_id)
        return await self._store.delete_response(response_id, account_id)


def listed_items(stored: StoredResponse) -> list[dict[str, Raw]]:
    """A stored response's items as a listing shows them (normalized when read, not
    when kept: a listing is rarer than an answer)."""
    return _listed(_input(stored.items), stored.id.partition("_")[2])


def _input(sent_input: Raw) -> list[dict[str, Raw]]:
    """An ``input`` as items (a string is one user message)."""
    sent = _INPUT.decode(sent_input)
    if isinstance(sent, str):
        return [{"role": Raw(b'"user"'), "content": Raw(_ENCODER.encode(sent))}]
    return sent


def _listed(items: list[dict[str, Raw]], suffix: str) -> list[dict[str, Raw]]:
    """The items as a listing shows them: each with its ``id`` and ``type``, a message's
    string content as one text part."""
    out = []
    for n, item in enumerate(items):
        kind = item.setdefault("type", Raw(_MESSAGE))
        if "id" not in item or bytes(item["id"]) == b"null":
            item["id"] = Raw(_ENCODER.encode(f"msg_{suffix}_in{n}"))
        content = item.get("content")
        if bytes(kind) == _MESSAGE and content is not None and bytes(content).startswith(b'"'):
            role = msgspec.json.decode(item.get("role", Raw(b'"user"')))
            part = {"type": _TEXT_PART.get(role, "input_text"), "text": content}
            item["content"] = Raw(_ENCODER.encode([part]))
        out.append(item)
    return out
