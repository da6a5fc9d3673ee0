//! Voting SQL for both dialects, side by side.
//!
//! A vote is one write: the voter's mark (keyed by voter) and the ballot in
//! the ballot box (keyed by its receipt's tag, the choice sealed; no voter).
//! On PostgreSQL the mark's primary key decides one vote per voter across
//! nodes (`INSERT .. ON CONFLICT DO NOTHING`, the box insert fed by its
//! `RETURNING`); on SQLite the roll's voted bit decides in the writer, and
//! a vote writes into two small tables that the mixer empties every
//! interval ([`settle`]): the ballot into `voting_ballot_intake` (moved
//! into the box) and the mark into `voting_marks` (folded into
//! `voting_marks_bits`, one bit per voter). So a vote's commit touches a
//! few pages of tables that stay in the writer's cache, not random pages of
//! the box and of a B-tree of every voter.
//! Ballots leave the box only in the mixer's rounds ([`publish_round`]), a
//! district at a time once it holds the mix minimum, which is what keeps
//! them apart from the roll.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use futures::StreamExt;
use tokio_postgres::types::ToSql;

use super::model::{ballot_stream, ElectionRows, EVENT_BALLOT_CAST};
use super::receipt::{ReceiptKey, RECEIPT_BYTES};
use super::roll::Roll;
use crate::store::{eventlog, NewEvent, Store, StoreError};

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

// ---------------------------------------------------------------- loading

/// The static tables of every election.
pub async fn election_rows(store: &Store) -> Result<ElectionRows, StoreError> {
    const ELECTIONS: &str =
        "SELECT id, name, opens_at_ms, closes_at_ms, candidates_per_vote_max FROM voting_elections";
    const DISTRICTS: &str = "SELECT election_id, district_id, name FROM voting_districts";
    const PARTIES: &str = "SELECT election_id, party_id, name, short_name FROM voting_parties";
    const CANDIDATES: &str =
        "SELECT election_id, candidate_id, district_id, party_id, list_position, name
                              FROM voting_candidates";
    match store {
        Store::Sqlite(s) => {
            s.read_blocking(|c| {
                let elections = c
                    .prepare(ELECTIONS)?
                    .query_map([], |r| {
                        Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?))
                    })?
                    .collect::<Result<_, _>>()?;
                let districts = c
                    .prepare(DISTRICTS)?
                    .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?
                    .collect::<Result<_, _>>()?;
                let parties = c
                    .prepare(PARTIES)?
                    .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)))?
                    .collect::<Result<_, _>>()?;
                let candidates = c
                    .prepare(CANDIDATES)?
                    .query_map([], |r| {
                        Ok((
                            r.get(0)?,
                            r.get(1)?,
                            r.get(2)?,
                            r.get(3)?,
                            r.get(4)?,
                            r.get(5)?,
                        ))
                    })?
                    .collect::<Result<_, _>>()?;
                Ok(ElectionRows {
                    elections,
                    districts,
                    parties,
                    candidates,
                })
            })
            .await
        }
        Store::Postgres(p) => {
            let client = p.client().await?;
            let elections = client
                .query(ELECTIONS, &[])
                .await?
                .iter()
                .map(|r| {
                    (
                        r.get(0),
                        r.get(1),
                        r.get(2),
                        r.get(3),
                        r.get::<_, i32>(4) as i64,
                    )
                })
                .collect();
            let districts = client
                .query(DISTRICTS, &[])
                .await?
                .iter()
                .map(|r| (r.get(0), r.get(1), r.get(2)))
                .collect();
            let parties = client
                .query(PARTIES, &[])
                .await?
                .iter()
                .map(|r| (r.get(0), r.get(1), r.get(2), r.get(3)))
                .collect();
            let candidates = client
                .query(CANDIDATES, &[])
                .await?
                .iter()
                .map(|r| (r.get(0), r.get(1), r.get(2), r.get(3), r.get(4), r.get(5)))
                .collect();
            Ok(ElectionRows {
                elections,
                districts,
                parties,
                candidates,
            })
        }
    }
}

/// Loads an election's roll; `district_ids` are the election's districts
/// in id order (a voter's slot is the index of its district).
///
/// SQLite reads through a connection of its own with a small page cache
/// and no memory map: the read connections map the file, and 5,000,000
/// roll rows read through a map would stay resident in this process.
pub async fn load_roll(
    store: &Store,
    election_id: i64,
    district_ids: Vec<i64>,
) -> anyhow::Result<Roll> {
    const RANGE: &str =
        "SELECT MIN(voter_id), MAX(voter_id), COUNT(*) FROM voting_voters WHERE election_id = ";
    let index_of = move |d: i64| district_ids.binary_search(&d).ok().map(|i| i as u16);
    match store {
        Store::Sqlite(s) => {
            let path = s.path().to_path_buf();
            tokio::task::spawn_blocking(move || -> anyhow::Result<Roll> {
                let c = crate::store::sqlite::open_connection(&path, 2048, false)?;
                c.execute_batch("PRAGMA query_only = 1")?;
                let (lo, hi, n): (Option<i64>, Option<i64>, i64) =
                    c.query_row(&format!("{RANGE}?1"), [election_id], |r| {
                        Ok((r.get(0)?, r.get(1)?, r.get(2)?))
                    })?;
                let mut roll = Roll::with_range(lo.unwrap_or(1), hi.unwrap_or(0), n)?;
                let mut stmt = c.prepare(
                    "SELECT voter_id, district_id FROM voting_voters WHERE election_id = ?1",
                )?;
                let mut rows = stmt.query([election_id])?;
                while let Some(r) = rows.next()? {
                    if let Some(i) = index_of(r.get(1)?) {
                        roll.put(r.get(0)?, i);
                    }
                }
                Ok(roll)
            })
            .await?
        }
        Store::Postgres(p) => {
            let client = p.client().await?;
            let r = client
                .query_one(&format!("{RANGE}$1"), &[&election_id])
                .await?;
            let (lo, hi, n): (Option<i64>, Option<i64>, i64) = (r.get(0), r.get(1), r.get(2));
            let mut roll = Roll::with_range(lo.unwrap_or(1), hi.unwrap_or(0), n)?;
            let stmt = client
                .prepare("SELECT voter_id, district_id FROM voting_voters WHERE election_id = $1")
                .await?;
            let rows = client
                .query_raw(&stmt, [&election_id as &(dyn ToSql + Sync)])
                .await?;
            futures::pin_mut!(rows);
            while let Some(r) = rows.next().await {
                let r = r?;
                if let Some(i) = index_of(r.get(1)) {
                    roll.put(r.get(0), i);
                }
            }
            Ok(roll)
        }
    }
}

/// Sets the voted bit of everyone who voted in the election. On SQLite this
/// runs in the writer, so no vote can commit between the read and the bits.
pub async fn mark_voted(
    store: &Store,
    election_id: i64,
    roll: Arc<Roll>,
) -> Result<usize, StoreError> {
    match store {
        Store::Sqlite(s) => {
            s.write(move |c| {
                let mut n = 0;
                let mut stmt =
                    c.prepare("SELECT voter_id FROM voting_marks WHERE election_id = ?1")?;
                let mut rows = stmt.query([election_id])?;
                while let Some(r) = rows.next()? {
                    roll.test_and_set(r.get(0)?);
                    n += 1;
                }
                let mut stmt =
                    c.prepare("SELECT chunk, bits FROM voting_marks_bits WHERE election_id = ?1")?;
                let mut rows = stmt.query([election_id])?;
                while let Some(r) = rows.next()? {
                    let (chunk, bits): (i64, Vec<u8>) = (r.get(0)?, r.get(1)?);
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
            })
            .await
        }
        Store::Postgres(p) => {
            let client = p.client().await?;
            let stmt = client
                .prepare("SELECT voter_id FROM voting_marks WHERE election_id = $1")
                .await?;
            let rows = client
                .query_raw(&stmt, [&election_id as &(dyn ToSql + Sync)])
                .await?;
            futures::pin_mut!(rows);
            let mut n = 0;
            while let Some(r) = rows.next().await {
                roll.test_and_set(r?.get(0));
                n += 1;
            }
            Ok(n)
        }
    }
}

/// Voters one row of `voting_marks_bits` holds (512 bytes of bits: a row
/// fits in one page of a table without rowid).
pub const MARK_BITS_VOTERS: i64 = 4096;
/// Marks one settle folds at most (the first settle of a database whose
/// marks were all kept by voter may find millions); the mixer settles again
/// at once.
pub const FOLD_MARKS_MAX: i64 = 100_000;

fn mark_bits_row(voter_id: i64) -> (i64, usize) {
    (
        voter_id.div_euclid(MARK_BITS_VOTERS),
        voter_id.rem_euclid(MARK_BITS_VOTERS) as usize,
    )
}

/// What one settle moved.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Settled {
    pub ballots: usize,
    pub marks: usize,
}

/// SQLite: in one write, moves the election's ballots from
/// `voting_ballot_intake` into `voting_ballot_box` and folds up to
/// [`FOLD_MARKS_MAX`] of its marks from `voting_marks` into the bits of
/// `voting_marks_bits`; the moved rows are deleted (zeroed:
/// `secure_delete`). Nothing is written when nothing waits. PostgreSQL
/// writes votes straight into the box and keeps marks keyed by voter (their
/// primary key decides one vote per voter across nodes): nothing to settle.
pub async fn settle(store: &Store, election_id: i64) -> Result<Settled, StoreError> {
    let Store::Sqlite(s) = store else {
        return Ok(Settled::default());
    };
    let waiting: bool = s
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
    s.write(move |c| {
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
            marks: sqlite_fold_marks(c, election_id)?,
        })
    })
    .await
}

fn sqlite_fold_marks(c: &rusqlite::Connection, election_id: i64) -> Result<usize, StoreError> {
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

// ---------------------------------------------------------------- voting

/// Records that `voter_id` voted and puts the sealed ballot into the box, in
/// one transaction; nothing joins the two rows but that transaction.
pub async fn cast(
    store: &Store,
    roll: &Arc<Roll>,
    voter_id: i64,
    ballot: BoxedBallot,
) -> Result<VoteOutcome, StoreError> {
    match store {
        Store::Sqlite(s) => {
            let took = Arc::new(AtomicBool::new(false));
            let (in_writer, took_in_writer) = (roll.clone(), took.clone());
            // Unguarded (no SAVEPOINT): the vote is decided by the voted bit
            // before any SQL runs, and the two inserts that follow can only
            // fail when the database does, which rolls back the batch; every
            // vote in it then clears its bit below.
            let outcome = s
                .write_unguarded(move |c| {
                    sqlite_cast(c, &in_writer, &took_in_writer, voter_id, &ballot)
                })
                .await;
            if outcome.is_err() && took.load(Ordering::Acquire) {
                roll.clear(voter_id);
            }
            outcome
        }
        Store::Postgres(p) => {
            let outcome = p
                .write(move |tx| {
                    let b = ballot.clone();
                    Box::pin(async move {
                        // Prepared once per connection: planning the
                        // statement on every vote cost about as much as
                        // running it (as booking's try-register measured).
                        let stmt = tx
                            .tx
                            .prepare_cached(
                                "WITH m AS (
                                    INSERT INTO voting_marks (election_id, voter_id) VALUES ($1, $2)
                                    ON CONFLICT DO NOTHING RETURNING voter_id)
                                 INSERT INTO voting_ballot_box
                                    (receipt_tag, election_id, district_id, sealed)
                                 SELECT $3, $1, $4, $5 FROM m",
                            )
                            .await?;
                        let n = tx
                            .tx
                            .execute(
                                &stmt,
                                &[
                                    &b.election_id,
                                    &voter_id,
                                    &&b.tag[..],
                                    &b.district_id,
                                    &b.sealed,
                                ],
                            )
                            .await?;
                        Ok(if n == 1 {
                            VoteOutcome::Cast
                        } else {
                            VoteOutcome::AlreadyVoted
                        })
                    })
                })
                .await?;
            // Remember the answer: a repeat is answered from memory.
            roll.test_and_set(voter_id);
            Ok(outcome)
        }
    }
}

fn sqlite_cast(
    c: &rusqlite::Connection,
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
        // Small tables the mixer empties every interval ([`settle`]).
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

/// Where the ballot of the receipt with this tag is, if it exists in
/// `election_id`: in the box, or published by a round no later than the
/// election's last (whose last event position is given). A receipt this
/// server `minted` whose tag is not in the box was published: the box loses
/// a ballot only in the round that publishes it. Receipts minted without a
/// check are found in `voting_receipts_counted` once published.
pub async fn receipt(
    store: &Store,
    election_id: i64,
    tag: [u8; RECEIPT_BYTES],
    minted: bool,
) -> Result<Option<ReceiptState>, StoreError> {
    // The box: scanned on SQLite (keyed by district first; it holds the
    // ballots of rounds not yet due), a key lookup on PostgreSQL.
    const BOXED: &str =
        "SELECT COUNT(*) FROM voting_ballot_box WHERE election_id = ?1 AND receipt_tag = ?2";
    const COUNTED: &str = "SELECT COUNT(*) FROM voting_receipts_counted
                           WHERE election_id = ?1 AND receipt_tag = ?2";
    const LAST: &str =
        "SELECT COALESCE(MAX(last_position), 0) FROM voting_rounds WHERE election_id = ?1";
    let (boxed, counted, last): (i64, i64, i64) = match store {
        Store::Sqlite(s) => {
            // One statement, one snapshot: a settle or a round between two
            // reads would hide the ballot from both.
            let sql = format!(
                "SELECT ({BOXED}) + (SELECT COUNT(*) FROM voting_ballot_intake
                                      WHERE election_id = ?1 AND receipt_tag = ?2),
                        {}, ({LAST})",
                if minted {
                    "0".to_string()
                } else {
                    format!("({COUNTED})")
                }
            );
            s.read(move |c| {
                Ok(c.prepare_cached(&sql)?
                    .query_row(rusqlite::params![election_id, &tag[..]], |r| {
                        Ok((r.get(0)?, r.get(1)?, r.get(2)?))
                    })?)
            })
            .await?
        }
        Store::Postgres(p) => {
            let client = p.client().await?;
            let pg = |s: &str| s.replace("?1", "$1").replace("?2", "$2");
            let stmt = client
                .prepare_cached(&format!(
                    "SELECT ({}), ({}), ({})",
                    pg(BOXED),
                    pg(COUNTED),
                    pg(LAST).replace(
                        "COALESCE(MAX(last_position), 0)",
                        "COALESCE(MAX(last_position), 0)::BIGINT"
                    )
                ))
                .await?;
            let r = client.query_one(&stmt, &[&election_id, &&tag[..]]).await?;
            (r.get(0), r.get(1), r.get(2))
        }
    };
    Ok(if boxed > 0 {
        Some(ReceiptState::Boxed)
    } else if (minted && last > 0) || counted > 0 {
        Some(ReceiptState::Published { position: last })
    } else {
        None
    })
}

/// Re-keys what the schema before receipt tags left (see the migration
/// `0012_voting_secrecy.sql`): boxed ballots are sealed under their
/// receipt's tag, published ballots' receipts become counted tags, and the
/// old tables are dropped (their pages zeroed on SQLite).
pub async fn adopt_legacy(store: &Store, keys: &Arc<ReceiptKey>) -> Result<usize, StoreError> {
    const BOX: &str = "SELECT ballot_id, election_id, district_id, party_id, candidate_ids
                       FROM voting_ballot_box_legacy";
    const IDS: &str = "SELECT election_id, ballot_id FROM voting_receipts_legacy";
    fn tag_of(keys: &ReceiptKey, e: i64, id: &[u8]) -> Option<[u8; RECEIPT_BYTES]> {
        Some(keys.tag(e, &<[u8; RECEIPT_BYTES]>::try_from(id).ok()?))
    }
    match store {
        Store::Sqlite(s) => {
            let keys = keys.clone();
            s.write(move |c| {
                let legacy: i64 = c.query_row(
                    "SELECT COUNT(*) FROM sqlite_master WHERE name = 'voting_ballot_box_legacy'",
                    [],
                    |r| r.get(0),
                )?;
                if legacy == 0 {
                    return Ok(0);
                }
                let rows: Vec<(Vec<u8>, i64, i64, i64, String)> = c
                    .prepare(BOX)?
                    .query_map([], |r| {
                        Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?))
                    })?
                    .collect::<Result<_, _>>()?;
                for (id, e, d, p, cands) in &rows {
                    let Some(tag) = tag_of(&keys, *e, id) else { continue };
                    let sealed = keys.seal(*e, *d, &tag, choice(*p, cands).as_bytes());
                    c.execute(
                        "INSERT OR IGNORE INTO voting_ballot_box
                            (election_id, district_id, receipt_tag, sealed) VALUES (?1, ?2, ?3, ?4)",
                        rusqlite::params![e, d, &tag[..], sealed],
                    )?;
                    // A receipt without a check: found by its tag once published.
                    c.execute(
                        "INSERT OR IGNORE INTO voting_receipts_counted (election_id, receipt_tag)
                         VALUES (?1, ?2)",
                        rusqlite::params![e, &tag[..]],
                    )?;
                }
                let ids: Vec<(i64, Vec<u8>)> = c
                    .prepare(IDS)?
                    .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?
                    .collect::<Result<_, _>>()?;
                for (e, id) in &ids {
                    let Some(tag) = tag_of(&keys, *e, id) else { continue };
                    c.execute(
                        "INSERT OR IGNORE INTO voting_receipts_counted (election_id, receipt_tag)
                         VALUES (?1, ?2)",
                        rusqlite::params![e, &tag[..]],
                    )?;
                }
                // Zeroed as deleted: every connection runs with
                // `secure_delete` on (store/sqlite.rs).
                c.execute_batch(
                    "DELETE FROM voting_ballot_box_legacy; DELETE FROM voting_receipts_legacy;
                     DROP TABLE voting_ballot_box_legacy; DROP TABLE voting_receipts_legacy;",
                )?;
                Ok(rows.len())
            })
            .await
        }
        Store::Postgres(p) => {
            let mut client = p.client().await?;
            let legacy: bool = client
                .query_one(
                    "SELECT to_regclass('voting_ballot_box_legacy') IS NOT NULL",
                    &[],
                )
                .await?
                .get(0);
            if !legacy {
                return Ok(0);
            }
            let tx = client.transaction().await?;
            // Nodes starting at once: one adopts; the others wait on the
            // lock, then find the tables gone (42P01: this backend's catalog
            // cache may still name them, so the read itself tells).
            tx.batch_execute("SELECT pg_advisory_xact_lock(hashtext('voting_adopt_legacy'))")
                .await?;
            let rows = match tx.query(BOX, &[]).await {
                Ok(rows) => rows,
                Err(e) if e.code() == Some(&tokio_postgres::error::SqlState::UNDEFINED_TABLE) => {
                    return Ok(0)
                }
                Err(e) => return Err(e.into()),
            };
            for r in &rows {
                let (id, e, d, pa, cands): (Vec<u8>, i64, i64, i64, String) =
                    (r.get(0), r.get(1), r.get(2), r.get(3), r.get(4));
                let Some(tag) = tag_of(keys, e, &id) else {
                    continue;
                };
                let sealed = keys.seal(e, d, &tag, choice(pa, &cands).as_bytes());
                tx.execute(
                    "INSERT INTO voting_ballot_box (receipt_tag, election_id, district_id, sealed)
                     VALUES ($1, $2, $3, $4) ON CONFLICT DO NOTHING",
                    &[&&tag[..], &e, &d, &sealed],
                )
                .await?;
                // A receipt without a check: found by its tag once published.
                tx.execute(
                    "INSERT INTO voting_receipts_counted (election_id, receipt_tag) VALUES ($1, $2)
                     ON CONFLICT DO NOTHING",
                    &[&e, &&tag[..]],
                )
                .await?;
            }
            for r in tx.query(IDS, &[]).await? {
                let (e, id): (i64, Vec<u8>) = (r.get(0), r.get(1));
                let Some(tag) = tag_of(keys, e, &id) else {
                    continue;
                };
                tx.execute(
                    "INSERT INTO voting_receipts_counted (election_id, receipt_tag) VALUES ($1, $2)
                     ON CONFLICT DO NOTHING",
                    &[&e, &&tag[..]],
                )
                .await?;
            }
            tx.batch_execute(
                "DROP TABLE voting_ballot_box_legacy; DROP TABLE voting_receipts_legacy",
            )
            .await?;
            tx.commit().await?;
            Ok(rows.len())
        }
    }
}

// ---------------------------------------------------------------- rounds

/// A ballot's choice as sealed in the box: `party|[candidates]`.
pub fn choice(party_id: i64, candidates_json: &str) -> String {
    format!("{party_id}|{candidates_json}")
}

/// One ballot taken out of the box and opened.
struct Boxed {
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

/// What one round did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Round {
    /// Ballots published (0: no district's box held `min`).
    pub published: usize,
    /// Districts published.
    pub districts: usize,
    /// More districts were due than one round may take (PostgreSQL,
    /// [`PG_ROUND_BALLOTS_MAX`]): the next round should run at once.
    pub more_waiting: bool,
}

/// Publishes, as one round, every district of the election whose box holds
/// at least `min` ballots (on PostgreSQL whole districts up to
/// [`PG_ROUND_BALLOTS_MAX`] ballots): in one transaction, their ballots move
/// (opened, in the order of their random tags) to `voting_ballots` with one
/// `BallotCast` event each (without their tags), and their box rows are
/// deleted (zeroed on SQLite: `secure_delete`). A
/// district with fewer than `min` stays in the box: nothing about it moves.
pub async fn publish_round(
    store: &Store,
    keys: &Arc<ReceiptKey>,
    election_id: i64,
    min: i64,
) -> Result<Round, StoreError> {
    // Which districts are due, read apart from the writer (counts only grow
    // between this read and the round: the mixer alone takes ballots out).
    const DUE: &str = "SELECT district_id, COUNT(*) FROM voting_ballot_box WHERE election_id = ?1
                       GROUP BY district_id HAVING COUNT(*) >= ?2 ORDER BY district_id";
    match store {
        Store::Sqlite(s) => {
            let due: Vec<i64> = s
                .read(move |c| {
                    Ok(c.prepare_cached(DUE)?
                        .query_map([election_id, min], |r| r.get(0))?
                        .collect::<Result<_, _>>()?)
                })
                .await?;
            if due.is_empty() {
                return Ok(Round::default());
            }
            let keys = keys.clone();
            let published = s
                .write(move |c| sqlite_round(c, &keys, election_id, &due))
                .await?;
            Ok(published)
        }
        Store::Postgres(p) => {
            let client = p.client().await?;
            let stmt = client
                .prepare_cached(&DUE.replace("?1", "$1").replace("?2", "$2"))
                .await?;
            let due: Vec<(i64, i64)> = client
                .query(&stmt, &[&election_id, &min])
                .await?
                .iter()
                .map(|r| (r.get(0), r.get(1)))
                .collect();
            drop(client);
            if due.is_empty() {
                return Ok(Round::default());
            }
            // Whole districts, up to a round's size (at least one).
            let mut take = Vec::new();
            let mut n = 0;
            for (d, count) in &due {
                if !take.is_empty() && n + count > PG_ROUND_BALLOTS_MAX {
                    break;
                }
                take.push(*d);
                n += count;
            }
            let mut round = pg_round(p, keys, election_id, &take).await?;
            round.more_waiting = take.len() < due.len();
            if round.published > 0 {
                // Dead box rows keep their data (and the xmin of the vote's
                // transaction, shared with its mark) until vacuumed.
                let client = p.client().await?;
                if let Err(e) = client.batch_execute("VACUUM voting_ballot_box").await {
                    tracing::warn!(error = %e, "VACUUM voting_ballot_box failed");
                }
            }
            Ok(round)
        }
    }
}

fn sqlite_round(
    c: &rusqlite::Connection,
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
    sqlite_publish(c, election_id, &boxed)?;
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
fn sqlite_publish(
    c: &rusqlite::Connection,
    election_id: i64,
    boxed: &[Boxed],
) -> Result<(), StoreError> {
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

/// Ballots one PostgreSQL round publishes at most (whole districts; one
/// district fuller than this is published whole). A fuller box is
/// published over several rounds, one after the other (`mixer.rs`), each
/// holding ~1 KB a ballot in memory. Unbounded, one round of 133,856
/// ballots took the server from 75 to 179 MiB; the server's peak under
/// `throng bench voting --store postgres://... --only "fresh voter"` was
/// 72-82 MiB at 10,000, 61-66 at 5,000 and 50-53 at 2,000, the mixer keeping
/// up at each (BENCHMARKS.md).
pub const PG_ROUND_BALLOTS_MAX: i64 = 2_000;

/// A PostgreSQL round runs in a transaction of its own, never in the
/// writer's batches: a row's `xmin` is its transaction's id, and a round
/// batched with votes would give published ballots the xmin of marks.
/// Positions follow the store's protocol (`store/postgres.rs`).
async fn pg_round(
    p: &crate::store::postgres::PgStore,
    keys: &ReceiptKey,
    election_id: i64,
    districts: &[i64],
) -> Result<Round, StoreError> {
    let mut client = p.client().await?;
    let tx = client.transaction().await?;
    let take_stmt = tx
        .prepare_cached(
            "DELETE FROM voting_ballot_box WHERE election_id = $1 AND district_id = ANY($2)
             RETURNING receipt_tag, district_id, sealed",
        )
        .await?;
    let mut boxed: Vec<Boxed> = Vec::new();
    let mut districts_taken = std::collections::BTreeSet::new();
    for r in tx.query(&take_stmt, &[&election_id, &districts]).await? {
        districts_taken.insert(r.get::<_, i64>(1));
        let sealed: Vec<u8> = r.get(2);
        boxed.push(Boxed::open(keys, election_id, r.get(1), r.get(0), &sealed)?);
    }
    if boxed.is_empty() {
        tx.rollback().await?;
        return Ok(Round::default());
    }
    boxed.sort_by(|a, b| a.tag.cmp(&b.tag));
    pg_publish(&tx, election_id, &boxed).await?;
    tx.commit().await?;
    Ok(Round {
        published: boxed.len(),
        districts: districts_taken.len(),
        more_waiting: false,
    })
}

/// Appends `boxed` as the election's next round: ballots, events and the
/// round's row.
async fn pg_publish(
    tx: &deadpool_postgres::Transaction<'_>,
    election_id: i64,
    boxed: &[Boxed],
) -> Result<(), StoreError> {
    let n = boxed.len() as i64;
    let round: i64 = tx
        .query_one(
            "INSERT INTO voting_rounds (election_id, round, ballots, published_at_ms)
             SELECT $1, COALESCE(MAX(round), 0) + 1, $2, $3 FROM voting_rounds WHERE election_id = $1
             RETURNING round",
            &[&election_id, &n, &crate::base::clock::now_ms()],
        )
        .await?
        .get(0);
    let events: Vec<NewEvent> = boxed
        .iter()
        .map(|b| ballot_event(election_id, round, b))
        .collect();
    // Positions come from the store's one protocol (see store/postgres.rs).
    let positions = crate::store::postgres::append_events(tx, &events).await?;
    let last_position = positions.iter().copied().max().unwrap_or(0);
    tx.execute(
        "UPDATE voting_rounds SET last_position = $3 WHERE election_id = $1 AND round = $2",
        &[&election_id, &round, &last_position],
    )
    .await?;
    // One prepared statement whatever the round's size (arrays, as the
    // event rows are inserted).
    let insert = tx
        .prepare_cached(
            "INSERT INTO voting_ballots
                (election_id, district_id, party_id, candidate_ids, round, position)
             SELECT $1, d, pa, c, $2, po
               FROM unnest($3::BIGINT[], $4::BIGINT[], $5::TEXT[], $6::BIGINT[])
                 AS r(d, pa, c, po)",
        )
        .await?;
    let districts: Vec<i64> = boxed.iter().map(|b| b.district_id).collect();
    let parties: Vec<i64> = boxed.iter().map(|b| b.party_id).collect();
    let candidates: Vec<&str> = boxed.iter().map(|b| b.candidates_json.as_str()).collect();
    tx.execute(
        &insert,
        &[
            &election_id,
            &round,
            &districts,
            &parties,
            &candidates,
            &positions,
        ],
    )
    .await?;
    Ok(())
}

/// Demo only: marks `ballots`' voters as voted and publishes their ballots
/// as one round, as if the mixer had (no receipts: nobody holds one).
pub async fn seed_published(
    store: &Store,
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
    match store {
        Store::Sqlite(s) => {
            s.write(move |c| {
                for v in &voters {
                    c.execute(
                        "INSERT OR IGNORE INTO voting_marks (election_id, voter_id) VALUES (?1, ?2)",
                        [election_id, *v],
                    )?;
                }
                sqlite_publish(c, election_id, &boxed)
            })
            .await
        }
        Store::Postgres(p) => {
            let mut client = p.client().await?;
            let tx = client.transaction().await?;
            tx.execute(
                "INSERT INTO voting_marks (election_id, voter_id)
                 SELECT $1, v FROM unnest($2::BIGINT[]) AS r(v) ON CONFLICT DO NOTHING",
                &[&election_id, &voters],
            )
            .await?;
            pg_publish(&tx, election_id, &boxed).await?;
            tx.commit().await?;
            Ok(())
        }
    }
}

// ---------------------------------------------------------------- tallies

/// A tally key: (election, district, party, candidate; 0 = the party).
pub type TallyKey = (i64, i64, i64, i64);

/// Adds `deltas` to the tallies and saves the projector's position, in one
/// transaction, only while `owner` holds the consumer's lease; `false`
/// when the lease was lost (nothing written).
pub async fn tally_step(
    store: &Store,
    consumer: &'static str,
    owner: Arc<str>,
    position: i64,
    lease_ms: i64,
    deltas: Arc<Vec<(TallyKey, i64)>>,
) -> Result<bool, StoreError> {
    let until = crate::base::clock::now_ms() + lease_ms;
    match store {
        Store::Sqlite(s) => {
            s.write(move |c| {
                let held = c
                    .prepare_cached(
                        "UPDATE consumer_positions SET position = ?3, lease_until_ms = ?4
                         WHERE consumer = ?1 AND lease_owner = ?2",
                    )?
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
            })
            .await
        }
        Store::Postgres(p) => {
            p.write(move |tx| {
                let (owner, deltas) = (owner.clone(), deltas.clone());
                Box::pin(async move {
                    let held = tx
                        .tx
                        .execute(
                            "UPDATE consumer_positions SET position = $3, lease_until_ms = $4
                             WHERE consumer = $1 AND lease_owner = $2",
                            &[&consumer, &&*owner, &position, &until],
                        )
                        .await?;
                    if held != 1 {
                        return Ok(false);
                    }
                    let add = tx
                        .tx
                        .prepare(
                            "INSERT INTO voting_tallies (election_id, district_id, party_id, candidate_id, votes)
                             VALUES ($1, $2, $3, $4, $5)
                             ON CONFLICT (election_id, district_id, party_id, candidate_id)
                             DO UPDATE SET votes = voting_tallies.votes + excluded.votes",
                        )
                        .await?;
                    for ((e, d, pa, k), n) in deltas.iter() {
                        tx.tx.execute(&add, &[e, d, pa, k, n]).await?;
                    }
                    Ok(true)
                })
            })
            .await
        }
    }
}

/// The tallies and the projector's position, read in one statement (one
/// snapshot in both dialects).
pub async fn read_tallies(
    store: &Store,
    consumer: &'static str,
) -> Result<(i64, Vec<(TallyKey, i64)>), StoreError> {
    const SQLITE: &str = "SELECT -1, 0, 0, 0, COALESCE((SELECT position FROM consumer_positions WHERE consumer = ?1), 0)
                          UNION ALL
                          SELECT election_id, district_id, party_id, candidate_id, votes FROM voting_tallies";
    const PG: &str = "SELECT -1::BIGINT, 0::BIGINT, 0::BIGINT, 0::BIGINT,
                             COALESCE((SELECT position FROM consumer_positions WHERE consumer = $1), 0)
                      UNION ALL
                      SELECT election_id, district_id, party_id, candidate_id, votes FROM voting_tallies";
    let rows: Vec<(TallyKey, i64)> = match store {
        Store::Sqlite(s) => {
            s.read_blocking(move |c| {
                Ok(c.prepare_cached(SQLITE)?
                    .query_map([consumer], |r| {
                        Ok(((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?), r.get(4)?))
                    })?
                    .collect::<Result<_, _>>()?)
            })
            .await?
        }
        Store::Postgres(p) => {
            let client = p.client().await?;
            client
                .query(PG, &[&consumer])
                .await?
                .iter()
                .map(|r| ((r.get(0), r.get(1), r.get(2), r.get(3)), r.get(4)))
                .collect()
        }
    };
    let position = rows.iter().find(|r| r.0 .0 == -1).map(|r| r.1).unwrap_or(0);
    Ok((
        position,
        rows.into_iter().filter(|r| r.0 .0 != -1).collect(),
    ))
}
