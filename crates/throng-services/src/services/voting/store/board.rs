//! The public ballot board: each period, the ballots cast since the last
//! one get that period's number, and every district that gained ballots
//! gets a new board row (its ballots so far and its digest, chained from
//! the last). Nothing on the board is finer than a period: no voter, no
//! time of a vote. The box is exported from the same rows once the last
//! period after the close has run.

use std::collections::BTreeMap;

use super::super::ballot::{self, Digest32, PeriodDigest, Tracker};
use super::waiting::WaitingTrackers;
use super::{election_event, Votes, VotingStore};
use crate::store::{Columns, Sql, StoreError, Tx};

/// SQLite: the votes since the last period wait in the intake; how many
/// per district, then each by tracker, districts interleaved (sorted: the
/// intake is keyed by batch; the writer sorts in a temporary file past its
/// cache, see `open_connection`).
static WAITING_PER_DISTRICT: Sql = Sql::new(
    "SELECT district_id, COUNT(*) FROM voting_ballot_intake WHERE election_id = ?1
      GROUP BY district_id",
);
static WAITING_IN_INTAKE: Sql = Sql::new(
    "SELECT district_id, receipt_tag FROM voting_ballot_intake WHERE election_id = ?1
      ORDER BY receipt_tag",
);
static INTAKE_TO_BOX: Sql = Sql::new(
    "INSERT INTO voting_ballot_box (election_id, district_id, receipt_tag, sealed, period)
     SELECT election_id, district_id, receipt_tag, sealed, ?2 FROM voting_ballot_intake
      WHERE election_id = ?1 ORDER BY district_id, receipt_tag",
);
static EMPTY_INTAKE: Sql = Sql::new("DELETE FROM voting_ballot_intake WHERE election_id = ?1");
/// PostgreSQL: the votes since the last period are in the box without one.
static TAKE_WAITING: Sql = Sql::new(
    "UPDATE voting_ballot_box SET period = ?2 WHERE election_id = ?1 AND period IS NULL
     RETURNING district_id, receipt_tag",
);
static LAST_DIGESTS: Sql = Sql::new(
    "SELECT b.district_id, b.ballots, b.digest FROM voting_board b
      WHERE b.election_id = ?1 AND b.period = (
        SELECT MAX(period) FROM voting_board
         WHERE election_id = b.election_id AND district_id = b.district_id)",
);
static INSERT_BOARD: Sql = Sql::new(
    "INSERT INTO voting_board (election_id, district_id, period, ballots, digest)
     VALUES (?1, ?2, ?3, ?4, ?5)",
);
static BOARD_STATE: Sql =
    Sql::new("SELECT board_period, state, board_final FROM voting_elections WHERE id = ?1");
/// Whether anything waits for the board's next period, or the board is to
/// be completed (the election over, its last period not run yet).
static PERIOD_DUE: Sql = Sql::per_dialect(
    "SELECT EXISTS (SELECT 1 FROM voting_ballot_intake WHERE election_id = ?1)
         OR EXISTS (SELECT 1 FROM voting_elections WHERE id = ?1 AND board_final = 0
                      AND state NOT IN ('draft', 'open', 'suspended'))",
    "SELECT EXISTS (SELECT 1 FROM voting_ballot_box WHERE election_id = $1 AND period IS NULL)
         OR EXISTS (SELECT 1 FROM voting_elections WHERE id = $1 AND NOT board_final
                      AND state NOT IN ('draft', 'open', 'suspended'))",
);
static SET_PERIOD: Sql = Sql::new(
    "UPDATE voting_elections SET board_period = ?2, board_at_ms = ?3, board_final = ?4
      WHERE id = ?1",
);
static BOARD_PAGE: Sql = Sql::new(
    "SELECT receipt_tag, period FROM voting_ballot_box
      WHERE election_id = ?1 AND district_id = ?2 AND period IS NOT NULL AND receipt_tag > ?3
      ORDER BY receipt_tag LIMIT ?4",
);
static BOARD_FIND: Sql = Sql::new(
    "SELECT period FROM voting_ballot_box
      WHERE election_id = ?1 AND district_id = ?2 AND receipt_tag = ?3 AND period IS NOT NULL",
);
static BOARD_TIME: Sql = Sql::new("SELECT board_at_ms FROM voting_elections WHERE id = ?1");
static BOX_OF: Sql = Sql::new(
    "SELECT district_id, period, sealed, receipt_tag FROM voting_ballot_box
      WHERE election_id = ?1 AND period IS NOT NULL ORDER BY district_id, period, receipt_tag",
);
static SET_KEY: Sql = Sql::new(
    "UPDATE voting_elections SET public_key = ?2, key_threshold = ?3, key_trustees = ?4
      WHERE id = ?1 AND state = 'draft'",
);
static INSERT_RESULTS: Sql = Sql::new(
    "INSERT INTO voting_results (election_id, box_digest, document, imported_at_ms)
     VALUES (?1, ?2, ?3, ?4)",
);
static TALLY: Sql =
    Sql::new("UPDATE voting_elections SET state = 'tallied' WHERE id = ?1 AND state = 'closed'");
static RESULTS_OF: Sql = Sql::new("SELECT document FROM voting_results WHERE election_id = ?1");

/// A district's place on the board.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BoardDistrict {
    pub district_id: i64,
    /// Ballots on the board.
    pub ballots: i64,
    pub digest: Digest32,
}

/// What one period did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Period {
    /// The period's number (0: nothing was published).
    pub period: i64,
    /// Ballots it put on the board.
    pub ballots: usize,
}

/// The box as exported: per district (by id), its ballots by period then
/// tracker.
pub struct BoxRows {
    /// (district, period, sealed, tracker)
    pub ballots: Vec<(i64, i64, Vec<u8>, Tracker)>,
}

fn tracker_of(bytes: Vec<u8>) -> Result<Tracker, StoreError> {
    bytes
        .try_into()
        .map_err(|b: Vec<u8>| StoreError::Internal(format!("a tracker of {} bytes", b.len())))
}

fn digest_of(bytes: Vec<u8>) -> Result<Digest32, StoreError> {
    bytes
        .try_into()
        .map_err(|b: Vec<u8>| StoreError::Internal(format!("a digest of {} bytes", b.len())))
}

impl VotingStore {
    /// Runs one board period for the election, in one write: the ballots
    /// cast since the last period get the next period's number, and each
    /// district that gained some gets its new count and chained digest.
    /// `last` marks the board final (the election is closed and, in the
    /// same write, nothing waits any more). A period with no new ballot
    /// writes nothing, unless it is the last.
    pub async fn board_period(&self, election_id: i64, last: bool) -> Result<Period, StoreError> {
        let votes = self.votes;
        let now = crate::base::clock::now_ms();
        // A read first: an idle election's period writes (and commits)
        // nothing.
        let due = self
            .store
            .read(move |c| {
                Box::pin(async move {
                    c.query_one(&PERIOD_DUE, &[&election_id], |r| r.col::<bool>(0))
                        .await
                })
            })
            .await?;
        if !due {
            return Ok(Period::default());
        }
        let waiting = self.waiting.clone();
        let done = waiting.clone();
        let period = self
            .store
            .write(move |tx| {
                let waiting = waiting.clone();
                Box::pin(
                    async move { period_in(tx, votes, &waiting, election_id, last, now).await },
                )
            })
            .await;
        done.period_done(election_id, period.is_ok());
        period
    }

    /// Every district's latest board row (districts with no ballot yet are
    /// absent).
    pub async fn board(&self, election_id: i64) -> Result<Vec<BoardDistrict>, StoreError> {
        self.store
            .read(move |c| {
                Box::pin(async move {
                    c.query(&LAST_DIGESTS, &[&election_id], |r| {
                        Ok(BoardDistrict {
                            district_id: r.int(0)?,
                            ballots: r.int(1)?,
                            digest: digest_of(r.bytes(2)?)?,
                        })
                    })
                    .await
                })
            })
            .await
    }

    /// When the board's last period ran (Unix ms).
    pub async fn board_at_ms(&self, election_id: i64) -> Result<Option<i64>, StoreError> {
        self.store
            .read(move |c| {
                Box::pin(async move {
                    Ok(c.query_opt(&BOARD_TIME, &[&election_id], |r| r.opt_int(0))
                        .await?
                        .flatten())
                })
            })
            .await
    }

    /// Up to `limit` trackers of a district's board after `after`, with
    /// their periods, in tracker order.
    pub async fn board_page(
        &self,
        election_id: i64,
        district_id: i64,
        after: Tracker,
        limit: i64,
    ) -> Result<Vec<(Tracker, i64)>, StoreError> {
        self.store
            .read(move |c| {
                Box::pin(async move {
                    c.query(
                        &BOARD_PAGE,
                        &[&election_id, &district_id, &after, &limit],
                        |r| Ok((tracker_of(r.bytes(0)?)?, r.int(1)?)),
                    )
                    .await
                })
            })
            .await
    }

    /// The period that put a tracker on a district's board, if it is there.
    pub async fn board_find(
        &self,
        election_id: i64,
        district_id: i64,
        tracker: Tracker,
    ) -> Result<Option<i64>, StoreError> {
        self.store
            .read(move |c| {
                Box::pin(async move {
                    c.query_opt(&BOARD_FIND, &[&election_id, &district_id, &tracker], |r| {
                        r.int(0)
                    })
                    .await
                })
            })
            .await
    }

    /// The election's box: every ballot on the board, read on a connection
    /// of its own.
    pub async fn box_rows(&self, election_id: i64) -> Result<BoxRows, StoreError> {
        self.store
            .read_scan(move |c| {
                Box::pin(async move {
                    let mut ballots = Vec::new();
                    c.for_each(&BOX_OF, &[&election_id], |r| {
                        ballots.push((r.int(0)?, r.int(1)?, r.bytes(2)?, tracker_of(r.bytes(3)?)?));
                        Ok(())
                    })
                    .await?;
                    Ok(BoxRows { ballots })
                })
            })
            .await
    }

    /// Gives a draft its public key (and the trustees' t of n, as the key
    /// file says), with its event; false when the election is not a draft.
    pub async fn set_public_key(
        &self,
        election_id: i64,
        key: Vec<u8>,
        threshold: i64,
        trustees: i64,
        actor: String,
    ) -> Result<bool, StoreError> {
        self.store
            .write(move |tx| {
                let (key, actor) = (key.clone(), actor.clone());
                Box::pin(async move {
                    let n = tx
                        .execute(&SET_KEY, &[&election_id, &key, &threshold, &trustees])
                        .await?;
                    if n == 1 {
                        tx.append(election_event(
                            election_id,
                            "voting.ElectionKeySet",
                            serde_json::json!({"actor": actor, "publicKey": ballot::b64(&key),
                                               "threshold": threshold, "trustees": trustees}),
                        ))?;
                    }
                    Ok(n == 1)
                })
            })
            .await
    }

    /// Stores the trustees' results and takes the step from closed to
    /// tallied, with its event, in one write; false when the election is
    /// not closed (or already has results).
    pub async fn import_results(
        &self,
        election_id: i64,
        box_digest: String,
        document: String,
        actor: String,
    ) -> Result<bool, StoreError> {
        let now = crate::base::clock::now_ms();
        self.store
            .write(move |tx| {
                let (box_digest, document, actor) =
                    (box_digest.clone(), document.clone(), actor.clone());
                Box::pin(async move {
                    let state = tx
                        .query_opt(&BOARD_STATE, &[&election_id], |r| r.text(1))
                        .await?;
                    if state.as_deref() != Some("closed") {
                        return Ok(false);
                    }
                    tx.execute(
                        &INSERT_RESULTS,
                        &[&election_id, &box_digest, &document, &now],
                    )
                    .await?;
                    tx.execute(&TALLY, &[&election_id]).await?;
                    tx.append(election_event(
                        election_id,
                        super::super::admin::TALLIED.2,
                        serde_json::json!({"actor": actor, "boxDigest": box_digest}),
                    ))?;
                    Ok(true)
                })
            })
            .await
    }

    /// The trustees' results document, once imported.
    pub async fn results_document(&self, election_id: i64) -> Result<Option<String>, StoreError> {
        self.store
            .read_scan(move |c| {
                Box::pin(async move {
                    c.query_opt(&RESULTS_OF, &[&election_id], |r| r.text(0))
                        .await
                })
            })
            .await
    }
}

async fn period_in(
    tx: &Tx<'_>,
    votes: Votes,
    waiting: &WaitingTrackers,
    election_id: i64,
    last: bool,
    now: i64,
) -> Result<Period, StoreError> {
    let Some((current, state)) = tx
        .query_opt(&BOARD_STATE, &[&election_id], |r| {
            Ok((r.int(0)?, r.text(1)?))
        })
        .await?
    else {
        return Ok(Period::default());
    };
    // The last period runs only once votes stopped: in this write nothing
    // can be cast after it.
    let last = last && state != "open" && state != "suspended" && state != "draft";
    let period = current + 1;
    let previous: Vec<BoardDistrict> = tx
        .query(&LAST_DIGESTS, &[&election_id], |r| {
            Ok(BoardDistrict {
                district_id: r.int(0)?,
                ballots: r.int(1)?,
                digest: digest_of(r.bytes(2)?)?,
            })
        })
        .await?;
    let extend = |district: i64, count: i64| {
        let (ballots, digest) = previous
            .iter()
            .find(|b| b.district_id == district)
            .map(|b| (b.ballots, b.digest))
            .unwrap_or((0, ballot::board_digest_start(election_id, district)));
        (
            ballots + count,
            PeriodDigest::new(&digest, period, count as u64),
        )
    };
    // Per district that gained ballots: its count after the period and
    // its digest, fed one tracker at a time.
    let mut districts: BTreeMap<i64, (i64, PeriodDigest)> = BTreeMap::new();
    let mut taken = 0usize;
    match votes {
        Votes::RollDecides => {
            // Counted first (the digest covers the count), then streamed:
            // a period's trackers (150,000 in a 10 s period at 15,000
            // votes/s, 6 MB) are never all held in memory.
            for (district, count) in tx
                .query(&WAITING_PER_DISTRICT, &[&election_id], |r| {
                    Ok((r.int(0)?, r.int(1)?))
                })
                .await?
            {
                districts.insert(district, extend(district, count));
                taken += count as usize;
            }
            if taken > 0 {
                tx.for_each(&WAITING_IN_INTAKE, &[&election_id], |r| {
                    let district = r.int(0)?;
                    let (_, digest) = districts.get_mut(&district).ok_or_else(|| {
                        StoreError::Internal(format!("district {district} was not counted"))
                    })?;
                    digest.add(&tracker_of(r.bytes(1)?)?);
                    Ok(())
                })
                .await?;
                // The copy check reads the moved trackers in the box once
                // this commits, and apart until then.
                waiting.period_moves(election_id);
                tx.execute(&INTAKE_TO_BOX, &[&election_id, &period]).await?;
                tx.execute(&EMPTY_INTAKE, &[&election_id]).await?;
            }
        }
        Votes::MarksKeyDecides => {
            let mut rows: Vec<(i64, Tracker)> = tx
                .query(&TAKE_WAITING, &[&election_id, &period], |r| {
                    Ok((r.int(0)?, tracker_of(r.bytes(1)?)?))
                })
                .await?;
            rows.sort_unstable();
            for group in rows.chunk_by(|a, b| a.0 == b.0) {
                let (count, mut digest) = extend(group[0].0, group.len() as i64);
                group.iter().for_each(|(_, t)| digest.add(t));
                districts.insert(group[0].0, (count, digest));
            }
            taken = rows.len();
        }
    }
    if taken == 0 && !last {
        return Ok(Period::default());
    }
    for (district, (total, digest)) in districts {
        let next = digest.finish().ok_or_else(|| {
            StoreError::Internal(format!(
                "district {district}: the period's trackers changed while it ran"
            ))
        })?;
        tx.execute(
            &INSERT_BOARD,
            &[&election_id, &district, &period, &total, &next],
        )
        .await?;
    }
    tx.execute(&SET_PERIOD, &[&election_id, &period, &now, &last])
        .await?;
    Ok(Period {
        period,
        ballots: taken,
    })
}
