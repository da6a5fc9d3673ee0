-- A vote's two rows, its mark and its sealed ballot, are keyed first by the
-- writer's batch (`Tx::writer_batch`), then as before: each commit's rows go
-- together at the end of their tables, a few pages per commit, where keys
-- led by the voter or the tracker put every vote of a batch on a page of its
-- own (a write and often a read of 4 KiB each, twice per vote). Within a
-- batch the rows stay in voter and tracker order: a copy of the file shows
-- which votes committed together, as the WAL's frames do, and no order
-- finer than that. Rows waiting from before take batch 0.
CREATE TABLE voting_ballot_intake_by_batch (
    election_id INTEGER NOT NULL,
    batch INTEGER NOT NULL,
    receipt_tag BLOB NOT NULL,
    district_id INTEGER NOT NULL,
    sealed BLOB NOT NULL,
    PRIMARY KEY (election_id, batch, receipt_tag)
) WITHOUT ROWID;
INSERT INTO voting_ballot_intake_by_batch (election_id, batch, receipt_tag, district_id, sealed)
SELECT election_id, 0, receipt_tag, district_id, sealed FROM voting_ballot_intake;
DROP TABLE voting_ballot_intake;
ALTER TABLE voting_ballot_intake_by_batch RENAME TO voting_ballot_intake;
CREATE TABLE voting_marks_by_batch (
    election_id INTEGER NOT NULL,
    batch INTEGER NOT NULL,
    voter_id INTEGER NOT NULL,
    PRIMARY KEY (election_id, batch, voter_id)
) WITHOUT ROWID;
INSERT INTO voting_marks_by_batch (election_id, batch, voter_id)
SELECT election_id, 0, voter_id FROM voting_marks;
DROP TABLE voting_marks;
ALTER TABLE voting_marks_by_batch RENAME TO voting_marks;
