-- Ballots sealed in the voter's browser to the election's public key: the
-- key (its private half split among trustees, never here), a district's
-- region (where a district too small to publish alone is published), the
-- board period that published a ballot's tracker (NULL until the next
-- period), each district's board digest per period, and the trustees'
-- opened results.
ALTER TABLE voting_elections ADD COLUMN public_key BYTEA;
ALTER TABLE voting_elections ADD COLUMN key_threshold INT;
ALTER TABLE voting_elections ADD COLUMN key_trustees INT;
ALTER TABLE voting_elections ADD COLUMN board_period BIGINT NOT NULL DEFAULT 0;
ALTER TABLE voting_elections ADD COLUMN board_at_ms BIGINT;
ALTER TABLE voting_elections ADD COLUMN board_final BOOLEAN NOT NULL DEFAULT FALSE;
ALTER TABLE voting_districts ADD COLUMN region TEXT;
ALTER TABLE voting_ballot_box ADD COLUMN period BIGINT;
CREATE INDEX voting_ballot_box_waiting ON voting_ballot_box (election_id) WHERE period IS NULL;
CREATE INDEX voting_ballot_box_board ON voting_ballot_box (election_id, district_id, receipt_tag);
CREATE TABLE voting_board (
    election_id BIGINT NOT NULL,
    district_id BIGINT NOT NULL,
    period BIGINT NOT NULL,
    ballots BIGINT NOT NULL,
    digest BYTEA NOT NULL,
    PRIMARY KEY (election_id, district_id, period)
);
CREATE TABLE voting_results (
    election_id BIGINT PRIMARY KEY,
    box_digest TEXT NOT NULL,
    document TEXT NOT NULL,
    imported_at_ms BIGINT NOT NULL
);
