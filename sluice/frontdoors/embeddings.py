"""``POST /v1/embeddings``: the OpenAI embeddings wire decoded into the provider-neutral
:class:`~sluice.core.embedding.EmbedCall` (docs/embeddings.md).

``input`` is checked whole: never empty, no empty string or token array, one kind only,
within the gateway's maximum (``[server] max_embedding_inputs``). The exchange admits
and plans the request as a chat request whose user messages are the texts
(:func:`embedding_carrier`); errors are written as chat completions writes them.
"""

from __future__ import annotations

import msgspec
from msgspec import UNSET

from sluice.core.embedding import EmbedCall
from sluice.errors import InvalidRequestError
from sluice.frontdoors.chat import ChatCompletionsDoor
from sluice.wire.chat import ChatRequest
from sluice.wire.conversation import Message, UserMessage
from sluice.wire.embeddings import EmbeddingRequest
from sluice.wire.errors import decode_body

_REQUEST = msgspec.json.Decoder(EmbeddingRequest)


class EmbeddingsDoor(ChatCompletionsDoor):
    """The chat door's errors under its own name; the answer is its work's
    (:class:`~sluice.exchange.embedding.Embed`)."""

    name = "embeddings"


def decode_embedding(body: bytes | bytearray, max_depth: int) -> EmbeddingRequest:
    return decode_body(_REQUEST, body, max_depth)


def _bad_input(message: str) -> InvalidRequestError:
    return InvalidRequestError(message, code="invalid_input", param="input")


def embed_call(req: EmbeddingRequest, most: int) -> EmbedCall:
    """``req``'s inputs, checked, as the provider-neutral call (``most``: the gateway's
    largest batch, ``[server] max_embedding_inputs``)."""
    items: list[str | int | list[int]] = [req.input] if isinstance(req.input, str) else req.input
    if not items:
        raise _bad_input("'input' is empty: send a string or a non-empty array.")
    if all(isinstance(i, int) for i in items):  # one token array
        items = [[i for i in items if isinstance(i, int)]]
    if len(items) > most:
        raise InvalidRequestError(
            f"'input' has {len(items)} items; at most {most} may be embedded in one request.",
            code="too_many_inputs",
            param="input",
        )
    dims = req.dimensions if isinstance(req.dimensions, int) else None
    user = req.user if isinstance(req.user, str) else None
    if all(isinstance(i, str) for i in items):
        texts = tuple(i for i in items if isinstance(i, str))
        for n, text in enumerate(texts):
            if not text:
                raise _bad_input(f"'input[{n}]' is an empty string; every input needs text.")
        return EmbedCall(texts=texts, dimensions=dims, user=user)
    if all(isinstance(i, list) for i in items):
        arrays = tuple(tuple(i) for i in items if isinstance(i, list))
        for n, array in enumerate(arrays):
            if not array:
                raise _bad_input(f"'input[{n}]' is an empty token array.")
        return EmbedCall(tokens=arrays, dimensions=dims, user=user)
    raise _bad_input("'input' mixes kinds: send strings, or token arrays, not both.")


def embedding_carrier(req: EmbeddingRequest, call: EmbedCall) -> ChatRequest:
    """What the exchange admits and plans: the model asked for (and its fallbacks) and
    each text as a user message (token arrays have no text to guard)."""
    messages: list[Message] = [UserMessage(content=text) for text in call.texts]
    models = req.models if isinstance(req.models, list) else UNSET
    return ChatRequest(model=req.model, messages=messages, models=models)
