"""OpenAI Chat Completions, and every server that speaks it (DeepSeek, vLLM, Ollama, …):
the adapter.

It builds the upstream request (the body is :mod:`.openai_request`'s) and hands the
answer to its readers: the stream to :mod:`.openai_stream`, the whole answer to
:mod:`.openai_completion`, a refusal to :mod:`.openai_errors`; the response format
they share, and how the servers differ in it, is :mod:`.openai_upstream`. Embeddings
are :mod:`.openai_embeddings`' (mixed in).
"""

from __future__ import annotations

from collections.abc import Mapping

import msgspec

from sluice.core.connection import Target
from sluice.core.upstream_request import UpstreamRequest
from sluice.errors import ApiError
from sluice.providers.base import AdapterBase, ParsedCompletion
from sluice.providers.openai_completion import parse_openai_completion
from sluice.providers.openai_embeddings import OpenAIEmbeddings
from sluice.providers.openai_errors import parse_openai_error
from sluice.providers.openai_request import openai_body, openai_headers, openai_url
from sluice.providers.openai_stream import OpenAIStreamTranslator
from sluice.wire.chat import ChatRequest

_ENCODER = msgspec.json.Encoder()


class OpenAIAdapter(AdapterBase, OpenAIEmbeddings):
    """``openai``, ``openai-compatible`` and ``deepseek`` connections."""

    def build_request(self, req: ChatRequest, target: Target) -> UpstreamRequest:
        conn = target.connection
        body = openai_body(req, target.native_model, conn.allow_extra_fields)
        headers = openai_headers(conn)
        if req.is_stream:
            headers["accept"] = "text/event-stream"
            headers["accept-encoding"] = "identity"
        return UpstreamRequest(
            method="POST",
            url=openai_url(conn, "/chat/completions"),
            headers=headers,
            body=_ENCODER.encode(body),
            stream=req.is_stream,
        )

    def parse_response(
        self, status: int, headers: Mapping[str, str], body: bytes
    ) -> ParsedCompletion:
        return parse_openai_completion(body, self._new_id)

    def parse_error(self, status: int, headers: Mapping[str, str], body: bytes) -> ApiError:
        return parse_openai_error(status, headers, body)

    def stream(self, req: ChatRequest) -> OpenAIStreamTranslator:
        return OpenAIStreamTranslator(self._new_id, self._shape(req))
