-- Survey invitations (the survey write-up). A site is one survey campaign; its
-- settings are one JSON document (few sites, read whole into memory).
CREATE TABLE invites_sites (
    site_id INTEGER PRIMARY KEY,
    config TEXT NOT NULL,
    retention_days INTEGER NOT NULL,
    created_at_ms INTEGER NOT NULL,
    updated_at_ms INTEGER NOT NULL
);

-- One row per visitor and site once the visitor answered (a visitor who
-- never answered has no row: a state check of a known visitor is one point
-- lookup, a first visit none). state: 0 asking, 1 yes, 2 no, 3 closed out.
-- displays: the ids of the displays answered so far (8 bytes each), so a
-- retried answer counts once. No IP address, no fingerprint.
CREATE TABLE invites_answers (
    visitor_id INTEGER NOT NULL,
    site_id INTEGER NOT NULL,
    state INTEGER NOT NULL,
    closes INTEGER NOT NULL,
    displays BLOB NOT NULL,
    updated_at_ms INTEGER NOT NULL,
    PRIMARY KEY (visitor_id, site_id)
) WITHOUT ROWID;

-- Per-site counts, kept in the answer's transaction (answers) or flushed
-- from memory every second (visitors, invited, displays). shard spreads a
-- hot site's counter over rows so PostgreSQL nodes do not queue on one.
CREATE TABLE invites_counts (
    site_id INTEGER NOT NULL,
    shard INTEGER NOT NULL,
    visitors INTEGER NOT NULL DEFAULT 0,
    invited INTEGER NOT NULL DEFAULT 0,
    displays INTEGER NOT NULL DEFAULT 0,
    yes INTEGER NOT NULL DEFAULT 0,
    no INTEGER NOT NULL DEFAULT 0,
    closes INTEGER NOT NULL DEFAULT 0,
    closed_out INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (site_id, shard)
) WITHOUT ROWID;
