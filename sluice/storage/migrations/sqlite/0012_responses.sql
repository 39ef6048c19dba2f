-- Stored responses (issue 21): POST /v1/responses with store, read back by
-- GET /v1/responses/{id} and continued by previous_response_id. Owned by the account;
-- pruned by age ([storage] response_retention), oldest first.
CREATE TABLE IF NOT EXISTS responses (
    id TEXT PRIMARY KEY,
    account_id TEXT NOT NULL,
    request_id TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    response TEXT NOT NULL,
    items TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS responses_created ON responses(created_at, id);
