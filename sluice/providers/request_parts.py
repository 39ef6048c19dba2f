"""Pieces of an OpenAI request that every provider reads the same way.

Each function only parses; the error a caller raises (its wording, its ``param``) stays
the caller's, except where the wording is shared as well.
"""

from __future__ import annotations

from typing import Any, NamedTuple, NoReturn

import msgspec

from sluice.errors import InvalidRequestError
from sluice.wire.conversation import DocumentPart, ImagePart, TextPart

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


def tool_result_text(content: str | list[TextPart | ImagePart], param: str) -> str:
    """A tool result's text, for providers whose tool results are text only: an image
    in one is refused (``param`` names the message)."""
    if isinstance(content, str):
        return content
    for j, part in enumerate(content):
        if isinstance(part, ImagePart):
            raise InvalidRequestError(
                "This provider takes text tool results only; this one holds an image.",
                param=f"{param}.content[{j}]",
            )
    return "".join(p.text for p in content if isinstance(p, TextPart))


def refuse_document(part: DocumentPart, param: str) -> NoReturn:
    """For providers without document blocks: 400 naming the part."""
    raise InvalidRequestError(
        "This provider does not take document content parts; send the text, or a file "
        "part where the provider takes files.",
        param=param,
    )
