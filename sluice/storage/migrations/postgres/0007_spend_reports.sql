-- Spend reports sum the ledger's charges by key, model, provider or day
-- (storage/spend.py): a charge row says which model and provider served it. Charges
-- written before this migration take them from their request-log row.
ALTER TABLE ledger ADD COLUMN IF NOT EXISTS model TEXT, ADD COLUMN IF NOT EXISTS provider TEXT;
UPDATE ledger l SET model = r.record->>'served_model', provider = r.record->>'provider'
FROM request_log r WHERE r.id = l.request_id AND l.kind = 'charge';
CREATE INDEX IF NOT EXISTS ledger_charges_by_account ON ledger(account_id, created_at) WHERE kind = 'charge';
CREATE INDEX IF NOT EXISTS ledger_charges_by_time ON ledger(created_at) WHERE kind = 'charge';
