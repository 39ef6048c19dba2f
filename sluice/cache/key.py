"""Which requests are the same (docs/cache.md#what-is-the-same-request): the key of a
request is a hash of what changes its answer, taken from the protocol-neutral request,
so one question asked through chat completions, Messages or Responses finds one entry.

Left out: how the answer is delivered (``stream``, ``stream_options``), who asks and
what for (``user``, ``metadata``, ``safety_identifier``, ``store``, ``service_tier``,
the ``prompt_cache_*`` hints), ``models`` (the plan stands for them) and the
Responses door's echoed fields (no provider is sent them). The output cap counts
whichever way it is spelled, and one stop sequence as the list of it.
"""

from __future__ import annotations

import hashlib

import msgspec
from msgspec import UNSET

from sluice.routing.plan import Plan
from sluice.wire.chat import ChatRequest, NativeFields

VERSION = b"v1"
"""Changes whenever what the key covers changes: older entries are then never hit."""
_LEFT_OUT = (
    "stream",
    "stream_options",
    "user",
    "metadata",
    "store",
    "service_tier",
    "safety_identifier",
    "prompt_cache_key",
    "prompt_cache_retention",
    "prompt_cache_options",
    "models",
    "cache",  # the cache's own hints
    "max_tokens",  # as the ceiling, whichever spelling
    "max_completion_tokens",
    "stop",  # as the list of stop sequences
    "native",  # the fields an upstream is sent, apart
)
_SENT_ON = frozenset({"chat", "messages"})
"""Doors whose native fields reach an upstream (and so may change the answer)."""
_ENCODER = msgspec.json.Encoder(order="deterministic")


def cache_key(req: ChatRequest, plan: Plan, scope: str) -> str:
    """The key of ``req`` as ``plan`` serves it, within ``scope`` (an account id, or
    ``global``). A field set to ``null`` counts as one left unset."""
    native = req.native
    fields = native.fields if isinstance(native, NativeFields) and native.wire in _SENT_ON else {}
    asked = msgspec.json.decode(
        _ENCODER.encode(msgspec.structs.replace(req, **dict.fromkeys(_LEFT_OUT, UNSET)))
    )
    keyed = {
        "scope": scope,
        "served_as": [plan.route_name or "", *(a.target.model_id for a in plan.attempts)],
        "request": {k: v for k, v in asked.items() if v is not None and k != "model"},
        "ceiling": req.output_ceiling,
        "stops": req.stop_sequences,
        "native": {k: v for k, v in fields.items() if _raw_content(v)},
    }
    return hashlib.sha256(VERSION + _ENCODER.encode(keyed)).hexdigest()


def _raw_content(value: msgspec.Raw) -> bool:
    """A native field that says something (``null`` says nothing)."""
    return bytes(value).strip() not in (b"", b"null")
