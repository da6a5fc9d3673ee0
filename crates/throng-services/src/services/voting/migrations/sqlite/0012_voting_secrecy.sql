-- Secret ballot at rest. Marks keyed by voter (no rowid, no arrival
-- order); the box keyed by (election, district, receipt tag), its choice
-- sealed; published ballots and their tags apart (no receipt-derived value
-- beside a choice). Boxed ballots and published ballots' ids of the earlier
-- schema are re-keyed at start by `store::adopt_legacy` (it needs the
-- receipt key, which is not in the database), then dropped.
CREATE TABLE voting_marks_by_voter (
    election_id INTEGER NOT NULL,
    voter_id INTEGER NOT NULL,
    PRIMARY KEY (election_id, voter_id)
) WITHOUT ROWID;
INSERT OR IGNORE INTO voting_marks_by_voter SELECT election_id, voter_id FROM voting_marks;
INSERT OR IGNORE INTO voting_marks_by_voter SELECT election_id, voter_id FROM voting_marks_pending;
DROP TABLE voting_marks;
DROP TABLE voting_marks_pending;
ALTER TABLE voting_marks_by_voter RENAME TO voting_marks;
ALTER TABLE voting_ballot_box RENAME TO voting_ballot_box_legacy;
-- Ballots not yet published: the key is the receipt's tag (HMAC under a key
-- kept outside the database), so rows sort at random within a district;
-- `sealed` is the choice under AES-256-GCM (receipt.rs).
CREATE TABLE voting_ballot_box (
    election_id INTEGER NOT NULL,
    district_id INTEGER NOT NULL,
    receipt_tag BLOB NOT NULL,
    sealed BLOB NOT NULL,
    PRIMARY KEY (election_id, district_id, receipt_tag)
) WITHOUT ROWID;
CREATE TABLE voting_receipts_legacy AS SELECT election_id, ballot_id FROM voting_ballots;
ALTER TABLE voting_ballots DROP COLUMN ballot_id;
-- Receipts whose ballot a round published: tags only, no ballot, no district.
CREATE TABLE voting_receipts_counted (
    election_id INTEGER NOT NULL,
    receipt_tag BLOB NOT NULL,
    PRIMARY KEY (election_id, receipt_tag)
) WITHOUT ROWID;
DELETE FROM meta WHERE key = 'voting_receipt_key';
