-- The request log is listed newest first by (created_at, id), per account
-- (GET /v1/requests) or across them (GET /admin/requests, `sluice requests list`).
CREATE INDEX IF NOT EXISTS request_log_account_newest ON request_log(account_id, created_at DESC, id DESC);
CREATE INDEX IF NOT EXISTS request_log_newest ON request_log(created_at DESC, id DESC);
DROP INDEX IF EXISTS request_log_account;
