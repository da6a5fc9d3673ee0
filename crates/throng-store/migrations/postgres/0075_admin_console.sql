-- The admin console: one-time sign-in links and sessions, each kept only as
-- the SHA-256 of its secret, and the audit log of administrative calls.
CREATE TABLE admin_links (
    hash TEXT PRIMARY KEY,
    claims TEXT NOT NULL,
    expires_ms BIGINT NOT NULL,
    used_ms BIGINT
);
CREATE TABLE admin_sessions (
    hash TEXT PRIMARY KEY,
    sub TEXT NOT NULL,
    role TEXT NOT NULL,
    claims TEXT NOT NULL,
    created_ms BIGINT NOT NULL,
    expires_ms BIGINT NOT NULL,
    seen_ms BIGINT NOT NULL
);
CREATE TABLE admin_audit (
    id BIGSERIAL PRIMARY KEY,
    at_ms BIGINT NOT NULL,
    service TEXT NOT NULL,
    sub TEXT NOT NULL,
    role TEXT NOT NULL,
    via TEXT NOT NULL,
    method TEXT NOT NULL,
    path TEXT NOT NULL,
    status BIGINT NOT NULL
);
CREATE INDEX admin_audit_by_service ON admin_audit (service, id);
