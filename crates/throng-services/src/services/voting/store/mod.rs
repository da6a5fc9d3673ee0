//! Voting storage: every operation written once against the store's seam
//! ([`crate::store::seam`]) as a method of [`VotingStore`], by topic:
//! `catalog.rs` (elections, the roll, who voted), `votes.rs` (a vote,
//! settling), `receipts.rs`, `rounds.rs` (the mixer's rounds), `tallies.rs`;
//! `seed.rs` loads a seed in bulk.
//!
//! A vote is one write: the voter's mark (keyed by voter) and the ballot in
//! the ballot box (keyed by its receipt's tag, the choice sealed; no voter).
//! Ballots leave the box only in the mixer's rounds
//! ([`VotingStore::publish_round`]), a district at a time once it holds the
//! mix minimum, which is what keeps them apart from the roll.
//!
//! Two designs differ between one writer process (SQLite) and writers
//! shared by nodes (PostgreSQL), each a named strategy chosen once from
//! [`Store::writers`] when the storage is opened:
//! - [`Votes`]: who decides one vote per voter and where a vote's rows go
//!   (the roll in memory, with small tables settled by the mixer; or the
//!   marks' primary key, straight into the box);
//! - [`Rounds`]: how a round runs (a command of the writer taking every due
//!   district, a statement a row; or a transaction of its own, bounded,
//!   set-based, `VACUUM` after).

mod authority;
mod catalog;
mod receipts;
mod rounds;
mod seed;
mod tallies;
mod votes;

use std::sync::Arc;

use super::model::{ElectionRow, ElectionState, PartyRow};
use super::receipt::RECEIPT_BYTES;
use crate::store::{Columns, Store, StoreError, Writers};

pub use authority::{election_event, RollRows, StepRefused};
pub use rounds::{Rounds, PG_ROUND_BALLOTS_MAX};
pub use seed::seed_election;
pub use votes::{Votes, FOLD_MARKS_MAX};

/// The voting service's storage: the store and the designs chosen for it.
/// Every method is one operation of the service; a write is one command of
/// the store's group commit unless said otherwise.
pub struct VotingStore {
    store: Store,
    votes: Votes,
    rounds: Rounds,
}

impl VotingStore {
    /// The voting storage of `store`, its designs chosen by how its writes
    /// are made.
    pub fn open(store: &Store) -> Arc<VotingStore> {
        let (votes, rounds) = match store.writers() {
            Writers::OneProcess => (Votes::RollDecides, Rounds::InWriter),
            Writers::Shared => (
                Votes::MarksKeyDecides,
                Rounds::OwnTransaction {
                    ballots_max: PG_ROUND_BALLOTS_MAX,
                },
            ),
        };
        Arc::new(VotingStore {
            store: store.clone(),
            votes,
            rounds,
        })
    }
}

/// What a vote command did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum VoteOutcome {
    Cast,
    AlreadyVoted,
    /// The election's row says it takes no votes now (not open, or outside
    /// its times by the store's clock): nothing written.
    NotTakingVotes,
}

/// A ballot for the box: its receipt's tag and its sealed choice.
#[derive(Clone, Debug)]
pub struct BoxedBallot {
    pub election_id: i64,
    pub district_id: i64,
    pub tag: [u8; RECEIPT_BYTES],
    pub sealed: Vec<u8>,
}

/// Where a receipt's ballot is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReceiptState {
    /// In the box, not yet published.
    Boxed,
    /// Published by a round no later than the one ending at this event
    /// position.
    Published { position: i64 },
}

/// What one settle moved.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Settled {
    pub ballots: usize,
    pub marks: usize,
}

/// What one round did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Round {
    /// Ballots published (0: no district's box held `min`).
    pub published: usize,
    /// Districts published.
    pub districts: usize,
    /// More districts were due than one round may take
    /// ([`Rounds::ballots_max`]): the next round should run at once.
    pub more_waiting: bool,
}

/// A tally key: (election, district, party, candidate; 0 = the party).
pub type TallyKey = (i64, i64, i64, i64);

/// The projector's position and every tally.
pub type Tallies = (i64, Vec<(TallyKey, i64)>);

/// A ballot's choice as sealed in the box: `party|[candidates]`.
pub fn choice(party_id: i64, candidates_json: &str) -> String {
    format!("{party_id}|{candidates_json}")
}

// ---------------------------------------------------------------- rows

/// A row of `voting_elections` as [`ELECTION_COLUMNS`] select it.
pub fn election_row(r: &impl Columns) -> Result<ElectionRow, StoreError> {
    let state = r.text(5)?;
    Ok(ElectionRow {
        id: r.int(0)?,
        name: r.text(1)?,
        opens_at_ms: r.int(2)?,
        closes_at_ms: r.int(3)?,
        candidates_per_vote_max: r.int(4)?,
        state: ElectionState::parse(&state)
            .ok_or_else(|| StoreError::Internal(format!("election state {state:?}")))?,
        live_results: r.col::<bool>(6)?,
        roll_version: r.int(7)?,
    })
}

/// (election_id, district_id, name, code) of `voting_districts`.
pub fn district_row(r: &impl Columns) -> Result<(i64, i64, String, Option<String>), StoreError> {
    Ok((
        r.int(0)?,
        r.int(1)?,
        r.text(2)?,
        r.col::<Option<String>>(3)?,
    ))
}

/// A row of `voting_parties` (see [`PartyRow`]).
pub fn party_row(r: &impl Columns) -> Result<PartyRow, StoreError> {
    Ok((
        r.int(0)?,
        r.int(1)?,
        r.text(2)?,
        r.text(3)?,
        r.col::<Option<String>>(4)?,
        r.col::<Option<String>>(5)?,
    ))
}

/// (election_id, candidate_id, district_id, party_id, list_position, name)
/// of `voting_candidates`.
pub fn candidate_row(r: &impl Columns) -> Result<(i64, i64, i64, i64, i32, String), StoreError> {
    let position = r.int(4)?;
    let position = i32::try_from(position)
        .map_err(|_| StoreError::Internal(format!("list_position {position}: out of range")))?;
    Ok((
        r.int(0)?,
        r.int(1)?,
        r.int(2)?,
        r.int(3)?,
        position,
        r.text(5)?,
    ))
}

/// Two integers.
pub fn int_pair(r: &impl Columns) -> Result<(i64, i64), StoreError> {
    Ok((r.int(0)?, r.int(1)?))
}

/// Three integers.
fn int_triple(r: &impl Columns) -> Result<(i64, i64, i64), StoreError> {
    Ok((r.int(0)?, r.int(1)?, r.int(2)?))
}
