-- Revoked bearer tokens, shared by every node: by token id (`jti`) or by
-- subject (every token issued to it up to `revoked_at_ms`). A row is kept
-- until `until_ms` (the revoked tokens' expiry at the latest), then purged.
CREATE TABLE token_revocations (
    kind TEXT NOT NULL CHECK (kind IN ('jti', 'sub')),
    value TEXT NOT NULL,
    revoked_at_ms BIGINT NOT NULL,
    until_ms BIGINT NOT NULL,
    reason TEXT NOT NULL DEFAULT '',
    PRIMARY KEY (kind, value)
);
CREATE INDEX token_revocations_until ON token_revocations (until_ms);
