-- Measured at 100,000 rows (bench/control_plane.py): a request-log filter on a rare value
-- read the whole log, and a spend report looked up every charge's row. One index per
-- filtered field, spelled exactly as storage/request_query.py writes it, newest first;
-- the charges indexed with every column a report reads, so it never visits the table.
CREATE INDEX IF NOT EXISTS request_log_key_newest ON request_log(json_extract(record, '$.key_id'), created_at DESC, id DESC);
CREATE INDEX IF NOT EXISTS request_log_status_newest ON request_log(json_extract(record, '$.status'), created_at DESC, id DESC);
CREATE INDEX IF NOT EXISTS request_log_provider_newest ON request_log(json_extract(record, '$.provider'), created_at DESC, id DESC);
CREATE INDEX IF NOT EXISTS request_log_requested_newest ON request_log(json_extract(record, '$.requested_model'), created_at DESC, id DESC);
CREATE INDEX IF NOT EXISTS request_log_served_newest ON request_log(json_extract(record, '$.served_model'), created_at DESC, id DESC);
CREATE INDEX IF NOT EXISTS ledger_spend_by_account ON ledger(account_id, created_at, key_id, model, provider, amount) WHERE kind = 'charge';
CREATE INDEX IF NOT EXISTS ledger_spend_by_time ON ledger(created_at, account_id, key_id, model, provider, amount) WHERE kind = 'charge';
DROP INDEX IF EXISTS ledger_charges_by_account;
DROP INDEX IF EXISTS ledger_charges_by_time;
