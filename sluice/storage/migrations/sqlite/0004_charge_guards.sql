-- A charge never credits an account and never exceeds its hold: refused by the
-- database too, whatever the code above it computed (docs/metering.md).
CREATE TRIGGER IF NOT EXISTS ledger_charge_not_negative
BEFORE INSERT ON ledger WHEN NEW.kind = 'charge' AND NEW.amount > 0
BEGIN SELECT RAISE(ABORT, 'a charge must not be negative'); END;

CREATE TRIGGER IF NOT EXISTS holds_charge_within_hold
BEFORE UPDATE OF charged ON holds
WHEN NEW.charged IS NOT NULL AND (NEW.charged < 0 OR NEW.charged > NEW.amount)
BEGIN SELECT RAISE(ABORT, 'a charge must be within its hold'); END;
