-- An election authority's own elections: a lifecycle (draft, open,
-- suspended, closed, tallied, published), whether results are shown live,
-- the roll's version (nodes reload an election's roll when it changes),
-- codes for districts and parties as the definition names them, a party's
-- colour, and each voter's id as the roll gives it with the keyed hash of
-- their credential. Elections made before keep voting as they did: open,
-- results live.
ALTER TABLE voting_elections ADD COLUMN state TEXT NOT NULL DEFAULT 'open';
ALTER TABLE voting_elections ADD COLUMN live_results BOOLEAN NOT NULL DEFAULT TRUE;
ALTER TABLE voting_elections ADD COLUMN roll_version BIGINT NOT NULL DEFAULT 0;
ALTER TABLE voting_districts ADD COLUMN code TEXT;
ALTER TABLE voting_parties ADD COLUMN code TEXT;
ALTER TABLE voting_parties ADD COLUMN color TEXT;
-- `voter_id` is the voter's number on `voting_voters` (1..N in the roll's
-- order); `credential_hash` an HMAC-SHA256 under a key kept outside the
-- database, so this table alone gives nothing to guess offline.
CREATE TABLE voting_credentials (
    election_id BIGINT NOT NULL,
    voter_ref TEXT NOT NULL,
    voter_id BIGINT NOT NULL,
    credential_hash BYTEA NOT NULL,
    PRIMARY KEY (election_id, voter_ref)
);
