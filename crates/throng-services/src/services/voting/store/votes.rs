//! A vote, and what settles it: the design that differs most between one
//! writer process and shared writers ([`Votes`]).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use super::super::roll::Roll;
use super::authority::{CAST_WHILE_OPEN, TAKES_VOTES};
use super::waiting::{Prefixes, WaitingTrackers};
use super::{BoxedBallot, Settled, VoteOutcome, VotingStore};
use crate::store::{Columns, Sql, Store, StoreError, Tx};

/// Who decides one vote per voter, and where a vote's rows go. Chosen once
/// from the store's writers ([`VotingStore::open`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Votes {
    /// One process makes every write (SQLite): the roll's voted bit decides,
    /// set in the writer (and cleared if the write fails), as booking's
    /// availability index decides slots. A vote writes into two small
    /// tables that the mixer empties every interval
    /// ([`VotingStore::settle`]): the ballot into `voting_ballot_intake`
    /// (moved into the box) and the mark into `voting_marks` (folded into
    /// `voting_marks_bits`, one bit per voter), both keyed by the writer's
    /// batch first. So a batch's commit writes a few pages at the end of
    /// each table, not a random page of the box, of a B-tree of every voter
    /// or of the intake per vote. Copies among waiting ballots are found
    /// through their trackers' prefixes in memory (`store/waiting.rs`).
    RollDecides,
    /// Writers are shared by nodes (PostgreSQL): the mark's primary key
    /// decides one vote per voter across nodes (`INSERT .. ON CONFLICT DO
    /// NOTHING`, the box insert fed by its `RETURNING`), and the vote goes
    /// straight into the box (nothing to settle). The roll only remembers
    /// answers this node saw, so a repeat is answered without a round trip.
    MarksKeyDecides,
}

/// Marks one settle folds at most (the first settle of a database whose
/// marks were all kept by voter may find millions); the mixer settles again
/// at once.
pub const FOLD_MARKS_MAX: i64 = 100_000;

/// Voters one row of `voting_marks_bits` holds (512 bytes of bits: a row
/// fits in one page of a table without rowid).
const MARK_BITS_VOTERS: i64 = 4096;

fn mark_bits_row(voter_id: i64) -> (i64, usize) {
    (
        voter_id.div_euclid(MARK_BITS_VOTERS),
        voter_id.rem_euclid(MARK_BITS_VOTERS) as usize,
    )
}

// Both keyed by the writer's batch first (`Tx::writer_batch`): a commit's rows go
// together at the end of each table, in voter and tracker order within the
// batch. Small tables the mixer empties every interval (`settle`).
static INSERT_MARK: Sql =
    Sql::new("INSERT INTO voting_marks (election_id, batch, voter_id) VALUES (?1, ?2, ?3)");
static INSERT_INTAKE: Sql = Sql::new(
    "INSERT INTO voting_ballot_intake (election_id, batch, receipt_tag, district_id, sealed)
     VALUES (?1, ?2, ?3, ?4, ?5)",
);
static WAITING_TRACKERS: Sql =
    Sql::new("SELECT receipt_tag FROM voting_ballot_intake WHERE election_id = ?1");

static MARKS: Sql = Sql::new("SELECT voter_id FROM voting_marks WHERE election_id = ?1");

/// Whether a ballot with this tracker was cast already: waiting for the
/// board's period (SQLite's intake: a scan of the election's rows, run
/// only when the tracker's prefix is among the waiting ones, see
/// [`super::waiting`]) or in the box (PostgreSQL's box is keyed by the
/// tracker alone).
static COPY_WAITING: Sql = Sql::new(
    "SELECT COUNT(*) FROM voting_ballot_intake WHERE election_id = ?1 AND receipt_tag = ?2",
);
static COPY_IN_BOX: Sql = Sql::per_dialect(
    "SELECT COUNT(*) FROM voting_ballot_box
      WHERE election_id = ?1 AND district_id = ?3 AND receipt_tag = ?2",
    "SELECT COUNT(*) FROM voting_ballot_box WHERE receipt_tag = $2 AND $1::BIGINT IS NOT NULL
        AND $3::BIGINT IS NOT NULL",
);
static MARK_BITS_ALL: Sql =
    Sql::new("SELECT chunk, bits FROM voting_marks_bits WHERE election_id = ?1");

static WAITING: Sql = Sql::new("SELECT EXISTS (SELECT 1 FROM voting_marks WHERE election_id = ?1)");
/// In the key's order: by batch, then voter.
static MARKS_TO_FOLD: Sql = Sql::new(
    "SELECT batch, voter_id FROM voting_marks WHERE election_id = ?1
      ORDER BY batch, voter_id LIMIT ?2",
);
static MARK_BITS: Sql =
    Sql::new("SELECT bits FROM voting_marks_bits WHERE election_id = ?1 AND chunk = ?2");
static WRITE_MARK_BITS: Sql = Sql::new(
    "INSERT OR REPLACE INTO voting_marks_bits (election_id, chunk, bits) VALUES (?1, ?2, ?3)",
);
static DELETE_FOLDED: Sql =
    Sql::new("DELETE FROM voting_marks WHERE election_id = ?1 AND (batch, voter_id) <= (?2, ?3)");

impl VotingStore {
    /// Records that `voter_id` voted and puts the sealed ballot into the
    /// box, in one transaction; nothing joins the two rows but that
    /// transaction. Who decides: see [`Votes`].
    pub async fn cast(
        &self,
        roll: &Arc<Roll>,
        voter_id: i64,
        ballot: BoxedBallot,
    ) -> Result<VoteOutcome, StoreError> {
        let ballot = Arc::new(ballot);
        match self.votes {
            Votes::RollDecides => {
                let took = Arc::new(AtomicBool::new(false));
                let (in_writer, took_in_writer) = (roll.clone(), took.clone());
                let waiting = self.waiting.clone();
                // Unguarded (no SAVEPOINT): the vote is decided by the voted
                // bit before any SQL runs, and the two inserts that follow
                // can only fail when the database does, which rolls back the
                // batch; every vote in it then clears its bit below.
                let outcome = self
                    .store
                    .write_unguarded(move |tx| {
                        let (roll, took, b, waiting) = (
                            in_writer.clone(),
                            took_in_writer.clone(),
                            ballot.clone(),
                            waiting.clone(),
                        );
                        Box::pin(async move {
                            cast_in_writer(tx, &roll, &waiting, &took, voter_id, &b).await
                        })
                    })
                    .await;
                if outcome.is_err() && took.load(Ordering::Acquire) {
                    roll.clear(voter_id);
                }
                outcome
            }
            Votes::MarksKeyDecides => {
                let outcome = self
                    .store
                    .write(move |tx| {
                        let b = ballot.clone();
                        Box::pin(async move {
                            // Prepared once per connection: planning the
                            // statement on every vote cost about as much as
                            // running it (as booking's try-register measured).
                            let n = tx
                                .execute(
                                    &CAST_WHILE_OPEN,
                                    &[&b.election_id, &voter_id, &b.tag, &b.district_id, &b.sealed],
                                )
                                .await?;
                            if n == 1 {
                                return Ok(VoteOutcome::Cast);
                            }
                            // Rare: a repeat (mostly answered from memory),
                            // a copied ballot, or an election that stopped
                            // taking votes.
                            let open = tx
                                .query_one(&TAKES_VOTES, &[&b.election_id], |r| r.int(0))
                                .await?;
                            if open == 0 {
                                return Ok(VoteOutcome::NotTakingVotes);
                            }
                            let copies = tx
                                .query_one(
                                    &COPY_IN_BOX,
                                    &[&b.election_id, &b.tag, &b.district_id],
                                    |r| r.int(0),
                                )
                                .await?;
                            Ok(if copies > 0 {
                                VoteOutcome::CopiedBallot
                            } else {
                                VoteOutcome::AlreadyVoted
                            })
                        })
                    })
                    .await?;
                // Remember the answer: a repeat is answered from memory.
                if outcome == VoteOutcome::Cast || outcome == VoteOutcome::AlreadyVoted {
                    roll.test_and_set(voter_id);
                }
                Ok(outcome)
            }
        }
    }

    /// Folds up to [`FOLD_MARKS_MAX`] of the election's marks from
    /// `voting_marks` into the bits of `voting_marks_bits` (see
    /// [`Votes::RollDecides`]), in one write; the folded rows are deleted
    /// (zeroed: `secure_delete`). Nothing is written when nothing waits.
    /// (Ballots wait in the intake for the board's next period.) Where the
    /// marks' key decides, marks stay keyed by voter (their primary key
    /// decides across nodes): nothing to settle.
    /// Reads what waits in SQLite's intake into the copy check of votes
    /// (`store/waiting.rs`), in the writer, so no vote or period runs
    /// between the read and the load; the trackers' count. Nothing where
    /// the marks' key decides (every ballot is in the box).
    pub async fn load_waiting(&self, election_id: i64) -> Result<usize, StoreError> {
        if self.votes == Votes::MarksKeyDecides {
            return Ok(0);
        }
        let waiting = self.waiting.clone();
        self.store
            .write(move |tx| {
                let waiting = waiting.clone();
                Box::pin(async move {
                    let mut prefixes = Vec::new();
                    tx.for_each(&WAITING_TRACKERS, &[&election_id], |r| {
                        prefixes.extend(WaitingTrackers::prefix_of(&r.bytes(0)?));
                        Ok(())
                    })
                    .await?;
                    let n = prefixes.len();
                    waiting.load(election_id, Prefixes::from_unsorted(prefixes));
                    Ok(n)
                })
            })
            .await
    }

    pub async fn settle(&self, election_id: i64) -> Result<Settled, StoreError> {
        if self.votes == Votes::MarksKeyDecides {
            return Ok(Settled::default());
        }
        let waiting = self
            .store
            .read(move |c| {
                Box::pin(async move {
                    c.query_one(&WAITING, &[&election_id], |r| r.col::<bool>(0))
                        .await
                })
            })
            .await?;
        if !waiting {
            return Ok(Settled::default());
        }
        self.store
            .write(move |tx| {
                Box::pin(async move {
                    Ok(Settled {
                        marks: fold_marks(tx, election_id).await?,
                    })
                })
            })
            .await
    }
}

impl Votes {
    /// Sets the voted bit of everyone who voted in the election; how many.
    /// Where the roll decides this runs in the writer, so no vote can
    /// commit between the read and the bits; marks and folded bits both
    /// count. Where the marks' key decides, the marks are streamed on a
    /// read connection.
    pub(super) async fn mark_voted(
        self,
        store: &Store,
        election_id: i64,
        roll: Arc<Roll>,
    ) -> Result<usize, StoreError> {
        match self {
            Votes::RollDecides => {
                store
                    .write(move |tx| {
                        let roll = roll.clone();
                        Box::pin(async move {
                            let mut n = 0;
                            tx.for_each(&MARKS, &[&election_id], |r| {
                                roll.test_and_set(r.int(0)?);
                                n += 1;
                                Ok(())
                            })
                            .await?;
                            tx.for_each(&MARK_BITS_ALL, &[&election_id], |r| {
                                let (chunk, bits) = (r.int(0)?, r.bytes(1)?);
                                for (byte_at, byte) in bits.iter().enumerate() {
                                    for bit in 0..8 {
                                        if byte & (1 << bit) != 0 {
                                            let voter = chunk * MARK_BITS_VOTERS
                                                + (byte_at * 8 + bit) as i64;
                                            roll.test_and_set(voter);
                                            n += 1;
                                        }
                                    }
                                }
                                Ok(())
                            })
                            .await?;
                            Ok(n)
                        })
                    })
                    .await
            }
            Votes::MarksKeyDecides => {
                store
                    .read_scan(move |c| {
                        Box::pin(async move {
                            let mut n = 0;
                            c.for_each(&MARKS, &[&election_id], |r| {
                                roll.test_and_set(r.int(0)?);
                                n += 1;
                                Ok(())
                            })
                            .await?;
                            Ok(n)
                        })
                    })
                    .await
            }
        }
    }
}

/// A vote inside the writer: the roll's voted bit decides; then the mark
/// and the sealed ballot go into their small tables.
async fn cast_in_writer(
    tx: &Tx<'_>,
    roll: &Roll,
    waiting: &WaitingTrackers,
    took: &AtomicBool,
    voter_id: i64,
    b: &BoxedBallot,
) -> Result<VoteOutcome, StoreError> {
    // The election's row decides whether it takes votes: the writer
    // orders this read after every step that stopped votes.
    let open = tx
        .query_one(&TAKES_VOTES, &[&b.election_id], |r| r.int(0))
        .await?;
    if open == 0 {
        return Ok(VoteOutcome::NotTakingVotes);
    }
    if roll.has_voted(voter_id) {
        return Ok(VoteOutcome::AlreadyVoted);
    }
    // A ballot cast already (its tracker waiting or in the box) is a copy:
    // refused before anything is written, so the batch never meets the
    // tracker's key.
    let waits = if waiting.may_wait(b.election_id, &b.tag) {
        tx.query_one(&COPY_WAITING, &[&b.election_id, &b.tag], |r| r.int(0))
            .await?
    } else {
        0
    };
    let copies = waits
        + tx.query_one(
            &COPY_IN_BOX,
            &[&b.election_id, &b.tag, &b.district_id],
            |r| r.int(0),
        )
        .await?;
    if copies > 0 {
        return Ok(VoteOutcome::CopiedBallot);
    }
    if !roll.test_and_set(voter_id) {
        return Ok(VoteOutcome::AlreadyVoted);
    }
    took.store(true, Ordering::Release);
    let batch = tx.writer_batch().ok_or_else(|| {
        StoreError::Internal("the roll decides votes only in SQLite's one writer".into())
    });
    let written = async {
        let batch = batch?;
        tx.execute(&INSERT_MARK, &[&b.election_id, &batch, &voter_id])
            .await?;
        tx.execute(
            &INSERT_INTAKE,
            &[&b.election_id, &batch, &b.tag, &b.district_id, &b.sealed],
        )
        .await?;
        Ok::<_, StoreError>(())
    }
    .await;
    if let Err(e) = written {
        roll.clear(voter_id);
        took.store(false, Ordering::Release);
        return Err(e);
    }
    // Before the commit: a later vote of this batch meets it. (If the batch
    // rolls back, the prefix stays: a later vote with it is checked
    // against the intake's rows.)
    waiting.add(b.election_id, &b.tag);
    Ok(VoteOutcome::Cast)
}

/// Folds up to [`FOLD_MARKS_MAX`] of the election's marks, in voter order,
/// into the bits of `voting_marks_bits`, and deletes them; the marks
/// folded.
async fn fold_marks(tx: &Tx<'_>, election_id: i64) -> Result<usize, StoreError> {
    let marks: Vec<(i64, i64)> = tx
        .query(&MARKS_TO_FOLD, &[&election_id, &FOLD_MARKS_MAX], |r| {
            Ok((r.int(0)?, r.int(1)?))
        })
        .await?;
    let Some(&(last_batch, last_voter)) = marks.last() else {
        return Ok(0);
    };
    // Voter order: one row's marks are consecutive.
    let mut voters: Vec<i64> = marks.into_iter().map(|(_, voter)| voter).collect();
    voters.sort_unstable();
    let mut i = 0;
    while i < voters.len() {
        let (chunk, _) = mark_bits_row(voters[i]);
        let mut bits = tx
            .query_opt(&MARK_BITS, &[&election_id, &chunk], |r| r.bytes(0))
            .await?
            .unwrap_or_default();
        bits.resize((MARK_BITS_VOTERS / 8) as usize, 0);
        while i < voters.len() && mark_bits_row(voters[i]).0 == chunk {
            let bit = mark_bits_row(voters[i]).1;
            bits[bit / 8] |= 1 << (bit % 8);
            i += 1;
        }
        tx.execute(&WRITE_MARK_BITS, &[&election_id, &chunk, &bits])
            .await?;
    }
    tx.execute(&DELETE_FOLDED, &[&election_id, &last_batch, &last_voter])
        .await?;
    Ok(voters.len())
}
