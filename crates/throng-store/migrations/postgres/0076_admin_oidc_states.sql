-- Sign-ins begun at the organisation's identity provider and not yet back:
-- the state (kept as its SHA-256), the nonce and PKCE verifier sent with
-- it, the redirect URI, and when it may no longer come back. A row is
-- deleted when its state is used, so each is used once.
CREATE TABLE admin_oidc_states (
    hash TEXT PRIMARY KEY,
    nonce TEXT NOT NULL,
    verifier TEXT NOT NULL,
    redirect_uri TEXT NOT NULL,
    expires_ms BIGINT NOT NULL
);
