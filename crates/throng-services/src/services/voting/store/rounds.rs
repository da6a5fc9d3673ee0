//! The mixer's rounds: a district's ballots out of the box, opened and
//! published in the order of their random tags, one `BallotCast` event
//! each; how a round runs differs by the store's writers ([`Rounds`]).

use std::collections::BTreeSet;
use std::sync::Arc;

use super::super::model::{ballot_stream, EVENT_BALLOT_CAST};
use super::super::receipt::{ReceiptKey, RECEIPT_BYTES};
use super::{int_pair, Round, VotingStore};
use crate::store::{Columns, NewEvent, Sql, Store, StoreError, Tx};

/// Ballots one PostgreSQL round publishes at most (whole districts; one
/// district fuller than this is published whole). A fuller box is
/// published over several rounds, one after the other (`mixer.rs`), each
/// holding ~1 KB a ballot in memory. Unbounded, one round of 133,856
/// ballots took the server from 75 to 179 MiB; the server's peak under
/// `throng bench voting --store postgres://... --only "fresh voter"` was
/// 72-82 MiB at 10,000, 61-66 at 5,000 and 50-53 at 2,000, the mixer keeping
/// up at each (BENCHMARKS.md).
pub const PG_ROUND_BALLOTS_MAX: i64 = 2_000;

/// How a round takes ballots out of the box and publishes them. Chosen once
/// from the store's writers ([`VotingStore::open`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Rounds {
    /// One writer process (SQLite): a round is a command of the writer on
    /// rows already in its cache, so it takes every due district at once,
    /// a statement a district and a ballot (no round trips); the box rows'
    /// bytes are zeroed as they are deleted (`secure_delete`, every
    /// connection: store/sqlite.rs).
    InWriter,
    /// Writers shared by nodes (PostgreSQL): a round is a transaction of
    /// its own ([`Store::write_apart`]), never in the writer's batches: a
    /// row's `xmin` is its transaction's id, and a round batched with votes
    /// would give published ballots the xmin of marks. It takes whole
    /// districts up to `ballots_max` ballots, in set-based statements (one
    /// round trip each, whatever the round's size), and is followed by
    /// `VACUUM voting_ballot_box`: deleted box rows keep their data (and
    /// the xmin of the vote's transaction, shared with its mark) until
    /// vacuumed.
    OwnTransaction { ballots_max: i64 },
}

static DUE: Sql = Sql::new(
    "SELECT district_id, COUNT(*) FROM voting_ballot_box WHERE election_id = ?1
      GROUP BY district_id HAVING COUNT(*) >= ?2 ORDER BY district_id",
);
static NEXT_ROUND: Sql =
    Sql::new("SELECT COALESCE(MAX(round), 0) + 1 FROM voting_rounds WHERE election_id = ?1");
static INSERT_ROUND: Sql = Sql::new(
    "INSERT INTO voting_rounds (election_id, round, ballots, published_at_ms, last_position)
     VALUES (?1, ?2, ?3, ?4, ?5)",
);
static INSERT_MARK: Sql = Sql::new(
    "INSERT INTO voting_marks (election_id, voter_id) VALUES (?1, ?2) ON CONFLICT DO NOTHING",
);

// A round in the writer ([`Rounds::InWriter`]).
static BOXED_IN_DISTRICT: Sql = Sql::new(
    "SELECT receipt_tag, sealed FROM voting_ballot_box
      WHERE election_id = ?1 AND district_id = ?2",
);
static EMPTY_DISTRICT: Sql =
    Sql::new("DELETE FROM voting_ballot_box WHERE election_id = ?1 AND district_id = ?2");
static INSERT_BALLOT: Sql = Sql::new(
    "INSERT INTO voting_ballots (election_id, district_id, party_id, candidate_ids, round, position)
     VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
);

// A round in a transaction of its own ([`Rounds::OwnTransaction`]): arrays.
static TAKE_DISTRICTS: Sql = Sql::new(
    "DELETE FROM voting_ballot_box WHERE election_id = ?1 AND district_id = ANY(?2)
     RETURNING receipt_tag, district_id, sealed",
);
static INSERT_BALLOTS: Sql = Sql::new(
    "INSERT INTO voting_ballots (election_id, district_id, party_id, candidate_ids, round, position)
     SELECT ?1, d, pa, c, ?2, po
       FROM unnest(?3::BIGINT[], ?4::BIGINT[], ?5::TEXT[], ?6::BIGINT[]) AS r(d, pa, c, po)",
);
static VACUUM_BOX: Sql = Sql::new("VACUUM voting_ballot_box");

/// One ballot taken out of the box and opened.
pub(super) struct Boxed {
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

/// A box row as a round takes it: tag, district, sealed choice.
type Taken = (Vec<u8>, i64, Vec<u8>);

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

impl Rounds {
    /// Ballots one round takes at most (whole districts; one district
    /// fuller than this is taken whole); `None`: every due district.
    pub fn ballots_max(self) -> Option<i64> {
        match self {
            Rounds::InWriter => None,
            Rounds::OwnTransaction { ballots_max } => Some(ballots_max),
        }
    }

    /// Takes `districts`' box rows out of the box (deleted, the round's
    /// transaction publishing them).
    async fn take(
        self,
        tx: &Tx<'_>,
        election_id: i64,
        districts: &[i64],
    ) -> Result<Vec<Taken>, StoreError> {
        match self {
            Rounds::InWriter => {
                let mut taken = Vec::new();
                for &d in districts {
                    taken.extend(
                        tx.query(&BOXED_IN_DISTRICT, &[&election_id, &d], |r| {
                            Ok((r.bytes(0)?, d, r.bytes(1)?))
                        })
                        .await?,
                    );
                    tx.execute(&EMPTY_DISTRICT, &[&election_id, &d]).await?;
                }
                Ok(taken)
            }
            Rounds::OwnTransaction { .. } => {
                tx.query(&TAKE_DISTRICTS, &[&election_id, &districts], |r| {
                    Ok((r.bytes(0)?, r.int(1)?, r.bytes(2)?))
                })
                .await
            }
        }
    }

    /// Appends `boxed` as round `round`'s ballots, each with its event; the
    /// last event's position.
    async fn append_ballots(
        self,
        tx: &Tx<'_>,
        election_id: i64,
        round: i64,
        boxed: &[Boxed],
    ) -> Result<i64, StoreError> {
        match self {
            Rounds::InWriter => {
                let mut last_position = 0;
                for b in boxed {
                    let event = ballot_event(election_id, round, b);
                    let position = tx.append_positioned(std::slice::from_ref(&event)).await?[0];
                    last_position = position;
                    tx.execute(
                        &INSERT_BALLOT,
                        &[
                            &election_id,
                            &b.district_id,
                            &b.party_id,
                            &b.candidates_json,
                            &round,
                            &position,
                        ],
                    )
                    .await?;
                }
                Ok(last_position)
            }
            Rounds::OwnTransaction { .. } => {
                let events: Vec<NewEvent> = boxed
                    .iter()
                    .map(|b| ballot_event(election_id, round, b))
                    .collect();
                // Positions come from the store's one protocol (see
                // store/postgres.rs).
                let positions = tx.append_positioned(&events).await?;
                // One prepared statement whatever the round's size (arrays,
                // as the event rows are inserted).
                let districts: Vec<i64> = boxed.iter().map(|b| b.district_id).collect();
                let parties: Vec<i64> = boxed.iter().map(|b| b.party_id).collect();
                let candidates: Vec<String> =
                    boxed.iter().map(|b| b.candidates_json.clone()).collect();
                tx.execute(
                    &INSERT_BALLOTS,
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
                Ok(positions.iter().copied().max().unwrap_or(0))
            }
        }
    }

    /// After a round that published ballots: clears the deleted box rows
    /// out of the table's pages where deleting leaves them; a failed VACUUM
    /// (CockroachDB and YugabyteDB have none) is logged.
    async fn vacuum_box(self, store: &Store) {
        if self == Rounds::InWriter {
            return;
        }
        // On a pooled connection, outside any transaction (VACUUM cannot
        // run in one).
        let vacuumed = store
            .read(|c| Box::pin(async move { c.batch(&VACUUM_BOX).await }))
            .await;
        if let Err(e) = vacuumed {
            tracing::warn!(error = %e, "VACUUM voting_ballot_box failed");
        }
    }
}

/// Appends `boxed` as the election's next round: ballots, events and the
/// round's row.
async fn publish(
    tx: &Tx<'_>,
    rounds: Rounds,
    election_id: i64,
    boxed: &[Boxed],
) -> Result<(), StoreError> {
    let round = tx
        .query_one(&NEXT_ROUND, &[&election_id], |r| r.int(0))
        .await?;
    let last_position = rounds.append_ballots(tx, election_id, round, boxed).await?;
    tx.execute(
        &INSERT_ROUND,
        &[
            &election_id,
            &round,
            &(boxed.len() as i64),
            &crate::base::clock::now_ms(),
            &last_position,
        ],
    )
    .await?;
    Ok(())
}

impl VotingStore {
    /// The districts whose box holds at least `min` ballots, with their
    /// counts, in district order; read apart from the writer.
    pub async fn due_districts(
        &self,
        election_id: i64,
        min: i64,
    ) -> Result<Vec<(i64, i64)>, StoreError> {
        self.store
            .read(move |c| {
                Box::pin(async move { c.query(&DUE, &[&election_id, &min], |r| int_pair(r)).await })
            })
            .await
    }

    /// Publishes `districts`' boxes as one round: in one transaction their
    /// ballots move (opened, in the order of their random tags) to
    /// `voting_ballots` with one `BallotCast` event each (without their
    /// tags), and their box rows are deleted. How: see [`Rounds`].
    pub async fn round(
        &self,
        keys: &Arc<ReceiptKey>,
        election_id: i64,
        districts: Vec<i64>,
    ) -> Result<Round, StoreError> {
        let (keys, rounds, districts) = (keys.clone(), self.rounds, Arc::new(districts));
        self.store
            .write_apart(move |tx| {
                let (keys, districts) = (keys.clone(), districts.clone());
                Box::pin(async move {
                    let taken = rounds.take(tx, election_id, &districts).await?;
                    if taken.is_empty() {
                        return Ok(Round::default());
                    }
                    let mut districts_taken = BTreeSet::new();
                    let mut boxed = Vec::with_capacity(taken.len());
                    for (tag, d, sealed) in taken {
                        districts_taken.insert(d);
                        boxed.push(Boxed::open(&keys, election_id, d, tag, &sealed)?);
                    }
                    boxed.sort_by(|a, b| a.tag.cmp(&b.tag));
                    publish(tx, rounds, election_id, &boxed).await?;
                    Ok(Round {
                        published: boxed.len(),
                        districts: districts_taken.len(),
                        more_waiting: false,
                    })
                })
            })
            .await
    }

    /// Publishes, as one round, every district of the election whose box
    /// holds at least `min` ballots (whole districts up to
    /// [`Rounds::ballots_max`] ballots, where a round is bounded): see
    /// [`VotingStore::round`]. A district with fewer than `min` stays in
    /// the box: nothing about it moves.
    pub async fn publish_round(
        &self,
        keys: &Arc<ReceiptKey>,
        election_id: i64,
        min: i64,
    ) -> Result<Round, StoreError> {
        // Which districts are due, read apart from the writer (counts only
        // grow between this read and the round: the mixer alone takes
        // ballots out).
        let due = self.due_districts(election_id, min).await?;
        if due.is_empty() {
            return Ok(Round::default());
        }
        let take = round_districts(&due, self.rounds.ballots_max());
        let taken = take.len();
        let mut round = self.round(keys, election_id, take).await?;
        round.more_waiting = taken < due.len();
        if round.published > 0 {
            self.rounds.vacuum_box(&self.store).await;
        }
        Ok(round)
    }

    /// Demo only: marks `ballots`' voters (voter, district, party,
    /// candidates) as voted and publishes their ballots as one round, as if
    /// the mixer had (no receipts: nobody holds one).
    pub async fn seed_published(
        &self,
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
        let (rounds, seeded) = (self.rounds, Arc::new((voters, boxed)));
        self.store
            .write_apart(move |tx| {
                let seeded = seeded.clone();
                Box::pin(async move {
                    let (voters, boxed) = &*seeded;
                    for v in voters {
                        tx.execute(&INSERT_MARK, &[&election_id, v]).await?;
                    }
                    publish(tx, rounds, election_id, boxed).await
                })
            })
            .await
    }
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
    fn statements_take_postgres_placeholders() {
        assert_eq!(
            DUE.postgres(),
            "SELECT district_id, COUNT(*) FROM voting_ballot_box WHERE election_id = $1
      GROUP BY district_id HAVING COUNT(*) >= $2 ORDER BY district_id"
        );
        assert!(INSERT_BALLOTS.postgres().contains("unnest($3::BIGINT[]"));
    }

    #[test]
    fn a_round_is_bounded_only_in_a_transaction_of_its_own() {
        assert_eq!(Rounds::InWriter.ballots_max(), None);
        assert_eq!(
            Rounds::OwnTransaction {
                ballots_max: PG_ROUND_BALLOTS_MAX
            }
            .ballots_max(),
            Some(PG_ROUND_BALLOTS_MAX)
        );
    }
}
