-- As SQLite's 0013: every request-log row is written into each listing index. A key
-- belongs to one account, so the key's own index already holds only that account's
-- rows: the account-led copy goes. Nearly every row is 'complete', and a listing of
-- that status passes nearly every row it reads by time: the status indexes keep the
-- other statuses only, and storage/request_query.py spells the same condition so the
-- planner may use them.
DROP INDEX IF EXISTS request_log_account_key;
DROP INDEX IF EXISTS request_log_status_newest;
DROP INDEX IF EXISTS request_log_account_status;
CREATE INDEX IF NOT EXISTS request_log_status_newest ON request_log((record->>'status'), created_at DESC, id DESC) WHERE (record->>'status') <> 'complete';
CREATE INDEX IF NOT EXISTS request_log_account_status ON request_log(account_id, (record->>'status'), created_at DESC, id DESC) WHERE (record->>'status') <> 'complete';
