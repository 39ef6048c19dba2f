-- An account's filtered listing (GET /v1/requests?status=error) read the log through
-- 0009's indexes, led by the field: with 200,000 rows of other tenants at that status it
-- walked them all (issue 20). One index per filtered field led by the account, spelled
-- exactly as storage/request_query.py writes it, newest first: an account's listing reads
-- its own rows only. 0009's stay for the admin listing across accounts.
CREATE INDEX IF NOT EXISTS request_log_account_key ON request_log(account_id, (record->>'key_id'), created_at DESC, id DESC);
CREATE INDEX IF NOT EXISTS request_log_account_status ON request_log(account_id, (record->>'status'), created_at DESC, id DESC);
CREATE INDEX IF NOT EXISTS request_log_account_provider ON request_log(account_id, (record->>'provider'), created_at DESC, id DESC);
CREATE INDEX IF NOT EXISTS request_log_account_requested ON request_log(account_id, (record->>'requested_model'), created_at DESC, id DESC);
CREATE INDEX IF NOT EXISTS request_log_account_served ON request_log(account_id, (record->>'served_model'), created_at DESC, id DESC);
