"""What a request needs of a model and of a connection, and the plan cut down to the
attempts that have it (pure; docs/api.md#models-and-routes).

A need is an ability of the catalog's ``capabilities`` (:data:`NEEDS`). A model that
does not declare an ability is assumed to have it (the upstream judges); one that
declares it ``false`` is left out of the plan. A request's fields outside the chat wire
(``native`` of wire ``chat``) are needs of the connection: its ``allow_extra_fields``
must name each. When no attempt is left, the request is refused before any upstream
call, naming the model and what it lacks.
"""

from __future__ import annotations

from collections.abc import Collection
from types import MappingProxyType

import msgspec

from sluice.errors import InvalidRequestError
from sluice.routing.catalog import CatalogModel
from sluice.routing.plan import Attempt, Plan
from sluice.wire.chat import CHAT_WIRE, ChatRequest, NativeFields, ResponseFormat
from sluice.wire.conversation import ImagePart, ToolMessage, UserMessage

NEEDS = MappingProxyType(
    {
        "chat": ("chat completions", "model"),
        "tools": ("tools", "tools"),
        "vision": ("image input", "messages"),
        "json_schema": ("a json_schema response_format", "response_format"),
        "reasoning": ("reasoning", "reasoning_effort"),
        "embeddings": ("embeddings", "model"),
    }
)
"""Each ability a request may need: how the refusal names it, and its ``param``."""
CAPABILITY_MISSING = "model_capability_missing"
"""The code of a request no model of its plan can serve."""


def chat_needs(req: ChatRequest) -> frozenset[str]:
    """What a chat request needs of its model: ``chat``, and ``tools`` when it offers
    tools, ``vision`` with an image part, ``json_schema`` for that response format,
    ``reasoning`` for a reasoning effort (other than ``none``) or budget."""
    needs = {"chat"}
    if req.tool_list:
        needs.add("tools")
    if _has_image(req):
        needs.add("vision")
    fmt = req.response_format
    if isinstance(fmt, ResponseFormat) and fmt.type == "json_schema":
        needs.add("json_schema")
    effort = req.reasoning_effort
    if (isinstance(effort, str) and effort != "none") or isinstance(req.reasoning_budget, int):
        needs.add("reasoning")
    return frozenset(needs)


def extra_fields(req: ChatRequest) -> tuple[str, ...]:
    """The request's top-level fields outside the chat wire, as the chat door kept them."""
    native = req.native
    if isinstance(native, NativeFields) and native.wire == CHAT_WIRE:
        return tuple(native.fields)
    return ()


def capable_plan(plan: Plan, needs: Collection[str], extra: Collection[str] = ()) -> Plan:
    """The plan without the attempts whose model lacks one of ``needs`` or whose
    connection does not allow one of the ``extra`` fields; :class:`InvalidRequestError`
    naming the first attempt's model and what it lacks when none is left."""
    kept = tuple(a for a in plan.attempts if _serves(a, needs, extra))
    if len(kept) == len(plan.attempts):
        return plan
    if not kept:
        raise _refusal(plan, needs, extra)
    return msgspec.structs.replace(plan, attempts=kept)


def lacking(model: CatalogModel, needs: Collection[str]) -> str | None:
    """The first of ``needs`` (in :data:`NEEDS` order) the model declares it cannot do."""
    declined = model.lacks.intersection(needs)
    if not declined:
        return None
    return next(need for need in NEEDS if need in declined)


def _serves(attempt: Attempt, needs: Collection[str], extra: Collection[str]) -> bool:
    if lacking(attempt.model, needs) is not None:
        return False
    allowed = attempt.target.connection.allow_extra_fields
    return not extra or all(name in allowed for name in extra)


def _refusal(plan: Plan, needs: Collection[str], extra: Collection[str]) -> InvalidRequestError:
    first = plan.attempts[0]
    need = lacking(first.model, needs)
    if need is None:
        field = _refused_field(plan, extra)
        return InvalidRequestError(
            f"Unrecognized request argument supplied: '{field[:100]}' (no connection serving "
            f"'{plan.requested_model}' allows it: see allow_extra_fields).",
            code="unknown_parameter",
            param=field[:256],
        )
    label, param = NEEDS[need]
    others = any(a.model.id != first.model.id for a in plan.attempts)
    return InvalidRequestError(
        f"The model '{first.model.id}' does not support {label}"
        + (", nor does any model it could fall back to." if others else "."),
        code=CAPABILITY_MISSING,
        param=param,
    )


def _refused_field(plan: Plan, extra: Collection[str]) -> str:
    """A field no connection of the plan allows, else one its first does not."""
    allowed = frozenset().union(*(a.target.connection.allow_extra_fields for a in plan.attempts))
    first = plan.attempts[0].target.connection.allow_extra_fields
    nowhere = [n for n in extra if n not in allowed]
    return nowhere[0] if nowhere else next(n for n in extra if n not in first)


def _has_image(req: ChatRequest) -> bool:
    for message in req.messages:
        content = message.content
        if isinstance(content, list) and isinstance(message, UserMessage | ToolMessage):
            for part in content:
                if isinstance(part, ImagePart):
                    return True
    return False
