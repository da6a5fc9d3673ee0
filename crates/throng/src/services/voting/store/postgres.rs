//! Voting on a shared PostgreSQL: other nodes vote too, so the mark's
//! primary key decides one vote per voter (`INSERT .. ON CONFLICT DO
//! NOTHING`, the box insert fed by its `RETURNING`), and votes go straight
//! into the box (nothing to settle). A round runs in a transaction of its
//! own, takes whole districts up to [`PG_ROUND_BALLOTS_MAX`] ballots, and is
//! followed by `VACUUM voting_ballot_box`.

use std::sync::{Arc, LazyLock};

use futures::future::BoxFuture;
use futures::StreamExt;
use indicatif::ProgressBar;
use tokio_postgres::types::ToSql;

use super::super::model::ElectionRows;
use super::super::receipt::{ReceiptKey, RECEIPT_BYTES};
use super::super::roll::Roll;
use super::super::seed::{self, SeedVotingArgs};
use super::{
    ballot_event, candidate_row, district_row, election_row, int_pair, int_triple, legacy_box_row,
    legacy_id_row, party_row, receipt_state, roll_range_row, roll_slot, split_tallies, sql, tag_of,
    tally_row, Boxed, BoxedBallot, Columns, ReceiptState, Round, Settled, Tallies, TallyKey,
    VoteOutcome, VotingStore,
};
use crate::store::postgres::PgStore;
use crate::store::{pg_placeholders, NewEvent, StoreError};

/// Ballots one PostgreSQL round publishes at most (whole districts; one
/// district fuller than this is published whole). A fuller box is
/// published over several rounds, one after the other (`mixer.rs`), each
/// holding ~1 KB a ballot in memory. Unbounded, one round of 133,856
/// ballots took the server from 75 to 179 MiB; the server's peak under
/// `throng bench voting --store postgres://... --only "fresh voter"` was
/// 72-82 MiB at 10,000, 61-66 at 5,000 and 50-53 at 2,000, the mixer keeping
/// up at each (BENCHMARKS.md).
pub const PG_ROUND_BALLOTS_MAX: i64 = 2_000;

static ROLL_RANGE: LazyLock<String> = LazyLock::new(|| pg_placeholders(sql::ROLL_RANGE));
static ROLL: LazyLock<String> = LazyLock::new(|| pg_placeholders(sql::ROLL));
static MARKS: LazyLock<String> = LazyLock::new(|| pg_placeholders(sql::MARKS));
static DUE: LazyLock<String> = LazyLock::new(|| pg_placeholders(sql::DUE));
static SAVE_TALLY_POSITION: LazyLock<String> =
    LazyLock::new(|| pg_placeholders(sql::SAVE_TALLY_POSITION));

/// A receipt's reads in one statement (one snapshot): the box, the counted
/// tags, the election's last round position (as `BIGINT`).
static RECEIPT: LazyLock<String> = LazyLock::new(|| {
    format!(
        "SELECT ({}), ({}), ({})",
        pg_placeholders(sql::BOXED),
        pg_placeholders(sql::COUNTED),
        pg_placeholders(sql::LAST).replace(
            "COALESCE(MAX(last_position), 0)",
            "COALESCE(MAX(last_position), 0)::BIGINT"
        )
    )
});

/// A receipt's tag as counted (a receipt without a check, found by its tag
/// once published).
const COUNT_TAG: &str =
    "INSERT INTO voting_receipts_counted (election_id, receipt_tag) VALUES ($1, $2)
                     ON CONFLICT DO NOTHING";

/// Typed literals: the position's row is unioned with the tallies' BIGINTs.
const READ_TALLIES: &str = "SELECT -1::BIGINT, 0::BIGINT, 0::BIGINT, 0::BIGINT,
                             COALESCE((SELECT position FROM consumer_positions WHERE consumer = $1), 0)
                      UNION ALL
                      SELECT election_id, district_id, party_id, candidate_id, votes FROM voting_tallies";

pub struct PgVoting {
    db: Arc<PgStore>,
}

impl PgVoting {
    pub fn new(db: Arc<PgStore>) -> PgVoting {
        PgVoting { db }
    }
}

impl VotingStore for PgVoting {
    fn election_rows(&self) -> BoxFuture<'_, Result<ElectionRows, StoreError>> {
        Box::pin(async move {
            let client = self.db.client().await?;
            let elections = client
                .query(sql::ELECTIONS, &[])
                .await?
                .iter()
                .map(election_row)
                .collect::<Result<_, _>>()?;
            let districts = client
                .query(sql::DISTRICTS, &[])
                .await?
                .iter()
                .map(district_row)
                .collect::<Result<_, _>>()?;
            let parties = client
                .query(sql::PARTIES, &[])
                .await?
                .iter()
                .map(party_row)
                .collect::<Result<_, _>>()?;
            let candidates = client
                .query(sql::CANDIDATES, &[])
                .await?
                .iter()
                .map(candidate_row)
                .collect::<Result<_, _>>()?;
            Ok(ElectionRows {
                elections,
                districts,
                parties,
                candidates,
            })
        })
    }

    fn load_roll(
        &self,
        election_id: i64,
        district_ids: Vec<i64>,
    ) -> BoxFuture<'_, anyhow::Result<Roll>> {
        Box::pin(async move {
            let client = self.db.client().await?;
            let r = client
                .query_one(ROLL_RANGE.as_str(), &[&election_id])
                .await?;
            let (lo, hi, n) = roll_range_row(&r)?;
            let mut roll = Roll::with_range(lo.unwrap_or(1), hi.unwrap_or(0), n)?;
            let stmt = client.prepare(&ROLL).await?;
            let rows = client
                .query_raw(&stmt, [&election_id as &(dyn ToSql + Sync)])
                .await?;
            futures::pin_mut!(rows);
            while let Some(r) = rows.next().await {
                let (voter_id, district_id) = int_pair(&r?)?;
                if let Some(i) = roll_slot(&district_ids, district_id) {
                    roll.put(voter_id, i);
                }
            }
            Ok(roll)
        })
    }

    fn mark_voted(
        &self,
        election_id: i64,
        roll: Arc<Roll>,
    ) -> BoxFuture<'_, Result<usize, StoreError>> {
        Box::pin(async move {
            let client = self.db.client().await?;
            let stmt = client.prepare(&MARKS).await?;
            let rows = client
                .query_raw(&stmt, [&election_id as &(dyn ToSql + Sync)])
                .await?;
            futures::pin_mut!(rows);
            let mut n = 0;
            while let Some(r) = rows.next().await {
                roll.test_and_set(r?.int(0)?);
                n += 1;
            }
            Ok(n)
        })
    }

    /// Nothing to settle: votes write into the box, marks stay keyed by
    /// voter.
    fn settle(&self, _election_id: i64) -> BoxFuture<'_, Result<Settled, StoreError>> {
        Box::pin(async { Ok(Settled::default()) })
    }

    fn cast<'a>(
        &'a self,
        roll: &'a Arc<Roll>,
        voter_id: i64,
        ballot: BoxedBallot,
    ) -> BoxFuture<'a, Result<VoteOutcome, StoreError>> {
        Box::pin(async move {
            let outcome = self
                .db
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
        })
    }

    fn receipt(
        &self,
        election_id: i64,
        tag: [u8; RECEIPT_BYTES],
        minted: bool,
    ) -> BoxFuture<'_, Result<Option<ReceiptState>, StoreError>> {
        Box::pin(async move {
            let client = self.db.client().await?;
            let stmt = client.prepare_cached(&RECEIPT).await?;
            let r = client.query_one(&stmt, &[&election_id, &&tag[..]]).await?;
            Ok(receipt_state(minted, int_triple(&r)?))
        })
    }

    fn adopt_legacy<'a>(
        &'a self,
        keys: &'a Arc<ReceiptKey>,
    ) -> BoxFuture<'a, Result<usize, StoreError>> {
        Box::pin(async move {
            let mut client = self.db.client().await?;
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
            let rows = match tx.query(sql::LEGACY_BOX, &[]).await {
                Ok(rows) => rows,
                Err(e) if e.code() == Some(&tokio_postgres::error::SqlState::UNDEFINED_TABLE) => {
                    return Ok(0)
                }
                Err(e) => return Err(e.into()),
            };
            for r in &rows {
                let (id, e, d, pa, cands) = legacy_box_row(r)?;
                let Some(tag) = tag_of(keys, e, &id) else {
                    continue;
                };
                let sealed = keys.seal(e, d, &tag, super::choice(pa, &cands).as_bytes());
                tx.execute(
                    "INSERT INTO voting_ballot_box (receipt_tag, election_id, district_id, sealed)
                     VALUES ($1, $2, $3, $4) ON CONFLICT DO NOTHING",
                    &[&&tag[..], &e, &d, &sealed],
                )
                .await?;
                // A receipt without a check: found by its tag once published.
                tx.execute(COUNT_TAG, &[&e, &&tag[..]]).await?;
            }
            for r in tx.query(sql::LEGACY_IDS, &[]).await? {
                let (e, id) = legacy_id_row(&r)?;
                let Some(tag) = tag_of(keys, e, &id) else {
                    continue;
                };
                tx.execute(COUNT_TAG, &[&e, &&tag[..]]).await?;
            }
            tx.batch_execute(
                "DROP TABLE voting_ballot_box_legacy; DROP TABLE voting_receipts_legacy",
            )
            .await?;
            tx.commit().await?;
            Ok(rows.len())
        })
    }

    fn due_districts(
        &self,
        election_id: i64,
        min: i64,
    ) -> BoxFuture<'_, Result<Vec<(i64, i64)>, StoreError>> {
        Box::pin(async move {
            let client = self.db.client().await?;
            let stmt = client.prepare_cached(&DUE).await?;
            client
                .query(&stmt, &[&election_id, &min])
                .await?
                .iter()
                .map(int_pair)
                .collect()
        })
    }

    fn round_ballots_max(&self) -> Option<i64> {
        Some(PG_ROUND_BALLOTS_MAX)
    }

    /// In a transaction of its own, never in the writer's batches: a row's
    /// `xmin` is its transaction's id, and a round batched with votes would
    /// give published ballots the xmin of marks. Positions follow the
    /// store's protocol (`store/postgres.rs`).
    fn round<'a>(
        &'a self,
        keys: &'a Arc<ReceiptKey>,
        election_id: i64,
        districts: Vec<i64>,
    ) -> BoxFuture<'a, Result<Round, StoreError>> {
        Box::pin(async move {
            let mut client = self.db.client().await?;
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
            publish(&tx, election_id, &boxed).await?;
            tx.commit().await?;
            Ok(Round {
                published: boxed.len(),
                districts: districts_taken.len(),
                more_waiting: false,
            })
        })
    }

    /// Deleted box rows keep their data (and the xmin of the vote's
    /// transaction, shared with its mark) until vacuumed; a failed VACUUM
    /// (CockroachDB and YugabyteDB have none) is logged.
    fn vacuum_box(&self) -> BoxFuture<'_, Result<(), StoreError>> {
        Box::pin(async move {
            let client = self.db.client().await?;
            if let Err(e) = client.batch_execute("VACUUM voting_ballot_box").await {
                tracing::warn!(error = %e, "VACUUM voting_ballot_box failed");
            }
            Ok(())
        })
    }

    fn publish_seeded(
        &self,
        election_id: i64,
        voters: Vec<i64>,
        boxed: Vec<Boxed>,
    ) -> BoxFuture<'_, Result<(), StoreError>> {
        Box::pin(async move {
            let mut client = self.db.client().await?;
            let tx = client.transaction().await?;
            tx.execute(
                "INSERT INTO voting_marks (election_id, voter_id)
                 SELECT $1, v FROM unnest($2::BIGINT[]) AS r(v) ON CONFLICT DO NOTHING",
                &[&election_id, &voters],
            )
            .await?;
            publish(&tx, election_id, &boxed).await?;
            tx.commit().await?;
            Ok(())
        })
    }

    fn seed_election<'a>(
        &'a self,
        args: &'a SeedVotingArgs,
        opens: i64,
        closes: i64,
        bar: &'a ProgressBar,
    ) -> BoxFuture<'a, anyhow::Result<()>> {
        Box::pin(seed::seed_pg(&self.db, args, opens, closes, bar))
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
        Box::pin(self.db.write(move |tx| {
            let (owner, deltas) = (owner.clone(), deltas.clone());
            Box::pin(async move {
                let held = tx
                    .tx
                    .execute(
                        SAVE_TALLY_POSITION.as_str(),
                        &[&consumer, &&*owner, &position, &until],
                    )
                    .await?;
                if held != 1 {
                    return Ok(false);
                }
                // `votes` alone would be ambiguous beside `excluded.votes`.
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
        }))
    }

    fn read_tallies(&self, consumer: &'static str) -> BoxFuture<'_, Result<Tallies, StoreError>> {
        Box::pin(async move {
            let client = self.db.client().await?;
            let rows = client
                .query(READ_TALLIES, &[&consumer])
                .await?
                .iter()
                .map(tally_row)
                .collect::<Result<_, _>>()?;
            Ok(split_tallies(rows))
        })
    }
}

/// Appends `boxed` as the election's next round: ballots, events and the
/// round's row.
async fn publish(
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
