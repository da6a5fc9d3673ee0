-- Nothing to change: on PostgreSQL a vote writes its mark into
-- `voting_marks`, whose key by voter decides one vote per voter across
-- nodes, and its ballot straight into the box. (SQLite's intake and marks
-- keyed by the writer's batch: sqlite/0043.)
SELECT 1;
