//! Voting storage: the operations the service needs ([`VotingStore`]),
//! implemented once per dialect (`sqlite.rs`, `postgres.rs`) and chosen
//! once, from the [`Store`], by [`open`]. The service's state, handlers,
//! seeds and workers hold an `Arc<dyn VotingStore>` and never ask which
//! store it is: what differs between stores (who decides a vote, settling,
//! a round's size, vacuuming the box, bulk seeding) is a method here.
//!
//! A vote is one write: the voter's mark (keyed by voter) and the ballot in
//! the ballot box (keyed by its receipt's tag, the choice sealed; no voter).
//! On PostgreSQL the mark's primary key decides one vote per voter across
//! nodes (`INSERT .. ON CONFLICT DO NOTHING`, the box insert fed by its
//! `RETURNING`); on SQLite the roll's voted bit decides in the writer, and
//! a vote writes into two small tables that the mixer empties every
//! interval ([`VotingStore::settle`]): the ballot into
//! `voting_ballot_intake` (moved into the box) and the mark into
//! `voting_marks` (folded into `voting_marks_bits`, one bit per voter). So
//! a vote's commit touches a few pages of tables that stay in the writer's
//! cache, not random pages of the box and of a B-tree of every voter.
//! Ballots leave the box only in the mixer's rounds ([`publish_round`]), a
//! district at a time once it holds the mix minimum, which is what keeps
//! them apart from the roll.
//!
//! SQL that is the same in both dialects is written once below ([`sql`]),
//! with SQLite's placeholders (`?1`, turned into `$1` for PostgreSQL by
//! [`crate::store::pg_placeholders`]); rows of one shape are mapped once
//! ([`Columns`]).

pub mod postgres;
pub mod sqlite;

use std::sync::Arc;

use futures::future::BoxFuture;
use indicatif::ProgressBar;

use super::model::{ballot_stream, ElectionRows, EVENT_BALLOT_CAST};
use super::receipt::{ReceiptKey, RECEIPT_BYTES};
use super::roll::Roll;
use super::seed::SeedVotingArgs;
use crate::store::{Columns, NewEvent, Store, StoreError};

pub use postgres::PG_ROUND_BALLOTS_MAX;

/// What a vote command did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum VoteOutcome {
    Cast,
    AlreadyVoted,
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

/// Marks one settle folds at most (the first settle of a database whose
/// marks were all kept by voter may find millions); the mixer settles again
/// at once.
pub const FOLD_MARKS_MAX: i64 = 100_000;

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
    /// ([`VotingStore::round_ballots_max`]): the next round should run at
    /// once.
    pub more_waiting: bool,
}

/// A tally key: (election, district, party, candidate; 0 = the party).
pub type TallyKey = (i64, i64, i64, i64);

/// The projector's position and every tally.
pub type Tallies = (i64, Vec<(TallyKey, i64)>);

/// The voting service's storage. Every method is one operation of the
/// service; a write is one command of the store's group commit unless said
/// otherwise.
pub trait VotingStore: Send + Sync {
    /// The static tables of every election.
    fn election_rows(&self) -> BoxFuture<'_, Result<ElectionRows, StoreError>>;

    /// Loads an election's roll; `district_ids` are the election's districts
    /// in id order (a voter's slot is the index of its district).
    fn load_roll(
        &self,
        election_id: i64,
        district_ids: Vec<i64>,
    ) -> BoxFuture<'_, anyhow::Result<Roll>>;

    /// Sets the voted bit of everyone who voted in the election; how many.
    /// Where the roll decides votes (SQLite) this runs in the writer, so no
    /// vote can commit between the read and the bits.
    fn mark_voted(
        &self,
        election_id: i64,
        roll: Arc<Roll>,
    ) -> BoxFuture<'_, Result<usize, StoreError>>;

    /// Moves what votes wrote since the last settle to where rounds and the
    /// roll read it, in one write: on SQLite the election's ballots from
    /// `voting_ballot_intake` into `voting_ballot_box`, and up to
    /// [`FOLD_MARKS_MAX`] of its marks from `voting_marks` into the bits of
    /// `voting_marks_bits`; the moved rows are deleted (zeroed:
    /// `secure_delete`). Nothing is written when nothing waits. PostgreSQL
    /// writes votes straight into the box and keeps marks keyed by voter
    /// (their primary key decides one vote per voter across nodes): nothing
    /// to settle.
    fn settle(&self, election_id: i64) -> BoxFuture<'_, Result<Settled, StoreError>>;

    /// Records that `voter_id` voted and puts the sealed ballot into the
    /// box, in one transaction; nothing joins the two rows but that
    /// transaction. On SQLite `roll`'s voted bit decides, in the writer (and
    /// is released if the write fails); on PostgreSQL the mark's primary
    /// key decides, and `roll` remembers the answer.
    fn cast<'a>(
        &'a self,
        roll: &'a Arc<Roll>,
        voter_id: i64,
        ballot: BoxedBallot,
    ) -> BoxFuture<'a, Result<VoteOutcome, StoreError>>;

    /// Where the ballot of the receipt with this tag is, if it exists in
    /// `election_id`: in the box, or published by a round no later than
    /// the election's last (whose last event position is given). A receipt
    /// this server `minted` whose tag is not in the box was published: the
    /// box loses a ballot only in the round that publishes it. Receipts
    /// minted without a check are found in `voting_receipts_counted` once
    /// published. Read in one snapshot (see [`receipt_state`]).
    fn receipt(
        &self,
        election_id: i64,
        tag: [u8; RECEIPT_BYTES],
        minted: bool,
    ) -> BoxFuture<'_, Result<Option<ReceiptState>, StoreError>>;

    /// Re-keys what the schema before receipt tags left (see the migration
    /// `0012_voting_secrecy.sql`): boxed ballots are sealed under their
    /// receipt's tag, published ballots' receipts become counted tags, and
    /// the old tables are dropped (their pages zeroed on SQLite); the boxed
    /// ballots adopted.
    fn adopt_legacy<'a>(
        &'a self,
        keys: &'a Arc<ReceiptKey>,
    ) -> BoxFuture<'a, Result<usize, StoreError>>;

    /// The districts whose box holds at least `min` ballots, with their
    /// counts, in district order; read apart from the writer.
    fn due_districts(
        &self,
        election_id: i64,
        min: i64,
    ) -> BoxFuture<'_, Result<Vec<(i64, i64)>, StoreError>>;

    /// Ballots one round takes at most (whole districts; one district
    /// fuller than this is taken whole); `None`: every due district.
    fn round_ballots_max(&self) -> Option<i64>;

    /// Publishes `districts`' boxes as one round: in one transaction their
    /// ballots move (opened, in the order of their random tags) to
    /// `voting_ballots` with one `BallotCast` event each (without their
    /// tags), and their box rows are deleted (zeroed on SQLite:
    /// `secure_delete`).
    fn round<'a>(
        &'a self,
        keys: &'a Arc<ReceiptKey>,
        election_id: i64,
        districts: Vec<i64>,
    ) -> BoxFuture<'a, Result<Round, StoreError>>;

    /// After a round that published ballots: clears the deleted box rows
    /// out of the table's pages where deleting leaves them (PostgreSQL's
    /// `VACUUM`; SQLite zeroed them as it deleted).
    fn vacuum_box(&self) -> BoxFuture<'_, Result<(), StoreError>>;

    /// Demo only: marks `voters` as voted and publishes `boxed` (in tag
    /// order) as one round, as if the mixer had.
    fn publish_seeded(
        &self,
        election_id: i64,
        voters: Vec<i64>,
        boxed: Vec<Boxed>,
    ) -> BoxFuture<'_, Result<(), StoreError>>;

    /// Replaces the election `args` names with a new one and its roll, in
    /// bulk (`seed.rs`: inserts in key order on SQLite, `COPY` on
    /// PostgreSQL).
    fn seed_election<'a>(
        &'a self,
        args: &'a SeedVotingArgs,
        opens: i64,
        closes: i64,
        bar: &'a ProgressBar,
    ) -> BoxFuture<'a, anyhow::Result<()>>;

    /// Adds `deltas` to the tallies and saves the projector's position, in
    /// one transaction, only while `owner` holds the consumer's lease;
    /// `false` when the lease was lost (nothing written).
    fn tally_step(
        &self,
        consumer: &'static str,
        owner: Arc<str>,
        position: i64,
        lease_ms: i64,
        deltas: Arc<Vec<(TallyKey, i64)>>,
    ) -> BoxFuture<'_, Result<bool, StoreError>>;

    /// The tallies and the projector's position, read in one statement (one
    /// snapshot in both dialects).
    fn read_tallies(&self, consumer: &'static str) -> BoxFuture<'_, Result<Tallies, StoreError>>;
}

/// The voting storage of `store`.
pub fn open(store: &Store) -> Arc<dyn VotingStore> {
    store.choose(
        |s| Arc::new(sqlite::SqliteVoting::new(s.clone())) as Arc<dyn VotingStore>,
        |p| Arc::new(postgres::PgVoting::new(p.clone())) as Arc<dyn VotingStore>,
    )
}

/// SQL the same in both dialects.
pub mod sql {
    pub const ELECTIONS: &str =
        "SELECT id, name, opens_at_ms, closes_at_ms, candidates_per_vote_max FROM voting_elections";
    pub const DISTRICTS: &str = "SELECT election_id, district_id, name FROM voting_districts";
    pub const PARTIES: &str = "SELECT election_id, party_id, name, short_name FROM voting_parties";
    pub const CANDIDATES: &str =
        "SELECT election_id, candidate_id, district_id, party_id, list_position, name
                              FROM voting_candidates";
    pub const ROLL_RANGE: &str =
        "SELECT MIN(voter_id), MAX(voter_id), COUNT(*) FROM voting_voters WHERE election_id = ?1";
    pub const ROLL: &str = "SELECT voter_id, district_id FROM voting_voters WHERE election_id = ?1";
    pub const MARKS: &str = "SELECT voter_id FROM voting_marks WHERE election_id = ?1";
    /// The box: scanned on SQLite (keyed by district first; it holds the
    /// ballots of rounds not yet due), a key lookup on PostgreSQL.
    pub const BOXED: &str =
        "SELECT COUNT(*) FROM voting_ballot_box WHERE election_id = ?1 AND receipt_tag = ?2";
    pub const COUNTED: &str = "SELECT COUNT(*) FROM voting_receipts_counted
                           WHERE election_id = ?1 AND receipt_tag = ?2";
    pub const LAST: &str =
        "SELECT COALESCE(MAX(last_position), 0) FROM voting_rounds WHERE election_id = ?1";
    pub const LEGACY_BOX: &str =
        "SELECT ballot_id, election_id, district_id, party_id, candidate_ids
                       FROM voting_ballot_box_legacy";
    pub const LEGACY_IDS: &str = "SELECT election_id, ballot_id FROM voting_receipts_legacy";
    pub const DUE: &str =
        "SELECT district_id, COUNT(*) FROM voting_ballot_box WHERE election_id = ?1
                       GROUP BY district_id HAVING COUNT(*) >= ?2 ORDER BY district_id";
    pub const SAVE_TALLY_POSITION: &str =
        "UPDATE consumer_positions SET position = ?3, lease_until_ms = ?4
                         WHERE consumer = ?1 AND lease_owner = ?2";
}

// ---------------------------------------------------------------- rows

/// (id, name, opens_at_ms, closes_at_ms, candidates_per_vote_max) of
/// `voting_elections`.
pub fn election_row(r: &impl Columns) -> Result<(i64, String, i64, i64, i64), StoreError> {
    Ok((r.int(0)?, r.text(1)?, r.int(2)?, r.int(3)?, r.int(4)?))
}

/// (election_id, district_id, name) of `voting_districts`.
pub fn district_row(r: &impl Columns) -> Result<(i64, i64, String), StoreError> {
    Ok((r.int(0)?, r.int(1)?, r.text(2)?))
}

/// (election_id, party_id, name, short_name) of `voting_parties`.
pub fn party_row(r: &impl Columns) -> Result<(i64, i64, String, String), StoreError> {
    Ok((r.int(0)?, r.int(1)?, r.text(2)?, r.text(3)?))
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

/// A row of [`sql::ROLL_RANGE`]: lowest and highest voter id (none on an
/// empty roll), voters.
fn roll_range_row(r: &impl Columns) -> Result<(Option<i64>, Option<i64>, i64), StoreError> {
    Ok((r.opt_int(0)?, r.opt_int(1)?, r.int(2)?))
}

/// A row of [`sql::LEGACY_BOX`].
fn legacy_box_row(r: &impl Columns) -> Result<(Vec<u8>, i64, i64, i64, String), StoreError> {
    Ok((r.bytes(0)?, r.int(1)?, r.int(2)?, r.int(3)?, r.text(4)?))
}

/// A row of [`sql::LEGACY_IDS`].
fn legacy_id_row(r: &impl Columns) -> Result<(i64, Vec<u8>), StoreError> {
    Ok((r.int(0)?, r.bytes(1)?))
}

/// A row of the tallies' read: key and votes (the position's row has
/// election -1).
fn tally_row(r: &impl Columns) -> Result<(TallyKey, i64), StoreError> {
    Ok(((r.int(0)?, r.int(1)?, r.int(2)?, r.int(3)?), r.int(4)?))
}

/// The projector's position (the row of election -1) and the tallies.
fn split_tallies(rows: Vec<(TallyKey, i64)>) -> Tallies {
    let position = rows.iter().find(|r| r.0 .0 == -1).map(|r| r.1).unwrap_or(0);
    (
        position,
        rows.into_iter().filter(|r| r.0 .0 != -1).collect(),
    )
}

/// A voter's slot in its election's roll: the index of its district among
/// the election's `district_ids` (in id order).
fn roll_slot(district_ids: &[i64], district_id: i64) -> Option<u16> {
    district_ids
        .binary_search(&district_id)
        .ok()
        .map(|i| i as u16)
}

/// What a receipt's reads say: ballots in the box (and the intake) under
/// its tag, counted tags, the election's last round position.
pub fn receipt_state(
    minted: bool,
    (boxed, counted, last): (i64, i64, i64),
) -> Option<ReceiptState> {
    if boxed > 0 {
        Some(ReceiptState::Boxed)
    } else if (minted && last > 0) || counted > 0 {
        Some(ReceiptState::Published { position: last })
    } else {
        None
    }
}

fn tag_of(keys: &ReceiptKey, e: i64, id: &[u8]) -> Option<[u8; RECEIPT_BYTES]> {
    Some(keys.tag(e, &<[u8; RECEIPT_BYTES]>::try_from(id).ok()?))
}

// ---------------------------------------------------------------- rounds

/// A ballot's choice as sealed in the box: `party|[candidates]`.
pub fn choice(party_id: i64, candidates_json: &str) -> String {
    format!("{party_id}|{candidates_json}")
}

/// One ballot taken out of the box and opened.
pub struct Boxed {
    tag: Vec<u8>,
    district_id: i64,
    party_id: i64,
    candidates_json: String,
}

impl Boxed {
    fn open(
        keys: &ReceiptKey,
        election_id: i64,
        district_id: i64,
        tag: Vec<u8>,
        sealed: &[u8],
    ) -> Result<Boxed, StoreError> {
        let unreadable = || {
            StoreError::Internal(format!(
                "a ballot in the box of election {election_id} does not open with this node's \
                 voting receipt key"
            ))
        };
        let plain = keys
            .open(election_id, district_id, &tag, sealed)
            .ok_or_else(unreadable)?;
        let text = String::from_utf8(plain).map_err(|_| unreadable())?;
        let (party, candidates) = text.split_once('|').ok_or_else(unreadable)?;
        Ok(Boxed {
            party_id: party.parse().map_err(|_| unreadable())?,
            candidates_json: candidates.to_string(),
            tag,
            district_id,
        })
    }
}

fn ballot_event(election_id: i64, round: i64, b: &Boxed) -> NewEvent {
    // `candidates_json` is this service's own array of integers. No
    // receipt-derived value: a published ballot links to no receipt.
    let payload = format!(
        r#"{{"electionId":{election_id},"districtId":{},"partyId":{},"candidateIds":{},"round":{round}}}"#,
        b.district_id, b.party_id, b.candidates_json
    );
    NewEvent::json_bytes(
        ballot_stream(election_id),
        EVENT_BALLOT_CAST,
        payload.into_bytes(),
    )
}

/// Publishes, as one round, every district of the election whose box holds
/// at least `min` ballots (whole districts up to
/// [`VotingStore::round_ballots_max`] ballots, where a round is bounded):
/// see [`VotingStore::round`]. A district with fewer than `min` stays in
/// the box: nothing about it moves.
pub async fn publish_round(
    storage: &dyn VotingStore,
    keys: &Arc<ReceiptKey>,
    election_id: i64,
    min: i64,
) -> Result<Round, StoreError> {
    // Which districts are due, read apart from the writer (counts only grow
    // between this read and the round: the mixer alone takes ballots out).
    let due = storage.due_districts(election_id, min).await?;
    if due.is_empty() {
        return Ok(Round::default());
    }
    let take = round_districts(&due, storage.round_ballots_max());
    let taken = take.len();
    let mut round = storage.round(keys, election_id, take).await?;
    round.more_waiting = taken < due.len();
    if round.published > 0 {
        // Dead box rows keep their data (on PostgreSQL with the xmin of the
        // vote's transaction, shared with its mark) until vacuumed.
        storage.vacuum_box().await?;
    }
    Ok(round)
}

/// The due districts one round takes: whole districts, up to `max` ballots
/// (at least one district); every one without a bound.
fn round_districts(due: &[(i64, i64)], max: Option<i64>) -> Vec<i64> {
    let Some(max) = max else {
        return due.iter().map(|(d, _)| *d).collect();
    };
    let mut take = Vec::new();
    let mut n = 0;
    for (d, count) in due {
        if !take.is_empty() && n + count > max {
            break;
        }
        take.push(*d);
        n += count;
    }
    take
}

/// Demo only: marks `ballots`' voters as voted and publishes their ballots
/// as one round, as if the mixer had (no receipts: nobody holds one).
pub async fn seed_published(
    storage: &dyn VotingStore,
    election_id: i64,
    ballots: Vec<(i64, i64, i64, String)>,
) -> Result<(), StoreError> {
    let mut boxed: Vec<Boxed> = ballots
        .iter()
        .map(|(_, d, p, c)| {
            let mut tag = vec![0u8; RECEIPT_BYTES];
            rand::RngCore::fill_bytes(&mut rand::thread_rng(), &mut tag);
            Boxed {
                tag,
                district_id: *d,
                party_id: *p,
                candidates_json: c.clone(),
            }
        })
        .collect();
    boxed.sort_by(|a, b| a.tag.cmp(&b.tag));
    let voters: Vec<i64> = ballots.iter().map(|b| b.0).collect();
    storage.publish_seeded(election_id, voters, boxed).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bounded_round_takes_whole_districts() {
        let due = [(1, 1500), (2, 400), (3, 300), (4, 10)];
        assert_eq!(round_districts(&due, None), [1, 2, 3, 4]);
        assert_eq!(round_districts(&due, Some(2000)), [1, 2]);
        assert_eq!(round_districts(&due, Some(100)), [1], "one at least");
    }

    #[test]
    fn shared_sql_takes_postgres_placeholders() {
        assert_eq!(
            crate::store::pg_placeholders(sql::DUE),
            "SELECT district_id, COUNT(*) FROM voting_ballot_box WHERE election_id = $1
                       GROUP BY district_id HAVING COUNT(*) >= $2 ORDER BY district_id"
        );
    }

    #[test]
    fn receipts_answer_from_box_counted_tags_and_rounds() {
        assert_eq!(receipt_state(true, (1, 0, 9)), Some(ReceiptState::Boxed));
        assert_eq!(
            receipt_state(true, (0, 0, 9)),
            Some(ReceiptState::Published { position: 9 })
        );
        assert_eq!(receipt_state(true, (0, 0, 0)), None);
        assert_eq!(receipt_state(false, (0, 0, 9)), None);
        assert_eq!(
            receipt_state(false, (0, 1, 9)),
            Some(ReceiptState::Published { position: 9 })
        );
    }
}
