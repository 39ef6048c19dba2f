-- A charge never credits an account and never exceeds its hold: refused by the
-- database too, whatever the code above it computed (docs/metering.md). NOT VALID:
-- rows written before this migration are not re-checked here; `ledger reconcile`
-- reports any such row.
ALTER TABLE ledger ADD CONSTRAINT ledger_charge_not_negative
    CHECK (kind <> 'charge' OR amount <= 0) NOT VALID;
ALTER TABLE holds ADD CONSTRAINT holds_charge_within_hold
    CHECK (charged IS NULL OR (charged >= 0 AND charged <= amount)) NOT VALID;
