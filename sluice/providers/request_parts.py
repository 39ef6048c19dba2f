"""Pieces of an OpenAI request that every provider reads the same way.

Each function only parses; the error a caller raises (its wording, its ``param``) stays
the caller's, except where the wording is shared as well.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import msgspec

from sluice.errors import InvalidRequestError

_ANY = msgspec.json.Decoder()


class DataUrl(NamedTuple):
    media_type: str
    """``type/subtype``, lowercased, its parameters dropped."""
    data: str
    """The base64 text exactly as it came."""


def parse_data_url(url: str) -> DataUrl | None:
    """A base64 ``data:`` URL (RFC 2397): ``data:<type>/<subtype>[;<name>=<value>]*;base64,
    <data>``; anything else, a plain (not base64) one included, is ``None``."""
    if not url.startswith("data:"):
        return None
    head, comma, data = url[len("data:") :].partition(",")
    media_type, *options = head.split(";")
    if not comma or not options or options.pop() != "base64":
        return None
    kind, slash, subtype = media_type.partition("/")
    if not (kind and slash and subtype) or not all("=" in option for option in options):
        return None
    return DataUrl(media_type.lower(), data)


def tool_arguments_object(arguments: str, param: str) -> dict[str, Any]:
    """A tool call's ``arguments`` as the JSON object providers want; blank means ``{}``."""
    if not arguments.strip():
        return {}
    try:
        value = _ANY.decode(arguments)
    except msgspec.DecodeError:
        value = None
    if not isinstance(value, dict):
        raise InvalidRequestError("Tool call arguments must be a JSON object.", param=param)
    return value
