-- A key's budget is checked on every hold it places: its open holds and its charges
-- since its period began (storage/base.py KEY_USED_SQL) must be found by index.
CREATE INDEX IF NOT EXISTS holds_open_by_key ON holds(key_id) WHERE released_at IS NULL;
CREATE INDEX IF NOT EXISTS ledger_charges_by_key ON ledger(key_id, created_at) WHERE kind = 'charge';
