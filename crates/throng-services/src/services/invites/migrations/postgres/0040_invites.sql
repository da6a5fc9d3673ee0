-- Survey invitations (the survey write-up); see the SQLite migration for the model.
CREATE TABLE invites_sites (
    site_id BIGINT PRIMARY KEY,
    config TEXT NOT NULL,
    retention_days INTEGER NOT NULL,
    created_at_ms BIGINT NOT NULL,
    updated_at_ms BIGINT NOT NULL
);

-- Hash-partitioned by visitor: the write-up's "visitors partitioned over
-- storage servers". Each partition is a table of its own that can be moved
-- (detached, copied, attached as a foreign table on another server) or,
-- on Citus, distributed by the same key. displays: answered display ids.
CREATE TABLE invites_answers (
    visitor_id BIGINT NOT NULL,
    site_id BIGINT NOT NULL,
    state SMALLINT NOT NULL,
    closes SMALLINT NOT NULL,
    displays BIGINT[] NOT NULL,
    updated_at_ms BIGINT NOT NULL,
    last_outcome SMALLINT NOT NULL DEFAULT 0,
    PRIMARY KEY (visitor_id, site_id)
) PARTITION BY HASH (visitor_id);
CREATE TABLE invites_answers_p0 PARTITION OF invites_answers FOR VALUES WITH (MODULUS 8, REMAINDER 0);
CREATE TABLE invites_answers_p1 PARTITION OF invites_answers FOR VALUES WITH (MODULUS 8, REMAINDER 1);
CREATE TABLE invites_answers_p2 PARTITION OF invites_answers FOR VALUES WITH (MODULUS 8, REMAINDER 2);
CREATE TABLE invites_answers_p3 PARTITION OF invites_answers FOR VALUES WITH (MODULUS 8, REMAINDER 3);
CREATE TABLE invites_answers_p4 PARTITION OF invites_answers FOR VALUES WITH (MODULUS 8, REMAINDER 4);
CREATE TABLE invites_answers_p5 PARTITION OF invites_answers FOR VALUES WITH (MODULUS 8, REMAINDER 5);
CREATE TABLE invites_answers_p6 PARTITION OF invites_answers FOR VALUES WITH (MODULUS 8, REMAINDER 6);
CREATE TABLE invites_answers_p7 PARTITION OF invites_answers FOR VALUES WITH (MODULUS 8, REMAINDER 7);

CREATE TABLE invites_counts (
    site_id BIGINT NOT NULL,
    shard INTEGER NOT NULL,
    visitors BIGINT NOT NULL DEFAULT 0,
    invited BIGINT NOT NULL DEFAULT 0,
    displays BIGINT NOT NULL DEFAULT 0,
    yes BIGINT NOT NULL DEFAULT 0,
    no BIGINT NOT NULL DEFAULT 0,
    closes BIGINT NOT NULL DEFAULT 0,
    closed_out BIGINT NOT NULL DEFAULT 0,
    PRIMARY KEY (site_id, shard)
);
