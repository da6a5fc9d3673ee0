-- Nothing to create: on PostgreSQL a vote writes its ballot straight into
-- `voting_ballot_box` and its mark into `voting_marks`, whose primary key
-- decides one vote per voter across nodes. (SQLite's intake and folded
-- marks: sqlite/0031.)
--
-- Ballots waiting now carry receipts without a check (16 random bytes):
-- their tags join `voting_receipts_counted`, so that once a round publishes
-- them their receipts still answer "counted" (while boxed they answer
-- "received"). Receipts minted from here on carry their check.
INSERT INTO voting_receipts_counted (election_id, receipt_tag)
SELECT election_id, receipt_tag FROM voting_ballot_box
ON CONFLICT DO NOTHING;
