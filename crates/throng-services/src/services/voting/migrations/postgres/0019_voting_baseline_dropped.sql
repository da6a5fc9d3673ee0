-- The write-up's design that `throng bench voting` runs beside ours lives
-- with the bench: its table (a voter beside their choice) and the index its
-- reads need are made only in the bench's own store. Dropped where an
-- earlier schema made them.
DROP TABLE IF EXISTS voting_baseline_votes;
DROP INDEX IF EXISTS voting_candidates_by_list;
