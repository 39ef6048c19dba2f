"""Accounts' provider keys, encrypted at rest (Fernet: AES-CBC with an HMAC).

The vault key comes from the environment variable ``[server] secret_key_env`` names
(default ``SLUICE_SECRET_KEY``), as 32 url-safe base64 bytes:
``python -c "from cryptography.fernet import Fernet; print(Fernet.generate_key().decode())"``.
Without it, accounts cannot register their own connections. A decrypted key only ever
lives in a :class:`~sluice.core.connection.Secret`.
"""

from __future__ import annotations

from cryptography.fernet import Fernet, InvalidToken

from sluice.core.connection import Secret
from sluice.errors import ConfigError


class Vault:
    def __init__(self, key: Secret) -> None:
        try:
            self._fernet = Fernet(key.reveal().encode("ascii"))
        except (ValueError, UnicodeEncodeError):
            raise ConfigError("the secret key must be 32 url-safe base64-encoded bytes") from None

    def seal(self, secret: str) -> str:
        return self._fernet.encrypt(secret.encode("utf-8")).decode("ascii")

    def unseal(self, token: str) -> Secret:
        try:
            return Secret(self._fernet.decrypt(token.encode("ascii")).decode("utf-8"))
        except InvalidToken:
            raise ConfigError(
                "a stored provider key cannot be decrypted with this secret key "
                "(was the key changed?)"
            ) from None
