-- The write-up's own design (services/voting/bench/baseline.rs), for `throng bench`:
-- dropped by 0019 (the bench child makes it in its own store). Not secret: each row
-- keeps the voter beside their choice, as the write-up's table does.
CREATE TABLE voting_baseline_votes (
    election_id BIGINT NOT NULL,
    voter_id BIGINT NOT NULL,
    district_id BIGINT NOT NULL,
    party_id BIGINT NOT NULL,
    candidate_ids TEXT NOT NULL,
    PRIMARY KEY (election_id, voter_id)
);
-- The candidates by district and party, which the baseline reads on every
-- request (our own design reads them once), as EF Core's foreign-key indexes
-- serve the write-up's; with the name, so it covers the ballot's query (without
-- statistics SQLite would rather scan the election's candidates by primary key).
CREATE INDEX voting_candidates_by_list
    ON voting_candidates (election_id, district_id, party_id, list_position, name);
