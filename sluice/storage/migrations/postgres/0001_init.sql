-- Accounts, hashed API keys, credit holds, the ledger and the request log.
-- Money is integer nano-dollars (BIGINT).
CREATE TABLE IF NOT EXISTS accounts (
    id          TEXT PRIMARY KEY,
    name        TEXT NOT NULL UNIQUE,
    metered     BOOLEAN NOT NULL DEFAULT TRUE,
    is_dev      BOOLEAN NOT NULL DEFAULT FALSE,
    balance     BIGINT NOT NULL DEFAULT 0,
    held        BIGINT NOT NULL DEFAULT 0,
    created_at  BIGINT NOT NULL
);

CREATE TABLE IF NOT EXISTS api_keys (
    id          TEXT PRIMARY KEY,
    account_id  TEXT NOT NULL REFERENCES accounts(id),
    prefix      TEXT NOT NULL,
    key_digest  TEXT NOT NULL UNIQUE,
    name        TEXT,
    created_at  BIGINT NOT NULL,
    revoked_at  BIGINT
);
CREATE INDEX IF NOT EXISTS api_keys_prefix ON api_keys(prefix);

CREATE TABLE IF NOT EXISTS holds (
    id          TEXT PRIMARY KEY,
    account_id  TEXT NOT NULL REFERENCES accounts(id),
    key_id      TEXT NOT NULL,
    request_id  TEXT NOT NULL,
    amount      BIGINT NOT NULL,
    created_at  BIGINT NOT NULL,
    expires_at  BIGINT NOT NULL,
    released_at BIGINT,
    charged     BIGINT
);
CREATE INDEX IF NOT EXISTS holds_open ON holds(expires_at) WHERE released_at IS NULL;
CREATE INDEX IF NOT EXISTS holds_account ON holds(account_id) WHERE released_at IS NULL;

CREATE TABLE IF NOT EXISTS ledger (
    id          BIGSERIAL PRIMARY KEY,
    account_id  TEXT NOT NULL REFERENCES accounts(id),
    key_id      TEXT,
    request_id  TEXT,
    kind        TEXT NOT NULL,
    amount      BIGINT NOT NULL,
    created_at  BIGINT NOT NULL,
    note        TEXT
);
CREATE INDEX IF NOT EXISTS ledger_account ON ledger(account_id);
CREATE UNIQUE INDEX IF NOT EXISTS ledger_one_charge ON ledger(request_id) WHERE kind = 'charge';

CREATE TABLE IF NOT EXISTS request_log (
    id          TEXT PRIMARY KEY,
    account_id  TEXT NOT NULL,
    created_at  BIGINT NOT NULL,
    record      JSONB NOT NULL
);
CREATE INDEX IF NOT EXISTS request_log_account ON request_log(account_id, created_at);
