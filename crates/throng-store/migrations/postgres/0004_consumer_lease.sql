-- A lease per log consumer, so that when several nodes run the same worker
-- one delivers and the others stand by (and take over when its lease lapses).
ALTER TABLE consumer_positions ADD COLUMN lease_owner TEXT;
ALTER TABLE consumer_positions ADD COLUMN lease_until_ms BIGINT NOT NULL DEFAULT 0;
