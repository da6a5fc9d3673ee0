//! Voting on the embedded SQLite store: one writer in one process, so the
//! roll in memory decides a vote (the voter's bit, set in the writer), and
//! a vote writes into two small tables that the mixer settles every
//! interval (`settle`): the ballot from `voting_ballot_intake` into the
//! box, the marks folded into `voting_marks_bits`. Every connection runs
//! with `secure_delete` on (`store/sqlite.rs`): deleted rows are zeroed.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, LazyLock};

use futures::future::BoxFuture;
use indicatif::ProgressBar;
use rusqlite::Connection;

use super::super::model::ElectionRows;
use super::super::receipt::{ReceiptKey, RECEIPT_BYTES};
use super::super::roll::Roll;
use super::super::seed::{self, SeedVotingArgs};
use super::{
    ballot_event, candidate_row, district_row, election_row, int_pair, int_triple, legacy_box_row,
    legacy_id_row, party_row, receipt_state, roll_range_row, roll_slot, split_tallies, sql, tag_of,
    tally_row, Boxed, BoxedBallot, Columns, ReceiptState, Round, Settled, Tallies, TallyKey,
    VoteOutcome, VotingStore, FOLD_MARKS_MAX,
};
use crate::store::eventlog;
use crate::store::sqlite::{all, first, SqliteStore};
use crate::store::StoreError;

/// Voters one row of `voting_marks_bits` holds (512 bytes of bits: a row
/// fits in one page of a table without rowid).
pub const MARK_BITS_VOTERS: i64 = 4096;

fn mark_bits_row(voter_id: i64) -> (i64, usize) {
    (
        voter_id.div_euclid(MARK_BITS_VOTERS),
        voter_id.rem_euclid(MARK_BITS_VOTERS) as usize,
    )
}

/// A receipt's reads as one statement, one snapshot: a settle or a round
/// between two reads would hide the ballot from both. The intake counts as
/// the box. `counted` is the count of counted tags, or `0` for a receipt
/// this server minted.
fn receipt_sql(counted: &str) -> String {
    use super::sql::{BOXED, LAST};
    format!(
        "SELECT ({BOXED}) + (SELECT COUNT(*) FROM voting_ballot_intake
                                      WHERE election_id = ?1 AND receipt_tag = ?2),
                        {counted}, ({LAST})"
    )
}

static RECEIPT_MINTED: LazyLock<String> = LazyLock::new(|| receipt_sql("0"));
static RECEIPT_UNCHECKED: LazyLock<String> =
    LazyLock::new(|| receipt_sql(&format!("({})", sql::COUNTED)));

/// A receipt's tag as counted (a receipt without a check, found by its tag
/// once published).
const COUNT_TAG: &str = "INSERT OR IGNORE INTO voting_receipts_counted (election_id, receipt_tag)
                         VALUES (?1, ?2)";

const READ_TALLIES: &str = "SELECT -1, 0, 0, 0, COALESCE((SELECT position FROM consumer_positions WHERE consumer = ?1), 0)
                          UNION ALL
                          SELECT election_id, district_id, party_id, candidate_id, votes FROM voting_tallies";

pub struct SqliteVoting {
    db: Arc<SqliteStore>,
}

impl SqliteVoting {
    pub fn new(db: Arc<SqliteStore>) -> SqliteVoting {
        SqliteVoting { db }
    }
}

impl VotingStore for SqliteVoting {
    fn election_rows(&self) -> BoxFuture<'_, Result<ElectionRows, StoreError>> {
        Box::pin(self.db.read_blocking(|c| {
            Ok(ElectionRows {
                elections: all(&mut c.prepare(sql::ELECTIONS)?, [], |r| election_row(r))?,
                districts: all(&mut c.prepare(sql::DISTRICTS)?, [], |r| district_row(r))?,
                parties: all(&mut c.prepare(sql::PARTIES)?, [], |r| party_row(r))?,
                candidates: all(&mut c.prepare(sql::CANDIDATES)?, [], |r| candidate_row(r))?,
            })
        }))
    }

    /// Reads through a connection of its own with a small page cache and no
    /// memory map: the read connections map the file, and 5,000,000 roll
    /// rows read through a map would stay resident in this process.
    fn load_roll(
        &self,
        election_id: i64,
        district_ids: Vec<i64>,
    ) -> BoxFuture<'_, anyhow::Result<Roll>> {
        let path = self.db.path().to_path_buf();
        Box::pin(async move {
            tokio::task::spawn_blocking(move || -> anyhow::Result<Roll> {
                let c = crate::store::sqlite::open_connection(&path, 2048, false)?;
                c.execute_batch("PRAGMA query_only = 1")?;
                let (lo, hi, n) = first(&mut c.prepare(sql::ROLL_RANGE)?, [election_id], |r| {
                    roll_range_row(r)
                })?;
                let mut roll = Roll::with_range(lo.unwrap_or(1), hi.unwrap_or(0), n)?;
                let mut stmt = c.prepare(sql::ROLL)?;
                let mut rows = stmt.query([election_id])?;
                while let Some(r) = rows.next()? {
                    let (voter_id, district_id) = int_pair(r)?;
                    if let Some(i) = roll_slot(&district_ids, district_id) {
                        roll.put(voter_id, i);
                    }
                }
                Ok(roll)
            })
            .await?
        })
    }

    fn mark_voted(
        &self,
        election_id: i64,
        roll: Arc<Roll>,
    ) -> BoxFuture<'_, Result<usize, StoreError>> {
        Box::pin(self.db.write(move |c| {
            let mut n = 0;
            let mut stmt = c.prepare(sql::MARKS)?;
            let mut rows = stmt.query([election_id])?;
            while let Some(r) = rows.next()? {
                roll.test_and_set(r.int(0)?);
                n += 1;
            }
            let mut stmt =
                c.prepare("SELECT chunk, bits FROM voting_marks_bits WHERE election_id = ?1")?;
            let mut rows = stmt.query([election_id])?;
            while let Some(r) = rows.next()? {
                let (chunk, bits) = (r.int(0)?, r.bytes(1)?);
                for (byte_at, byte) in bits.iter().enumerate() {
                    for bit in 0..8 {
                        if byte & (1 << bit) != 0 {
                            let voter = chunk * MARK_BITS_VOTERS + (byte_at * 8 + bit) as i64;
                            roll.test_and_set(voter);
                            n += 1;
                        }
                    }
                }
            }
            Ok(n)
        }))
    }

    fn settle(&self, election_id: i64) -> BoxFuture<'_, Result<Settled, StoreError>> {
        Box::pin(async move {
            let waiting: bool = self
                .db
                .read(move |c| {
                    Ok(c.prepare_cached(
                        "SELECT EXISTS (SELECT 1 FROM voting_marks WHERE election_id = ?1)
                     OR EXISTS (SELECT 1 FROM voting_ballot_intake WHERE election_id = ?1)",
                    )?
                    .query_row([election_id], |r| r.get(0))?)
                })
                .await?;
            if !waiting {
                return Ok(Settled::default());
            }
            self.db
                .write(move |c| {
                    let ballots = c
                        .prepare_cached(
                            "INSERT INTO voting_ballot_box (election_id, district_id, receipt_tag, sealed)
                 SELECT election_id, district_id, receipt_tag, sealed FROM voting_ballot_intake
                  WHERE election_id = ?1 ORDER BY district_id, receipt_tag",
                        )?
                        .execute([election_id])?;
                    c.prepare_cached("DELETE FROM voting_ballot_intake WHERE election_id = ?1")?
                        .execute([election_id])?;
                    Ok(Settled {
                        ballots,
                        marks: fold_marks(c, election_id)?,
                    })
                })
                .await
        })
    }

    fn cast<'a>(
        &'a self,
        roll: &'a Arc<Roll>,
        voter_id: i64,
        ballot: BoxedBallot,
    ) -> BoxFuture<'a, Result<VoteOutcome, StoreError>> {
        Box::pin(async move {
            let took = Arc::new(AtomicBool::new(false));
            let (in_writer, took_in_writer) = (roll.clone(), took.clone());
            // Unguarded (no SAVEPOINT): the vote is decided by the voted bit
            // before any SQL runs, and the two inserts that follow can only
            // fail when the database does, which rolls back the batch; every
            // vote in it then clears its bit below.
            let outcome = self
                .db
                .write_unguarded(move |c| {
                    cast_in_writer(c, &in_writer, &took_in_writer, voter_id, &ballot)
                })
                .await;
            if outcome.is_err() && took.load(Ordering::Acquire) {
                roll.clear(voter_id);
            }
            outcome
        })
    }

    fn receipt(
        &self,
        election_id: i64,
        tag: [u8; RECEIPT_BYTES],
        minted: bool,
    ) -> BoxFuture<'_, Result<Option<ReceiptState>, StoreError>> {
        let sql: &'static str = if minted {
            &RECEIPT_MINTED
        } else {
            &RECEIPT_UNCHECKED
        };
        Box::pin(async move {
            let counts = self
                .db
                .read(move |c| {
                    first(
                        &mut *c.prepare_cached(sql)?,
                        rusqlite::params![election_id, &tag[..]],
                        |r| int_triple(r),
                    )
                })
                .await?;
            Ok(receipt_state(minted, counts))
        })
    }

    fn adopt_legacy<'a>(
        &'a self,
        keys: &'a Arc<ReceiptKey>,
    ) -> BoxFuture<'a, Result<usize, StoreError>> {
        let keys = keys.clone();
        Box::pin(self.db.write(move |c| {
            let legacy: i64 = c.query_row(
                "SELECT COUNT(*) FROM sqlite_master WHERE name = 'voting_ballot_box_legacy'",
                [],
                |r| r.get(0),
            )?;
            if legacy == 0 {
                return Ok(0);
            }
            let rows = all(&mut c.prepare(sql::LEGACY_BOX)?, [], |r| legacy_box_row(r))?;
            for (id, e, d, p, cands) in &rows {
                let Some(tag) = tag_of(&keys, *e, id) else {
                    continue;
                };
                let sealed = keys.seal(*e, *d, &tag, super::choice(*p, cands).as_bytes());
                c.execute(
                    "INSERT OR IGNORE INTO voting_ballot_box
                            (election_id, district_id, receipt_tag, sealed) VALUES (?1, ?2, ?3, ?4)",
                    rusqlite::params![e, d, &tag[..], sealed],
                )?;
                // A receipt without a check: found by its tag once published.
                c.execute(COUNT_TAG, rusqlite::params![e, &tag[..]])?;
            }
            let ids = all(&mut c.prepare(sql::LEGACY_IDS)?, [], |r| legacy_id_row(r))?;
            for (e, id) in &ids {
                let Some(tag) = tag_of(&keys, *e, id) else {
                    continue;
                };
                c.execute(COUNT_TAG, rusqlite::params![e, &tag[..]])?;
            }
            // Zeroed as deleted: every connection runs with
            // `secure_delete` on (store/sqlite.rs).
            c.execute_batch(
                "DELETE FROM voting_ballot_box_legacy; DELETE FROM voting_receipts_legacy;
                     DROP TABLE voting_ballot_box_legacy; DROP TABLE voting_receipts_legacy;",
            )?;
            Ok(rows.len())
        }))
    }

    fn due_districts(
        &self,
        election_id: i64,
        min: i64,
    ) -> BoxFuture<'_, Result<Vec<(i64, i64)>, StoreError>> {
        Box::pin(self.db.read(move |c| {
            all(&mut *c.prepare_cached(sql::DUE)?, [election_id, min], |r| {
                int_pair(r)
            })
        }))
    }

    /// Unbounded: a round runs inside the writer on rows already in its
    /// cache.
    fn round_ballots_max(&self) -> Option<i64> {
        None
    }

    fn round<'a>(
        &'a self,
        keys: &'a Arc<ReceiptKey>,
        election_id: i64,
        districts: Vec<i64>,
    ) -> BoxFuture<'a, Result<Round, StoreError>> {
        let keys = keys.clone();
        Box::pin(
            self.db
                .write(move |c| round_in_writer(c, &keys, election_id, &districts)),
        )
    }

    /// Nothing to do: the round's deletes zeroed the rows (`secure_delete`).
    fn vacuum_box(&self) -> BoxFuture<'_, Result<(), StoreError>> {
        Box::pin(async { Ok(()) })
    }

    fn publish_seeded(
        &self,
        election_id: i64,
        voters: Vec<i64>,
        boxed: Vec<Boxed>,
    ) -> BoxFuture<'_, Result<(), StoreError>> {
        Box::pin(self.db.write(move |c| {
            for v in &voters {
                c.execute(
                    "INSERT OR IGNORE INTO voting_marks (election_id, voter_id) VALUES (?1, ?2)",
                    [election_id, *v],
                )?;
            }
            publish(c, election_id, &boxed)
        }))
    }

    fn seed_election<'a>(
        &'a self,
        args: &'a SeedVotingArgs,
        opens: i64,
        closes: i64,
        bar: &'a ProgressBar,
    ) -> BoxFuture<'a, anyhow::Result<()>> {
        let (path, args, bar) = (self.db.path().to_path_buf(), args.clone(), bar.clone());
        Box::pin(async move {
            tokio::task::spawn_blocking(move || {
                seed::seed_sqlite(&path, &args, opens, closes, &bar)
            })
            .await?
        })
    }

    fn tally_step(
        &self,
        consumer: &'static str,
        owner: Arc<str>,
        position: i64,
        lease_ms: i64,
        deltas: Arc<Vec<(TallyKey, i64)>>,
    ) -> BoxFuture<'_, Result<bool, StoreError>> {
        let until = crate::base::clock::now_ms() + lease_ms;
        Box::pin(self.db.write(move |c| {
            let held = c
                .prepare_cached(sql::SAVE_TALLY_POSITION)?
                .execute(rusqlite::params![consumer, &*owner, position, until])?;
            if held != 1 {
                return Ok(false);
            }
            let mut add = c.prepare_cached(
                "INSERT INTO voting_tallies (election_id, district_id, party_id, candidate_id, votes)
                     VALUES (?1, ?2, ?3, ?4, ?5)
                     ON CONFLICT (election_id, district_id, party_id, candidate_id)
                     DO UPDATE SET votes = votes + excluded.votes",
            )?;
            for ((e, d, p, k), n) in deltas.iter() {
                add.execute([*e, *d, *p, *k, *n])?;
            }
            Ok(true)
        }))
    }

    fn read_tallies(&self, consumer: &'static str) -> BoxFuture<'_, Result<Tallies, StoreError>> {
        Box::pin(async move {
            let rows = self
                .db
                .read_blocking(move |c| {
                    all(&mut *c.prepare_cached(READ_TALLIES)?, [consumer], |r| {
                        tally_row(r)
                    })
                })
                .await?;
            Ok(split_tallies(rows))
        })
    }
}

/// Folds up to [`FOLD_MARKS_MAX`] of the election's marks, in voter order,
/// into the bits of `voting_marks_bits`, and deletes them; the marks
/// folded.
fn fold_marks(c: &Connection, election_id: i64) -> Result<usize, StoreError> {
    let voters: Vec<i64> = c
        .prepare_cached(
            "SELECT voter_id FROM voting_marks WHERE election_id = ?1 ORDER BY voter_id LIMIT ?2",
        )?
        .query_map([election_id, FOLD_MARKS_MAX], |r| r.get(0))?
        .collect::<Result<_, _>>()?;
    let Some(&last) = voters.last() else {
        return Ok(0);
    };
    let mut read = c.prepare_cached(
        "SELECT bits FROM voting_marks_bits WHERE election_id = ?1 AND chunk = ?2",
    )?;
    let mut write = c.prepare_cached(
        "INSERT OR REPLACE INTO voting_marks_bits (election_id, chunk, bits) VALUES (?1, ?2, ?3)",
    )?;
    // Voter order: one row's marks are consecutive.
    let mut i = 0;
    while i < voters.len() {
        let (chunk, _) = mark_bits_row(voters[i]);
        let mut bits: Vec<u8> =
            read.query_row([election_id, chunk], |r| r.get(0))
                .or_else(|e| match e {
                    rusqlite::Error::QueryReturnedNoRows => Ok(Vec::new()),
                    e => Err(e),
                })?;
        bits.resize((MARK_BITS_VOTERS / 8) as usize, 0);
        while i < voters.len() && mark_bits_row(voters[i]).0 == chunk {
            let bit = mark_bits_row(voters[i]).1;
            bits[bit / 8] |= 1 << (bit % 8);
            i += 1;
        }
        write.execute(rusqlite::params![election_id, chunk, bits])?;
    }
    c.prepare_cached("DELETE FROM voting_marks WHERE election_id = ?1 AND voter_id <= ?2")?
        .execute([election_id, last])?;
    Ok(voters.len())
}

/// A vote inside the writer: the roll's voted bit decides; then the mark
/// and the sealed ballot go into their small tables.
fn cast_in_writer(
    c: &Connection,
    roll: &Roll,
    took: &AtomicBool,
    voter_id: i64,
    b: &BoxedBallot,
) -> Result<VoteOutcome, StoreError> {
    if !roll.test_and_set(voter_id) {
        return Ok(VoteOutcome::AlreadyVoted);
    }
    took.store(true, Ordering::Release);
    let written = (|| -> Result<(), StoreError> {
        // Both keyed (no rowid): neither table's order is arrival order.
        // Small tables the mixer empties every interval (`settle`).
        c.prepare_cached("INSERT INTO voting_marks (election_id, voter_id) VALUES (?1, ?2)")?
            .execute([b.election_id, voter_id])?;
        c.prepare_cached(
            "INSERT INTO voting_ballot_intake (election_id, receipt_tag, district_id, sealed)
             VALUES (?1, ?2, ?3, ?4)",
        )?
        .execute(rusqlite::params![
            b.election_id,
            &b.tag[..],
            b.district_id,
            b.sealed
        ])?;
        Ok(())
    })();
    if let Err(e) = written {
        roll.clear(voter_id);
        took.store(false, Ordering::Release);
        return Err(e);
    }
    Ok(VoteOutcome::Cast)
}

/// A round inside the writer: the due districts' box rows opened, published
/// in tag order, and deleted.
fn round_in_writer(
    c: &Connection,
    keys: &ReceiptKey,
    election_id: i64,
    due: &[i64],
) -> Result<Round, StoreError> {
    let mut boxed: Vec<Boxed> = Vec::new();
    {
        let mut select = c.prepare_cached(
            "SELECT receipt_tag, sealed FROM voting_ballot_box
             WHERE election_id = ?1 AND district_id = ?2",
        )?;
        for &d in due {
            let rows: Vec<(Vec<u8>, Vec<u8>)> = select
                .query_map([election_id, d], |r| Ok((r.get(0)?, r.get(1)?)))?
                .collect::<Result<_, _>>()?;
            for (tag, sealed) in rows {
                boxed.push(Boxed::open(keys, election_id, d, tag, &sealed)?);
            }
        }
    }
    if boxed.is_empty() {
        return Ok(Round::default());
    }
    boxed.sort_by(|a, b| a.tag.cmp(&b.tag));
    publish(c, election_id, &boxed)?;
    // The drained rows' bytes are zeroed: every connection runs with
    // `secure_delete` on (store/sqlite.rs).
    let mut delete = c.prepare_cached(
        "DELETE FROM voting_ballot_box WHERE election_id = ?1 AND district_id = ?2",
    )?;
    for &d in due {
        delete.execute([election_id, d])?;
    }
    Ok(Round {
        published: boxed.len(),
        districts: due.len(),
        more_waiting: false,
    })
}

/// Appends `boxed` as the election's next round: ballots, events and the
/// round's row.
fn publish(c: &Connection, election_id: i64, boxed: &[Boxed]) -> Result<(), StoreError> {
    let round: i64 = c.query_row(
        "SELECT COALESCE(MAX(round), 0) + 1 FROM voting_rounds WHERE election_id = ?1",
        [election_id],
        |r| r.get(0),
    )?;
    let mut insert = c.prepare_cached(
        "INSERT INTO voting_ballots
                (election_id, district_id, party_id, candidate_ids, round, position)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
    )?;
    let mut last_position = 0;
    for b in boxed {
        let position = eventlog::sqlite_append(c, &ballot_event(election_id, round, b))?;
        last_position = position;
        insert.execute(rusqlite::params![
            election_id,
            b.district_id,
            b.party_id,
            b.candidates_json,
            round,
            position
        ])?;
    }
    c.prepare_cached(
        "INSERT INTO voting_rounds (election_id, round, ballots, published_at_ms, last_position)
             VALUES (?1, ?2, ?3, ?4, ?5)",
    )?
    .execute([
        election_id,
        round,
        boxed.len() as i64,
        crate::base::clock::now_ms(),
        last_position,
    ])?;
    Ok(())
}
