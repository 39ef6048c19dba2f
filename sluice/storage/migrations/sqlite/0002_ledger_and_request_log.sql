-- Credits, holds, the ledger and the request log. Money is integer nano-dollars.
ALTER TABLE accounts ADD COLUMN balance INTEGER NOT NULL DEFAULT 0;
ALTER TABLE accounts ADD COLUMN held INTEGER NOT NULL DEFAULT 0;

CREATE TABLE IF NOT EXISTS holds (
    id          TEXT PRIMARY KEY,
    account_id  TEXT NOT NULL REFERENCES accounts(id),
    key_id      TEXT NOT NULL,
    request_id  TEXT NOT NULL,
    amount      INTEGER NOT NULL,
    created_at  INTEGER NOT NULL,
    expires_at  INTEGER NOT NULL,
    released_at INTEGER,
    charged     INTEGER
);
CREATE INDEX IF NOT EXISTS holds_open ON holds(expires_at) WHERE released_at IS NULL;
CREATE INDEX IF NOT EXISTS holds_account ON holds(account_id) WHERE released_at IS NULL;

CREATE TABLE IF NOT EXISTS ledger (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    account_id  TEXT NOT NULL REFERENCES accounts(id),
    key_id      TEXT,
    request_id  TEXT,
    kind        TEXT NOT NULL,
    amount      INTEGER NOT NULL,
    created_at  INTEGER NOT NULL,
    note        TEXT
);
CREATE INDEX IF NOT EXISTS ledger_account ON ledger(account_id);
CREATE UNIQUE INDEX IF NOT EXISTS ledger_one_charge ON ledger(request_id) WHERE kind = 'charge';

CREATE TABLE IF NOT EXISTS request_log (
    id          TEXT PRIMARY KEY,
    account_id  TEXT NOT NULL,
    created_at  INTEGER NOT NULL,
    record      TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS request_log_account ON request_log(account_id, created_at);
