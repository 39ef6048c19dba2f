-- Accounts' own upstream connections (their provider keys encrypted) and their own prices.
CREATE TABLE IF NOT EXISTS account_connections (
    id          TEXT PRIMARY KEY,
    account_id  TEXT NOT NULL REFERENCES accounts(id),
    spec        JSONB NOT NULL,
    api_key_enc TEXT,
    created_at  BIGINT NOT NULL
);
CREATE INDEX IF NOT EXISTS account_connections_account ON account_connections(account_id);

CREATE TABLE IF NOT EXISTS account_prices (
    account_id  TEXT NOT NULL REFERENCES accounts(id),
    model_id    TEXT NOT NULL,
    price       JSONB NOT NULL,
    PRIMARY KEY (account_id, model_id)
);
