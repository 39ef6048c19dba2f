"""Opaque state handed to a client and taken back later (a provider's signed reasoning
as a Responses ``encrypted_content``), sealed so that only this gateway can open it and
only for the account it was sealed for.

AES-256-GCM with the account id as associated data: a token altered by one bit, sealed
by another gateway, or presented by another account does not open. The key is derived
(HKDF-SHA256) from the vault's secret key (``[server] secret_key_env``) when one is
set, so every replica sharing it and every restart opens what the others sealed;
without one it is random per process, and a sealed value outlives neither a restart
nor a hop to another replica (docs/responses.md#reasoning-across-turns).
"""

from __future__ import annotations

import base64
import binascii
import os

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

from sluice.core.connection import Secret

_VERSION = b"s1"
_NONCE_BYTES = 12
_INFO = b"sluice account seal v1"


class UnsealableError(Exception):
    """The token was not sealed by this gateway for this account, or was altered."""


class AccountSeal:
    def __init__(self, key: bytes) -> None:
        self._aead = AESGCM(key)

    @classmethod
    def from_secret(cls, secret: Secret | None) -> AccountSeal:
        """Keyed from the vault's secret key, else a random key of this process's own."""
        if secret is None:
            return cls(os.urandom(32))
        kdf = HKDF(algorithm=hashes.SHA256(), length=32, salt=None, info=_INFO)
        return cls(kdf.derive(secret.reveal().encode("utf-8")))

    def seal(self, account_id: str, data: bytes) -> str:
        nonce = os.urandom(_NONCE_BYTES)
        sealed = self._aead.encrypt(nonce, data, _VERSION + account_id.encode())
        return base64.urlsafe_b64encode(_VERSION + nonce + sealed).decode("ascii")

    def unseal(self, account_id: str, token: str) -> bytes:
        """The data ``token`` seals for ``account_id``; :class:`UnsealableError` when it
        seals nothing this gateway sealed for that account."""
        try:
            raw = base64.urlsafe_b64decode(token.encode("ascii"))
        except (binascii.Error, UnicodeEncodeError, ValueError):
            raise UnsealableError from None
        if not raw.startswith(_VERSION) or len(raw) < len(_VERSION) + _NONCE_BYTES + 16:
            raise UnsealableError
        nonce = raw[len(_VERSION) : len(_VERSION) + _NONCE_BYTES]
        try:
            return self._aead.decrypt(
                nonce, raw[len(_VERSION) + _NONCE_BYTES :], _VERSION + account_id.encode()
            )
        except InvalidTag:
            raise UnsealableError from None
