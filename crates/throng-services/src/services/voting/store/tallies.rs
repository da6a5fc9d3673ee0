//! The tallies' table and the projector's position, kept in one
//! transaction (`tally.rs`).

use std::sync::Arc;

use super::{Tallies, TallyKey, VotingStore};
use crate::store::{Columns, Sql, StoreError};

static SAVE_POSITION: Sql = Sql::new(
    "UPDATE consumer_positions SET position = ?3, lease_until_ms = ?4
      WHERE consumer = ?1 AND lease_owner = ?2",
);
/// `votes` alone would be ambiguous beside `excluded.votes` on PostgreSQL.
static ADD: Sql = Sql::new(
    "INSERT INTO voting_tallies (election_id, district_id, party_id, candidate_id, votes)
     VALUES (?1, ?2, ?3, ?4, ?5)
     ON CONFLICT (election_id, district_id, party_id, candidate_id)
     DO UPDATE SET votes = voting_tallies.votes + excluded.votes",
);
/// The position's row is unioned with the tallies' `BIGINT`s, its
/// literals typed to match.
static READ: Sql = Sql::new(
    "SELECT CAST(-1 AS BIGINT), CAST(0 AS BIGINT), CAST(0 AS BIGINT), CAST(0 AS BIGINT),
            COALESCE((SELECT position FROM consumer_positions WHERE consumer = ?1), 0)
     UNION ALL
     SELECT election_id, district_id, party_id, candidate_id, votes FROM voting_tallies",
);

/// A row of [`READ`]: key and votes (the position's row has election -1).
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

impl VotingStore {
    /// Adds `deltas` to the tallies and saves the projector's position, in
    /// one transaction, only while `owner` holds the consumer's lease;
    /// `false` when the lease was lost (nothing written).
    pub async fn tally_step(
        &self,
        consumer: &'static str,
        owner: Arc<str>,
        position: i64,
        lease_ms: i64,
        deltas: Arc<Vec<(TallyKey, i64)>>,
    ) -> Result<bool, StoreError> {
        let until = crate::base::clock::now_ms() + lease_ms;
        self.store
            .write(move |tx| {
                let (owner, deltas) = (owner.clone(), deltas.clone());
                Box::pin(async move {
                    let held = tx
                        .execute(&SAVE_POSITION, &[&consumer, &&*owner, &position, &until])
                        .await?;
                    if held != 1 {
                        return Ok(false);
                    }
                    for ((e, d, p, k), n) in deltas.iter() {
                        tx.execute(&ADD, &[e, d, p, k, n]).await?;
                    }
                    Ok(true)
                })
            })
            .await
    }

    /// The tallies and the projector's position, read in one statement (one
    /// snapshot in both dialects).
    pub async fn read_tallies(&self, consumer: &'static str) -> Result<Tallies, StoreError> {
        let rows = self
            .store
            .read_blocking(move |c| {
                Box::pin(async move { c.query(&READ, &[&consumer], |r| tally_row(r)).await })
            })
            .await?;
        Ok(split_tallies(rows))
    }
}
