//! Voting storage: every operation written once against the store's seam
//! ([`crate::store::seam`]) as a method of [`VotingStore`], by topic:
//! `catalog.rs` (elections, the roll, who voted), `votes.rs` (a vote,
//! folding marks), `board.rs` (the public board's periods, the box's
//! export, the trustees' results), `authority.rs` (definition, roll,
//! lifecycle); `seed.rs` loads a seed in bulk.
//!
//! A vote is one write: the voter's mark and the sealed ballot (with its
//! tracker; no voter), into the ballot box and `voting_marks` keyed by
//! voter where writers are shared, or into SQLite's intake and marks keyed
//! by the writer's batch first (see [`Votes`]). The server
//! cannot open a sealed ballot (see `ballot.rs`); the board's periods give
//! box rows their period, and the box is exported whole after the close.
//!
//! Where the designs differ between one writer process (SQLite) and
//! writers shared by nodes (PostgreSQL), [`Votes`] names the strategy,
//! chosen once from [`Store::writers`] when the storage is opened: who
//! decides one vote per voter and where a vote's rows wait for the board's
//! next period (the roll in memory, with small tables the period empties;
//! or the marks' primary key, straight into the box without a period).

mod authority;
mod board;
mod catalog;
mod seed;
mod votes;
mod waiting;

use std::sync::Arc;

use super::ballot::Tracker;
use super::model::{DistrictRow, ElectionRow, ElectionState, PartyRow};
use crate::store::{Columns, Store, StoreError, Writers};

pub use authority::{election_event, RollRows, StepRefused};
pub use board::{BoardDistrict, BoxRows, Period};
pub use seed::seed_election;
pub use votes::{Votes, FOLD_MARKS_MAX};

/// The voting service's storage: the store and the designs chosen for it.
/// Every method is one operation of the service; a write is one command of
/// the store's group commit unless said otherwise.
pub struct VotingStore {
    store: Store,
    votes: Votes,
    /// What waits in SQLite's intake, for the copy check
    /// ([`Votes::RollDecides`]).
    waiting: Arc<waiting::WaitingTrackers>,
}

impl VotingStore {
    /// The voting storage of `store`, its designs chosen by how its writes
    /// are made.
    pub fn open(store: &Store) -> Arc<VotingStore> {
        let votes = match store.writers() {
            Writers::OneProcess => Votes::RollDecides,
            Writers::Shared => Votes::MarksKeyDecides,
        };
        Arc::new(VotingStore {
            store: store.clone(),
            votes,
            waiting: Arc::default(),
        })
    }
}

/// What a vote command did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum VoteOutcome {
    Cast,
    AlreadyVoted,
    /// A ballot with the same tracker was cast already (a copy of
    /// someone's sealed ballot): nothing written.
    CopiedBallot,
    /// The election's row says it takes no votes now (not open, or outside
    /// its times by the store's clock): nothing written.
    NotTakingVotes,
}

/// A ballot for the box: its tracker and its sealed bytes, as the
/// voter's browser sealed them.
#[derive(Clone, Debug)]
pub struct BoxedBallot {
    pub election_id: i64,
    pub district_id: i64,
    pub tag: Tracker,
    pub sealed: Vec<u8>,
}

/// What one settle moved.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Settled {
    pub marks: usize,
}

/// A tally key: (election, district, party, candidate; 0 = the party).
pub type TallyKey = (i64, i64, i64, i64);

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
        roll_version: r.int(6)?,
        public_key: r.col::<Option<Vec<u8>>>(7)?,
        board_period: r.int(8)?,
        board_final: r.col::<bool>(9)?,
    })
}

/// The columns [`election_row`] reads, in its order.
#[macro_export]
macro_rules! voting_election_columns {
    () => {
        "id, name, opens_at_ms, closes_at_ms, candidates_per_vote_max, state, roll_version,
         public_key, board_period, board_final"
    };
}

/// (election_id, district_id, name, code, region) of `voting_districts`.
pub fn district_row(r: &impl Columns) -> Result<DistrictRow, StoreError> {
    Ok((
        r.int(0)?,
        r.int(1)?,
        r.text(2)?,
        r.col::<Option<String>>(3)?,
        r.col::<Option<String>>(4)?,
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
