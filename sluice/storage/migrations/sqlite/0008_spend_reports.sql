-- Spend reports sum the ledger's charges by key, model, provider or day
-- (storage/spend.py): a charge row says which model and provider served it. Charges
-- written before this migration take them from their request-log row.
ALTER TABLE ledger ADD COLUMN model TEXT;
ALTER TABLE ledger ADD COLUMN provider TEXT;
UPDATE ledger SET
    model = (SELECT json_extract(r.record, '$.served_model') FROM request_log r WHERE r.id = ledger.request_id),
    provider = (SELECT json_extract(r.record, '$.provider') FROM request_log r WHERE r.id = ledger.request_id)
WHERE kind = 'charge' AND request_id IS NOT NULL;
CREATE INDEX IF NOT EXISTS ledger_charges_by_account ON ledger(account_id, created_at) WHERE kind = 'charge';
CREATE INDEX IF NOT EXISTS ledger_charges_by_time ON ledger(created_at) WHERE kind = 'charge';
