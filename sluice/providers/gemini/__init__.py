"""Google's Gemini API (``generativelanguage``, v1beta), natively — not its OpenAI layer.

``POST {base}/v1beta/models/{model}:streamGenerateContent?alt=sse`` (or
``:generateContent``) with the key in ``x-goog-api-key``, never in the URL. A native
model containing ``/`` is a full resource name (``tunedModels/x``) and is used as is.
The package splits by concern: :mod:`.wire` (the upstream format), :mod:`.endpoint`
(URL and key), :mod:`.request`, :mod:`.response` (stream translator and whole
answers), :mod:`.errors`, :mod:`.embeddings` (``batchEmbedContents``).
"""

from __future__ import annotations

from collections.abc import Mapping

from sluice.core.connection import Target
from sluice.core.upstream_request import UpstreamRequest
from sluice.errors import ApiError
from sluice.providers.base import AdapterBase, ParsedCompletion
from sluice.providers.gemini.embeddings import GeminiEmbeddings
from sluice.providers.gemini.endpoint import api_headers, method_url
from sluice.providers.gemini.errors import parse_gemini_error
from sluice.providers.gemini.request import gemini_body
from sluice.providers.gemini.response import GeminiStreamTranslator, parse_gemini_completion
from sluice.providers.gemini.wire import ENCODER
from sluice.wire.chat import ChatRequest

__all__ = ("GeminiAdapter", "GeminiStreamTranslator")


class GeminiAdapter(AdapterBase, GeminiEmbeddings):
    """``gemini`` connections."""

    def build_request(self, req: ChatRequest, target: Target) -> UpstreamRequest:
        conn = target.connection
        method = "streamGenerateContent?alt=sse" if req.is_stream else "generateContent"
        headers = api_headers(conn)
        if req.is_stream:
            headers["accept"] = "text/event-stream"
            headers["accept-encoding"] = "identity"
        return UpstreamRequest(
            method="POST",
            url=method_url(conn, target.native_model, method),
            headers=headers,
            body=ENCODER.encode(gemini_body(req)),
            stream=req.is_stream,
        )

    def parse_response(
        self, status: int, headers: Mapping[str, str], body: bytes
    ) -> ParsedCompletion:
        return parse_gemini_completion(body, self._new_id)

    def parse_error(self, status: int, headers: Mapping[str, str], body: bytes) -> ApiError:
        return parse_gemini_error(status, headers, body)

    def stream(self, req: ChatRequest) -> GeminiStreamTranslator:
        return GeminiStreamTranslator(self._new_id, self._shape(req))
