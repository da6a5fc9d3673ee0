-- Secret ballot at rest: the box keyed by the receipt's tag (HMAC under a
-- key kept outside the database), its choice sealed; published ballots and
-- their tags apart (no receipt-derived value beside a choice). Boxed
-- ballots and published ballots' ids of the earlier schema are re-keyed at
-- start by `store::adopt_legacy` (it needs the receipt key), then dropped.
ALTER TABLE voting_ballot_box RENAME TO voting_ballot_box_legacy;
ALTER INDEX voting_ballot_box_pkey RENAME TO voting_ballot_box_legacy_pkey;
CREATE TABLE voting_ballot_box (
    receipt_tag BYTEA PRIMARY KEY,
    election_id BIGINT NOT NULL,
    district_id BIGINT NOT NULL,
    sealed BYTEA NOT NULL
);
CREATE TABLE voting_receipts_legacy AS SELECT election_id, ballot_id FROM voting_ballots;
ALTER TABLE voting_ballots DROP COLUMN ballot_id;
ALTER TABLE voting_rounds ADD COLUMN last_position BIGINT NOT NULL DEFAULT 0;
-- Receipts whose ballot a round published: tags only, no ballot, no district.
CREATE TABLE voting_receipts_counted (
    election_id BIGINT NOT NULL,
    receipt_tag BYTEA NOT NULL,
    PRIMARY KEY (election_id, receipt_tag)
);
DELETE FROM meta WHERE key = 'voting_receipt_key';
