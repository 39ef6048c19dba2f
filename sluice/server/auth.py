"""Bearer-key authentication with a short-lived cache of verified keys (a key comes in
``Authorization: Bearer``, or on a front door's paths in that door's key header).

A header that is not exactly ``Bearer sk-sluice-<40 base62>`` is rejected without a
lookup; a lookup is one parameterized query by digest. There is no anonymous
principal: every path but the public ones needs a live key. Keys of the development
account stop working when the config turns the development key off.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from sluice.accounts.keys import is_key_shaped, key_digest
from sluice.core.principal import Principal
from sluice.errors import AuthenticationError
from sluice.storage.base import Store

_CACHE_LIMIT = 10_000


def credentials(headers: Mapping[str, str], key_header: str | None) -> str | None:
    """The key a request presents: ``Authorization``, else the front door's own key
    header (``x-api-key`` on the Messages paths) as if it were a bearer key."""
    header = headers.get("authorization")
    if header is None and key_header is not None and key_header in headers:
        return "Bearer " + headers[key_header]
    return header


class Authenticator:
    def __init__(
        self,
        store: Store,
        *,
        dev_key_enabled: bool,
        clock: Callable[[], float],
        wall_clock: Callable[[], float],
        ttl: float = 5.0,
    ) -> None:
        """``clock`` times the cache; ``wall_clock`` (Unix seconds) decides expiry."""
        self._store = store
        self._dev_key_enabled = dev_key_enabled
        self._clock = clock
        self._wall_clock = wall_clock
        self._ttl = ttl
        self._cache: dict[str, tuple[Principal, float]] = {}
        self._generation = 0
        """Bumped by :meth:`forget`."""

    async def authenticate(self, header: str | None) -> Principal:
        if not header:
            raise AuthenticationError(
                "Missing API key: send 'Authorization: Bearer <key>'.", code="missing_api_key"
            )
        scheme, _, key = header.partition(" ")
        if scheme.lower() != "bearer" or not is_key_shaped(key):
            raise AuthenticationError("Invalid API key.")
        digest = key_digest(key)
        now = self._clock()
        cached = self._cache.get(digest)
        if cached is not None and cached[1] > now:
            principal = cached[0]
        else:
            generation = self._generation
            found = await self._store.find_principal(digest)
            if found is None:
                self._cache.pop(digest, None)
                raise AuthenticationError("Invalid API key.")
            principal = found
            if len(self._cache) >= _CACHE_LIMIT:
                self._cache.clear()
            if generation == self._generation:  # not forgotten while it was looked up
                self._cache[digest] = (principal, now + self._ttl)
        if principal.is_dev and not self._dev_key_enabled:
            raise AuthenticationError("Invalid API key.")
        if principal.policy.expired(self._wall_clock()):
            raise AuthenticationError("The API key has expired.", code="key_expired")
        return principal

    def cached(self, header: str | None) -> Principal | None:
        """The caller a header presents, if its key is in the cache now and good (no
        lookup: for a request's head, before its body is read)."""
        if not header:
            return None
        scheme, _, key = header.partition(" ")
        if scheme.lower() != "bearer" or not is_key_shaped(key):
            return None
        cached = self._cache.get(key_digest(key))
        if cached is None or cached[1] <= self._clock():
            return None
        principal = cached[0]
        if principal.is_dev and not self._dev_key_enabled:
            return None
        return None if principal.policy.expired(self._wall_clock()) else principal

    def forget(self) -> None:
        """Drop every cached key (after a revocation, so it takes effect here at once);
        a lookup in flight then answers its request but caches nothing (what it read
        may be from before the revocation)."""
        self._cache.clear()
        self._generation += 1
