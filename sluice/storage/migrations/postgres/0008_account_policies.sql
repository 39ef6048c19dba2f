-- An account's own budget and per-minute limits over all its keys, and metadata
-- (core/principal.py AccountPolicy), as one JSON object; '{}' is no policy.
ALTER TABLE accounts ADD COLUMN IF NOT EXISTS policy TEXT NOT NULL DEFAULT '{}';
