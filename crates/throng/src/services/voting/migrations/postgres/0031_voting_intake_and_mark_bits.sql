-- Nothing to create: on PostgreSQL a vote writes its ballot straight into
-- `voting_ballot_box` and its mark into `voting_marks`, whose primary key
-- decides one vote per voter across nodes. (SQLite's intake and folded
-- marks: sqlite/0031.)
SELECT 1;
