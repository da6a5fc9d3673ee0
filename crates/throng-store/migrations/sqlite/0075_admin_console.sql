-- The admin console: one-time sign-in links and sessions, each kept only as
-- the SHA-256 of its secret, and the audit log of administrative calls.
CREATE TABLE admin_links (
    hash TEXT PRIMARY KEY,
    claims TEXT NOT NULL,
    expires_ms INTEGER NOT NULL,
    used_ms INTEGER
);
CREATE TABLE admin_sessions (
    hash TEXT PRIMARY KEY,
    sub TEXT NOT NULL,
    role TEXT NOT NULL,
    claims TEXT NOT NULL,
    created_ms INTEGER NOT NULL,
    expires_ms INTEGER NOT NULL,
    seen_ms INTEGER NOT NULL
);
CREATE TABLE admin_audit (
    id INTEGER PRIMARY KEY,
    at_ms INTEGER NOT NULL,
    service TEXT NOT NULL,
    sub TEXT NOT NULL,
    role TEXT NOT NULL,
    via TEXT NOT NULL,
    method TEXT NOT NULL,
    path TEXT NOT NULL,
    status INTEGER NOT NULL
);
CREATE INDEX admin_audit_by_service ON admin_audit (service, id);
