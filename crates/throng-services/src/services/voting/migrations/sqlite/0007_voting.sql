-- Voting (write-up 001). Static after seeding: elections, districts, parties,
-- candidates on each district's lists, the roll of voters.
CREATE TABLE voting_elections (
    id INTEGER PRIMARY KEY,
    name TEXT NOT NULL,
    opens_at_ms INTEGER NOT NULL,
    closes_at_ms INTEGER NOT NULL,
    candidates_per_vote_max INTEGER NOT NULL
);
CREATE TABLE voting_districts (
    election_id INTEGER NOT NULL,
    district_id INTEGER NOT NULL,
    name TEXT NOT NULL,
    PRIMARY KEY (election_id, district_id)
) WITHOUT ROWID;
CREATE TABLE voting_parties (
    election_id INTEGER NOT NULL,
    party_id INTEGER NOT NULL,
    name TEXT NOT NULL,
    short_name TEXT NOT NULL,
    PRIMARY KEY (election_id, party_id)
) WITHOUT ROWID;
-- A candidate stands on one party's list in one district.
CREATE TABLE voting_candidates (
    election_id INTEGER NOT NULL,
    candidate_id INTEGER NOT NULL,
    district_id INTEGER NOT NULL,
    party_id INTEGER NOT NULL,
    list_position INTEGER NOT NULL,
    name TEXT NOT NULL,
    PRIMARY KEY (election_id, candidate_id)
) WITHOUT ROWID;
-- The roll: who may vote, and where.
CREATE TABLE voting_voters (
    election_id INTEGER NOT NULL,
    voter_id INTEGER NOT NULL,
    district_id INTEGER NOT NULL,
    PRIMARY KEY (election_id, voter_id)
) WITHOUT ROWID;
-- Who voted, without when: appended by the mixer's rounds, each round's
-- marks in voter order (so the order says in which round, never when within
-- it). No key: one vote per voter is decided in the single writer by the
-- in-memory roll, rebuilt from these rows at start; a random-keyed index
-- would write one random page per vote.
CREATE TABLE voting_marks (
    election_id INTEGER NOT NULL,
    voter_id INTEGER NOT NULL
);
-- Marks since the last round (appended by votes: cheap, but in time order;
-- emptied by every round).
CREATE TABLE voting_marks_pending (election_id INTEGER NOT NULL, voter_id INTEGER NOT NULL);
-- Ballots not yet published (a few thousand rows at most), appended: its
-- rows are in arrival order until the round deletes them (secure_delete
-- zeroes them), no more than the pending marks beside them; a random key
-- would write a random page per vote. Receipts are checked by their MAC
-- (receipt.rs), so no index by id.
CREATE TABLE voting_ballot_box (
    ballot_id BLOB NOT NULL,
    election_id INTEGER NOT NULL,
    district_id INTEGER NOT NULL,
    party_id INTEGER NOT NULL,
    candidate_ids TEXT NOT NULL
);
-- Published ballots: no voter, position = their BallotCast event. Appended
-- by rounds, each round in ballot-id order: the order says in which round,
-- never when within it.
CREATE TABLE voting_ballots (
    ballot_id BLOB NOT NULL,
    election_id INTEGER NOT NULL,
    district_id INTEGER NOT NULL,
    party_id INTEGER NOT NULL,
    candidate_ids TEXT NOT NULL,
    round INTEGER NOT NULL,
    position INTEGER NOT NULL
);
CREATE TABLE voting_rounds (
    election_id INTEGER NOT NULL,
    round INTEGER NOT NULL,
    ballots INTEGER NOT NULL,
    published_at_ms INTEGER NOT NULL,
    -- The round's last BallotCast position (a receipt gone from the box is
    -- counted once the tallies reach its election's last round).
    last_position INTEGER NOT NULL,
    PRIMARY KEY (election_id, round)
) WITHOUT ROWID;
-- The projection of BallotCast events: candidate_id 0 is the party's row.
CREATE TABLE voting_tallies (
    election_id INTEGER NOT NULL,
    district_id INTEGER NOT NULL,
    party_id INTEGER NOT NULL,
    candidate_id INTEGER NOT NULL,
    votes INTEGER NOT NULL,
    PRIMARY KEY (election_id, district_id, party_id, candidate_id)
) WITHOUT ROWID;
