-- Accounts and their API keys. Keys are stored as SHA-256 digests only.
CREATE TABLE IF NOT EXISTS accounts (
    id          TEXT PRIMARY KEY,
    name        TEXT NOT NULL UNIQUE,
    metered     INTEGER NOT NULL DEFAULT 1,
    is_dev      INTEGER NOT NULL DEFAULT 0,
    created_at  INTEGER NOT NULL
);

CREATE TABLE IF NOT EXISTS api_keys (
    id          TEXT PRIMARY KEY,
    account_id  TEXT NOT NULL REFERENCES accounts(id),
    prefix      TEXT NOT NULL,
    key_digest  TEXT NOT NULL UNIQUE,
    name        TEXT,
    created_at  INTEGER NOT NULL,
    revoked_at  INTEGER
);

CREATE INDEX IF NOT EXISTS api_keys_prefix ON api_keys(prefix);
