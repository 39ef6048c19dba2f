"""Counting a call against its caller's limits, before its body is read.

Every endpoint an API key can call counts one request against the key's and the
account's request limits (``rpm``) as soon as the caller is known, before the body is
decoded: a caller past its limit costs a lookup and a 429, nothing more. Token limits
apply later, to what a request asks for once it is read (:mod:`.exchange`).
"""

from __future__ import annotations

from sluice.core.principal import Principal
from sluice.errors import RateLimitError
from sluice.exchange.ports import Headers
from sluice.exchange.services import Services
from sluice.limits.decision import Decision, Subject
from sluice.limits.headers import rate_limit_headers


async def count_call(services: Services, principal: Principal, headers: Headers) -> None:
    """One call against the caller's request limits; :class:`RateLimitError` when they
    have no room (nothing counted then). Adds the ``X-RateLimit-*-requests`` headers."""
    subject = services.limit_subject(principal)
    requests = None if subject is None else subject.only("requests")
    if requests is not None:
        admitted(await services.limiter.admit(requests, 0), headers)


def admitted(decision: Decision, headers: Headers) -> Decision:
    """The decision's headers added; raises the 429 a refusal answers."""
    headers.extend(rate_limit_headers(decision))
    if not decision.allowed:
        raise RateLimitError(
            f"Rate limit reached for {', '.join(decision.exceeded)}: "
            f"{'; '.join(decision.limits)}; retry in {decision.retry_after:.1f} s.",
            code="rate_limit_exceeded",
            retry_after=decision.retry_after,
        )
    return decision


def token_subject(services: Services, principal: Principal, counted: bool) -> Subject | None:
    """What a read request is admitted against: its token limits when the call was
    already counted (:func:`count_call`), else every limit."""
    subject = services.limit_subject(principal)
    if subject is None or not counted:
        return subject
    return subject.only("tokens")
