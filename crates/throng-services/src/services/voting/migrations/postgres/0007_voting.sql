-- Voting (write-up 001). Static after seeding: elections, districts, parties,
-- candidates on each district's lists, the roll of voters.
CREATE TABLE voting_elections (
    id BIGINT PRIMARY KEY,
    name TEXT NOT NULL,
    opens_at_ms BIGINT NOT NULL,
    closes_at_ms BIGINT NOT NULL,
    candidates_per_vote_max INT NOT NULL
);
CREATE TABLE voting_districts (
    election_id BIGINT NOT NULL,
    district_id BIGINT NOT NULL,
    name TEXT NOT NULL,
    PRIMARY KEY (election_id, district_id)
);
CREATE TABLE voting_parties (
    election_id BIGINT NOT NULL,
    party_id BIGINT NOT NULL,
    name TEXT NOT NULL,
    short_name TEXT NOT NULL,
    PRIMARY KEY (election_id, party_id)
);
CREATE TABLE voting_candidates (
    election_id BIGINT NOT NULL,
    candidate_id BIGINT NOT NULL,
    district_id BIGINT NOT NULL,
    party_id BIGINT NOT NULL,
    list_position INT NOT NULL,
    name TEXT NOT NULL,
    PRIMARY KEY (election_id, candidate_id)
);
CREATE TABLE voting_voters (
    election_id BIGINT NOT NULL,
    voter_id BIGINT NOT NULL,
    district_id BIGINT NOT NULL,
    PRIMARY KEY (election_id, voter_id)
);
-- Who voted. The primary key decides one vote per voter across every node.
CREATE TABLE voting_marks (
    election_id BIGINT NOT NULL,
    voter_id BIGINT NOT NULL,
    PRIMARY KEY (election_id, voter_id)
);
-- Ballots not yet published, keyed by a random id; emptied (and vacuumed)
-- by every round.
CREATE TABLE voting_ballot_box (
    ballot_id BYTEA PRIMARY KEY,
    election_id BIGINT NOT NULL,
    district_id BIGINT NOT NULL,
    party_id BIGINT NOT NULL,
    candidate_ids TEXT NOT NULL
);
CREATE TABLE voting_ballots (
    ballot_id BYTEA PRIMARY KEY,
    election_id BIGINT NOT NULL,
    district_id BIGINT NOT NULL,
    party_id BIGINT NOT NULL,
    candidate_ids TEXT NOT NULL,
    round BIGINT NOT NULL,
    position BIGINT NOT NULL
);
CREATE TABLE voting_rounds (
    election_id BIGINT NOT NULL,
    round BIGINT NOT NULL,
    ballots BIGINT NOT NULL,
    published_at_ms BIGINT NOT NULL,
    PRIMARY KEY (election_id, round)
);
CREATE TABLE voting_tallies (
    election_id BIGINT NOT NULL,
    district_id BIGINT NOT NULL,
    party_id BIGINT NOT NULL,
    candidate_id BIGINT NOT NULL,
    votes BIGINT NOT NULL,
    PRIMARY KEY (election_id, district_id, party_id, candidate_id)
);
