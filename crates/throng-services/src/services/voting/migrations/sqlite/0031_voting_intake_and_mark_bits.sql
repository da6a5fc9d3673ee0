-- What a vote writes on SQLite, in two tables the mixer empties every
-- interval (store::settle), so that a vote's commit touches a few pages of
-- small tables instead of random pages of large ones:
--
-- `voting_ballot_intake`: ballots since the last settle, keyed by receipt tag
-- (random order, no rowid); moved into `voting_ballot_box`.
CREATE TABLE voting_ballot_intake (
    election_id INTEGER NOT NULL,
    receipt_tag BLOB NOT NULL,
    district_id INTEGER NOT NULL,
    sealed BLOB NOT NULL,
    PRIMARY KEY (election_id, receipt_tag)
) WITHOUT ROWID;
-- `voting_marks` keeps the marks since the last settle (keyed by voter);
-- settling folds them into one bit per voter here: row `chunk` holds voters
-- chunk*4096 .. chunk*4096+4095, bit i%8 of byte i/8 (512 bytes). Neither
-- records when a voter voted.
CREATE TABLE voting_marks_bits (
    election_id INTEGER NOT NULL,
    chunk INTEGER NOT NULL,
    bits BLOB NOT NULL,
    PRIMARY KEY (election_id, chunk)
) WITHOUT ROWID;
-- Ballots waiting now carry receipts without a check (16 random bytes):
-- their tags join `voting_receipts_counted`, so that once a round publishes
-- them their receipts still answer "counted" (while boxed they answer
-- "received"). Receipts minted from here on carry their check.
INSERT OR IGNORE INTO voting_receipts_counted (election_id, receipt_tag)
SELECT election_id, receipt_tag FROM voting_ballot_box;
