"""Where a Gemini call goes and how it authenticates: ``{base}/v1beta/{model}:{method}``
with the key in ``x-goog-api-key``, never in the URL (chat and embeddings share it)."""

from __future__ import annotations

from urllib.parse import quote

from sluice.core.connection import ConnectionSettings


def resource_name(native_model: str) -> str:
    """``models/<id>`` for a plain model id; a name holding ``/`` (``tunedModels/x``) as is."""
    return native_model if "/" in native_model else "models/" + native_model


def model_path(native_model: str) -> str:
    """The resource name with each segment quoted, for the URL path."""
    return "/".join(quote(segment, safe="") for segment in resource_name(native_model).split("/"))


def method_url(conn: ConnectionSettings, native_model: str, method: str) -> str:
    """``method``: ``generateContent``, ``batchEmbedContents`` … (with any query)."""
    return f"{conn.base_url.rstrip('/')}/v1beta/{model_path(native_model)}:{method}"


def api_headers(conn: ConnectionSettings) -> dict[str, str]:
    """A JSON body's headers, with the connection's key if it has one."""
    headers = {"content-type": "application/json"}
    if conn.api_key is not None:
        headers["x-goog-api-key"] = conn.api_key.reveal()
    return headers
