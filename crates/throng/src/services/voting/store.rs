//! Voting SQL for both dialects, side by side.
//!
//! A vote is one write: the voter's mark and the ballot in the ballot box
//! (random 128-bit key, no voter). On PostgreSQL the mark's primary key
//! decides one vote per voter across nodes (`INSERT .. ON CONFLICT DO
//! NOTHING`, the box insert fed by its `RETURNING`); on SQLite the roll's
//! voted bit decides in the writer and the mark is appended to a pending
//! table. Ballots leave the box only in the mixer's rounds
//! ([`publish_round`]), which is what keeps them apart from the roll.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use futures::StreamExt;
use rusqlite::OptionalExtension;
use tokio_postgres::types::ToSql;

use super::model::{ballot_stream, ElectionRows, Vote, EVENT_BALLOT_CAST};
use super::roll::Roll;
use crate::store::{eventlog, NewEvent, Store, StoreError};

/// What a vote command did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum VoteOutcome {
    Cast,
    AlreadyVoted,
}

/// A ballot for the box.
#[derive(Clone, Debug)]
pub struct BoxedBallot {
    pub ballot_id: [u8; 16],
    pub vote: Vote,
    pub candidates_json: String,
}

/// Where a receipt's ballot is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReceiptState {
    /// In the box, not yet published.
    Boxed { district_id: i64 },
    /// Published at this event position.
    Published { district_id: i64, position: i64 },
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
                for table in ["voting_marks", "voting_marks_pending"] {
                    let mut stmt = c.prepare(&format!(
                        "SELECT voter_id FROM {table} WHERE election_id = ?1"
                    ))?;
                    let mut rows = stmt.query([election_id])?;
                    while let Some(r) = rows.next()? {
                        roll.test_and_set(r.get(0)?);
                        n += 1;
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

// ---------------------------------------------------------------- voting

/// Records that `voter_id` voted and puts the ballot into the box, in one
/// transaction; nothing joins the two rows but that transaction.
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
                                    (ballot_id, election_id, district_id, party_id, candidate_ids)
                                 SELECT $3, $1, $4, $5, $6 FROM m",
                            )
                            .await?;
                        let n = tx
                            .tx
                            .execute(
                                &stmt,
                                &[
                                    &b.vote.election_id,
                                    &voter_id,
                                    &&b.ballot_id[..],
                                    &b.vote.district_id,
                                    &b.vote.party_id,
                                    &b.candidates_json,
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
        // Appended (rowid order is arrival order until the next round moves
        // the marks, sorted by voter, into `voting_marks`).
        c.prepare_cached(
            "INSERT INTO voting_marks_pending (election_id, voter_id) VALUES (?1, ?2)",
        )?
        .execute([b.vote.election_id, voter_id])?;
        c.prepare_cached(
            "INSERT INTO voting_ballot_box (ballot_id, election_id, district_id, party_id, candidate_ids)
             VALUES (?1, ?2, ?3, ?4, ?5)",
        )?
        .execute(rusqlite::params![
            &b.ballot_id[..],
            b.vote.election_id,
            b.vote.district_id,
            b.vote.party_id,
            b.candidates_json
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

/// Where the ballot with this (MAC-checked) id is, if it exists in
/// `election_id`; `district_id` is the one its receipt names.
///
/// SQLite keeps no index of ballots by id (published ballots are appended,
/// see `sqlite_round`): a ballot still in the box (a few thousand rows at
/// most, scanned) is not counted yet; one gone from the box was published
/// by a round, at the latest at the election's last round's last position.
/// PostgreSQL looks the id up in the box and the published ballots.
pub async fn receipt(
    store: &Store,
    election_id: i64,
    district_id: i64,
    ballot_id: [u8; 16],
) -> Result<Option<ReceiptState>, StoreError> {
    let found: Option<(i64, i64, Option<i64>)> = match store {
        Store::Sqlite(s) => {
            s.read(move |c| {
                let boxed = c
                    .prepare_cached(
                        "SELECT election_id, district_id FROM voting_ballot_box WHERE ballot_id = ?1",
                    )?
                    .query_row([&ballot_id[..]], |r| Ok((r.get(0)?, r.get(1)?, None)))
                    .optional()?;
                if boxed.is_some() {
                    return Ok(boxed);
                }
                let last: Option<i64> = c
                    .prepare_cached(
                        "SELECT last_position FROM voting_rounds WHERE election_id = ?1
                         ORDER BY round DESC LIMIT 1",
                    )?
                    .query_row([election_id], |r| r.get(0))
                    .optional()?;
                Ok(last.map(|position| (election_id, district_id, Some(position))))
            })
            .await?
        }
        Store::Postgres(p) => {
            let client = p.client().await?;
            let stmt = client
                .prepare_cached(
                    "SELECT election_id, district_id, position FROM voting_ballots WHERE ballot_id = $1
                     UNION ALL
                     SELECT election_id, district_id, NULL FROM voting_ballot_box WHERE ballot_id = $1",
                )
                .await?;
            let rows = client.query(&stmt, &[&&ballot_id[..]]).await?;
            // A ballot moved by a round between the two halves shows up in
            // both or (never) neither: published wins.
            rows.iter()
                .map(|r| (r.get(0), r.get(1), r.get(2)))
                .max_by_key(|x: &(i64, i64, Option<i64>)| x.2.is_some())
        }
    };
    Ok(found
        .filter(|f| f.0 == election_id)
        .map(|(_, district_id, position)| match position {
            Some(position) => ReceiptState::Published {
                district_id,
                position,
            },
            None => ReceiptState::Boxed { district_id },
        }))
}

/// Ballots in the box per (election, district).
pub async fn box_counts(store: &Store) -> Result<HashMap<(i64, i64), i64>, StoreError> {
    const SQL: &str = "SELECT election_id, district_id, COUNT(*) FROM voting_ballot_box
                       GROUP BY election_id, district_id";
    let rows: Vec<(i64, i64, i64)> = match store {
        Store::Sqlite(s) => {
            s.read(|c| {
                Ok(c.prepare_cached(SQL)?
                    .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?
                    .collect::<Result<_, _>>()?)
            })
            .await?
        }
        Store::Postgres(p) => {
            let client = p.client().await?;
            client
                .query(SQL, &[])
                .await?
                .iter()
                .map(|r| (r.get(0), r.get(1), r.get(2)))
                .collect()
        }
    };
    Ok(rows.into_iter().map(|(e, d, n)| ((e, d), n)).collect())
}

// ---------------------------------------------------------------- rounds

/// One ballot taken out of the box.
struct Boxed {
    ballot_id: Vec<u8>,
    district_id: i64,
    party_id: i64,
    candidates_json: String,
}

fn ballot_event(election_id: i64, round: i64, b: &Boxed) -> NewEvent {
    let id = uuid::Uuid::from_slice(&b.ballot_id).unwrap_or_default();
    // `candidates_json` is this service's own array of integers.
    let payload = format!(
        r#"{{"electionId":{election_id},"districtId":{},"partyId":{},"candidateIds":{},"ballotId":"{id}","round":{round}}}"#,
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
    /// Ballots published (0: none, or fewer than `min` in the box).
    pub published: usize,
    /// The box held more than one round may take (PostgreSQL,
    /// [`PG_ROUND_BALLOTS_MAX`]): the next round should run at once.
    pub more_waiting: bool,
}

/// Publishes the election's whole ballot box as one round (on PostgreSQL at
/// most [`PG_ROUND_BALLOTS_MAX`] of it), if it holds at
/// least `min` ballots: in one transaction, every ballot moves (in the
/// order of its random id) to `voting_ballots` with one `BallotCast` event
/// each, and the box is emptied; on SQLite the round's pending marks move
/// to `voting_marks` in voter order and the deleted rows are overwritten
/// (`secure_delete`).
pub async fn publish_round(store: &Store, election_id: i64, min: i64) -> Result<Round, StoreError> {
    match store {
        Store::Sqlite(s) => {
            // Counted on a reader first: a box below `min` (an idle election)
            // costs no write transaction, so an idle server does not commit
            // every interval.
            let boxed: i64 = s
                .read(move |c| {
                    Ok(c.prepare_cached(
                        "SELECT COUNT(*) FROM voting_ballot_box WHERE election_id = ?1",
                    )?
                    .query_row([election_id], |r| r.get(0))?)
                })
                .await?;
            if boxed == 0 || boxed < min {
                return Ok(Round::default());
            }
            let published = s.write(move |c| sqlite_round(c, election_id, min)).await?;
            Ok(Round {
                published,
                more_waiting: false,
            })
        }
        Store::Postgres(p) => {
            let round = pg_round(p, election_id, min).await?;
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

fn sqlite_round(c: &rusqlite::Connection, election_id: i64, min: i64) -> Result<usize, StoreError> {
    let boxed: Vec<Boxed> = c
        .prepare_cached(
            "SELECT ballot_id, district_id, party_id, candidate_ids FROM voting_ballot_box
             WHERE election_id = ?1 ORDER BY ballot_id",
        )?
        .query_map([election_id], |r| {
            Ok(Boxed {
                ballot_id: r.get(0)?,
                district_id: r.get(1)?,
                party_id: r.get(2)?,
                candidates_json: r.get(3)?,
            })
        })?
        .collect::<Result<_, _>>()?;
    if boxed.is_empty() || (boxed.len() as i64) < min {
        return Ok(0);
    }
    c.execute_batch("PRAGMA secure_delete = ON")?;
    let moved = (|| -> Result<(), StoreError> {
        let round: i64 = c.query_row(
            "SELECT COALESCE(MAX(round), 0) + 1 FROM voting_rounds WHERE election_id = ?1",
            [election_id],
            |r| r.get(0),
        )?;
        let mut insert = c.prepare_cached(
            "INSERT INTO voting_ballots
                (ballot_id, election_id, district_id, party_id, candidate_ids, round, position)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
        )?;
        let mut last_position = 0;
        for b in &boxed {
            let position = eventlog::sqlite_append(c, &ballot_event(election_id, round, b))?;
            last_position = position;
            insert.execute(rusqlite::params![
                b.ballot_id,
                election_id,
                b.district_id,
                b.party_id,
                b.candidates_json,
                round,
                position
            ])?;
        }
        c.prepare_cached(
            "INSERT INTO voting_marks (election_id, voter_id)
             SELECT election_id, voter_id FROM voting_marks_pending WHERE election_id = ?1
             ORDER BY voter_id",
        )?
        .execute([election_id])?;
        c.prepare_cached("DELETE FROM voting_marks_pending WHERE election_id = ?1")?
            .execute([election_id])?;
        c.prepare_cached("DELETE FROM voting_ballot_box WHERE election_id = ?1")?
            .execute([election_id])?;
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
    })();
    c.execute_batch("PRAGMA secure_delete = OFF")?;
    moved.map(|_| boxed.len())
}

/// Ballots one PostgreSQL round publishes at most. A fuller box is
/// published over several rounds, one after the other (`mixer.rs`), each
/// holding ~1 KB a ballot in memory. Each round's ballots are the box's
/// lowest ballot ids, which are random: a round is a random sample of the
/// box. Unbounded, one round of 133,856 ballots took the server from 75 to
/// 179 MiB; the server's peak under `throng bench voting --store
/// postgres://... --only "fresh voter"` was 72-82 MiB at 10,000, 61-66 at
/// 5,000 and 50-53 at 2,000, the mixer keeping up at each (BENCHMARKS.md).
pub const PG_ROUND_BALLOTS_MAX: i64 = 2_000;

/// A PostgreSQL round runs in a transaction of its own, never in the
/// writer's batches: a row's `xmin` is its transaction's id, and a round
/// batched with votes would give published ballots the xmin of marks.
/// Positions follow the store's protocol (`store/postgres.rs`).
async fn pg_round(
    p: &crate::store::postgres::PgStore,
    election_id: i64,
    min: i64,
) -> Result<Round, StoreError> {
    let mut client = p.client().await?;
    let take = PG_ROUND_BALLOTS_MAX.max(min);
    // Counted up to one more than a round takes: all a round needs to know
    // (enough for `min`? more waiting?), without reading a box that fell
    // far behind a crowd whole on every round.
    let count = client
        .prepare_cached(
            "SELECT COUNT(*) FROM (SELECT 1 FROM voting_ballot_box WHERE election_id = $1
              LIMIT $2) AS b",
        )
        .await?;
    let n_boxed: i64 = client
        .query_one(&count, &[&election_id, &(take + 1)])
        .await?
        .get(0);
    if n_boxed == 0 || n_boxed < min {
        return Ok(Round::default());
    }
    let tx = client.transaction().await?;
    let take_stmt = tx
        .prepare_cached(
            // A range of the primary key, below the first id the round
            // leaves (computed once, an InitPlan; none left: every id is
            // below 17 bytes of 0xff). The earlier `ballot_id IN (SELECT
            // ... LIMIT $2)` was planned from the box's statistics, taken
            // while it was nearly empty: a nested loop that ran the
            // subquery once per boxed ballot, 11 minutes for a round of
            // 10,000 out of a box of 174,043 (EXPLAIN ANALYZE).
            "DELETE FROM voting_ballot_box WHERE election_id = $1 AND ballot_id < COALESCE(
                (SELECT ballot_id FROM voting_ballot_box WHERE election_id = $1
                  ORDER BY ballot_id OFFSET $2 LIMIT 1),
                '\\xffffffffffffffffffffffffffffffffff'::BYTEA)
             RETURNING ballot_id, district_id, party_id, candidate_ids",
        )
        .await?;
    let mut boxed: Vec<Boxed> = tx
        .query(&take_stmt, &[&election_id, &take])
        .await?
        .iter()
        .map(|r| Boxed {
            ballot_id: r.get(0),
            district_id: r.get(1),
            party_id: r.get(2),
            candidates_json: r.get(3),
        })
        .collect();
    if boxed.is_empty() {
        tx.rollback().await?;
        return Ok(Round::default());
    }
    boxed.sort_by(|a, b| a.ballot_id.cmp(&b.ballot_id));
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
    let positions = crate::store::postgres::append_events(&tx, &events).await?;
    // One prepared statement whatever the round's size (arrays, as the
    // event rows are inserted).
    let insert = tx
        .prepare_cached(
            "INSERT INTO voting_ballots
                (ballot_id, election_id, district_id, party_id, candidate_ids, round, position)
             SELECT b, $2, d, pa, c, $3, po
               FROM unnest($1::BYTEA[], $4::BIGINT[], $5::BIGINT[], $6::TEXT[], $7::BIGINT[])
                 AS r(b, d, pa, c, po)",
        )
        .await?;
    let ids: Vec<&[u8]> = boxed.iter().map(|b| b.ballot_id.as_slice()).collect();
    let districts: Vec<i64> = boxed.iter().map(|b| b.district_id).collect();
    let parties: Vec<i64> = boxed.iter().map(|b| b.party_id).collect();
    let candidates: Vec<&str> = boxed.iter().map(|b| b.candidates_json.as_str()).collect();
    tx.execute(
        &insert,
        &[
            &ids,
            &election_id,
            &round,
            &districts,
            &parties,
            &candidates,
            &positions,
        ],
    )
    .await?;
    tx.commit().await?;
    Ok(Round {
        published: boxed.len(),
        more_waiting: n_boxed > n,
    })
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
