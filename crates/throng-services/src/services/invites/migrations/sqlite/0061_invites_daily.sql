-- Invitations shown and answers per site, day (since 1970-01-01, UTC) and
-- page path, gathered in each node's memory and added every flush. shard
-- as in invites_counts. No visitor: a row counts, it names no one.
CREATE TABLE invites_daily (
    site_id INTEGER NOT NULL,
    day INTEGER NOT NULL,
    page TEXT NOT NULL,
    shard INTEGER NOT NULL,
    shown INTEGER NOT NULL DEFAULT 0,
    yes INTEGER NOT NULL DEFAULT 0,
    no INTEGER NOT NULL DEFAULT 0,
    closed INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (site_id, day, page, shard)
) WITHOUT ROWID;
