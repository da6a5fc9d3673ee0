-- Invitations shown and answers per site, day and page; see the SQLite migration.
CREATE TABLE invites_daily (
    site_id BIGINT NOT NULL,
    day INTEGER NOT NULL,
    page TEXT NOT NULL,
    shard INTEGER NOT NULL,
    shown BIGINT NOT NULL DEFAULT 0,
    yes BIGINT NOT NULL DEFAULT 0,
    no BIGINT NOT NULL DEFAULT 0,
    closed BIGINT NOT NULL DEFAULT 0,
    PRIMARY KEY (site_id, day, page, shard)
);
