"""Reasoning that survives the turn: a provider's signed thinking (Anthropic's thinking
blocks with their signatures, redacted blocks, Bedrock's signed reasoning) goes out as
a ``reasoning`` item's ``encrypted_content``, sealed for the account
(:mod:`sluice.accounts.sealing`), and comes back in a later turn's input as the
``thinking_blocks`` of the assistant turn it preceded, byte for byte.

A token this gateway did not seal for this account, or one altered, is a 400
``invalid_encrypted_content`` naming the item: never sent upstream, never charged.
"""

from __future__ import annotations

from collections.abc import Callable

import msgspec

from sluice.accounts.sealing import AccountSeal, UnsealableError
from sluice.errors import InvalidRequestError
from sluice.wire.chat import ChatRequest, NativeFields
from sluice.wire.conversation import ThinkingBlocks

_BLOCKS = msgspec.json.Decoder(ThinkingBlocks)
_ENCODER = msgspec.json.Encoder()

Seal = Callable[[ThinkingBlocks], str]
"""Seals one reasoning item's blocks for the request's account."""
Unseal = Callable[[str, str], ThinkingBlocks]
"""Opens an item's ``encrypted_content`` (the item's param path second) or raises 400."""


class ReasoningSeal:
    """The door's sealing of reasoning, bound per request to its account."""

    def __init__(self, seal: AccountSeal) -> None:
        self._seal = seal

    def sealer(self, req: ChatRequest) -> Seal | None:
        """Seals for the account ``req`` is served for; None before one is known."""
        native = req.native
        owner = native.owner if isinstance(native, NativeFields) else None
        if not isinstance(owner, str):
            return None
        seal = self._seal

        def sealed(blocks: ThinkingBlocks) -> str:
            return seal.seal(owner, _ENCODER.encode(blocks))

        return sealed

    def opener(self, account_id: str) -> Unseal:
        seal = self._seal

        def opened(token: str, param: str) -> ThinkingBlocks:
            try:
                return _BLOCKS.decode(seal.unseal(account_id, token))
            except (UnsealableError, msgspec.DecodeError):
                raise InvalidRequestError(
                    "The encrypted content of this reasoning item could not be verified: it "
                    "was not issued by this gateway for this account, or it was altered.",
                    code="invalid_encrypted_content",
                    param=param,
                ) from None

        return opened
