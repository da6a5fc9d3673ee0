-- Ballots sealed in the voter's browser to the election's public key: the
-- key (its private half split among trustees, never here), a district's
-- region (where a district too small to publish alone is published), the
-- board period that published a ballot's tracker (SQLite's votes wait in
-- `voting_ballot_intake` until the period moves them here), each district's
-- board digest per period, and the trustees' opened results.
ALTER TABLE voting_elections ADD COLUMN public_key BLOB;
ALTER TABLE voting_elections ADD COLUMN key_threshold INTEGER;
ALTER TABLE voting_elections ADD COLUMN key_trustees INTEGER;
ALTER TABLE voting_elections ADD COLUMN board_period INTEGER NOT NULL DEFAULT 0;
ALTER TABLE voting_elections ADD COLUMN board_at_ms INTEGER;
ALTER TABLE voting_elections ADD COLUMN board_final INTEGER NOT NULL DEFAULT 0;
ALTER TABLE voting_districts ADD COLUMN region TEXT;
ALTER TABLE voting_ballot_box ADD COLUMN period INTEGER;
CREATE TABLE voting_board (
    election_id INTEGER NOT NULL,
    district_id INTEGER NOT NULL,
    period INTEGER NOT NULL,
    ballots INTEGER NOT NULL,
    digest BLOB NOT NULL,
    PRIMARY KEY (election_id, district_id, period)
) WITHOUT ROWID;
CREATE TABLE voting_results (
    election_id INTEGER PRIMARY KEY,
    box_digest TEXT NOT NULL,
    document TEXT NOT NULL,
    imported_at_ms INTEGER NOT NULL
);
