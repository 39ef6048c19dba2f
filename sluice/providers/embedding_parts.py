"""What the embedding adapters share: splitting inputs into batches, checking the
vectors an answer holds, and the refusals of inputs a provider cannot take."""

from __future__ import annotations

from collections.abc import Callable, Mapping

from sluice.core.upstream_request import UpstreamRequest
from sluice.core.usage import reported_count
from sluice.errors import InvalidRequestError
from sluice.providers.base import EmbedBatch
from sluice.providers.errors import malformed_response


def spans(total: int, limit: int) -> list[tuple[int, int]]:
    """``(start, count)`` of each batch covering ``total`` inputs, ``limit`` at most each."""
    return [(start, min(limit, total - start)) for start in range(0, total, limit)]


def posted_batches(
    url: str,
    headers: Mapping[str, str],
    total: int,
    limit: int,
    body: Callable[[int, int], bytes],
) -> list[EmbedBatch]:
    """One JSON ``POST`` to ``url`` per ``limit`` inputs of ``total``, its body
    ``body(start, count)``; each with its own copy of ``headers`` (a try adds to them)."""
    return [
        EmbedBatch(UpstreamRequest("POST", url, dict(headers), body(start, n), False), start, n)
        for start, n in spans(total, limit)
    ]


def checked_vectors(vectors: list[list[float]], count: int) -> list[list[float]]:
    """``vectors`` when there are exactly ``count``, none empty, all of one length;
    else ``upstream_malformed_response``."""
    if len(vectors) != count:
        raise malformed_response()
    size = len(vectors[0]) if vectors else 1
    if size == 0 or any(len(vector) != size for vector in vectors):
        raise malformed_response()
    return vectors


def header_count(headers: Mapping[str, str], name: str) -> int | None:
    """A token count an upstream reported in a header, clamped; None if absent or not
    an integer."""
    value = headers.get(name)
    if value is None:
        return None
    try:
        return reported_count(int(value.strip()))
    except ValueError:
        return None


def token_input_refused(provider: str) -> InvalidRequestError:
    return InvalidRequestError(
        f"{provider} embeds text only; send the inputs as strings, not token arrays.",
        code="token_input_unsupported",
        param="input",
    )


def dimensions_refused(model: str, allowed: str) -> InvalidRequestError:
    """``allowed``: what the model can give, in words ("256, 512 or 1024", "no choice")."""
    return InvalidRequestError(
        f"The model {model!r} cannot give vectors of that length (dimensions: {allowed}).",
        code="dimensions_unsupported",
        param="dimensions",
    )
