-- What a key carries besides its account: allowed models, expiry, its own rate limits,
-- metadata (core/principal.py KeyPolicy), as one JSON object; '{}' is no policy.
ALTER TABLE api_keys ADD COLUMN IF NOT EXISTS policy TEXT NOT NULL DEFAULT '{}';
