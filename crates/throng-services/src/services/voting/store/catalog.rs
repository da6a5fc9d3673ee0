//! What a node keeps in memory: every election's static rows, its roll, and
//! who voted.

use std::sync::Arc;

use super::super::model::ElectionRows;
use super::super::roll::Roll;
use super::{candidate_row, district_row, election_row, int_pair, party_row, VotingStore};
use crate::store::{Columns, Sql, StoreError};

static ELECTIONS: Sql = Sql::new(concat!(
    "SELECT ",
    crate::voting_election_columns!(),
    " FROM voting_elections"
));
static DISTRICTS: Sql =
    Sql::new("SELECT election_id, district_id, name, code, region FROM voting_districts");
static PARTIES: Sql =
    Sql::new("SELECT election_id, party_id, name, short_name, code, color FROM voting_parties");
static CANDIDATES: Sql = Sql::new(
    "SELECT election_id, candidate_id, district_id, party_id, list_position, name
       FROM voting_candidates",
);
static ROLL_RANGE: Sql = Sql::new(
    "SELECT MIN(voter_id), MAX(voter_id), COUNT(*) FROM voting_voters WHERE election_id = ?1",
);
static ROLL: Sql =
    Sql::new("SELECT voter_id, district_id FROM voting_voters WHERE election_id = ?1");

/// A row of [`ROLL_RANGE`]: lowest and highest voter id (none on an empty
/// roll), voters.
fn roll_range_row(r: &impl Columns) -> Result<(Option<i64>, Option<i64>, i64), StoreError> {
    Ok((r.opt_int(0)?, r.opt_int(1)?, r.int(2)?))
}

/// A voter's slot in its election's roll: the index of its district among
/// the election's `district_ids` (in id order).
fn roll_slot(district_ids: &[i64], district_id: i64) -> Option<u16> {
    district_ids
        .binary_search(&district_id)
        .ok()
        .map(|i| i as u16)
}

impl VotingStore {
    /// The static tables of every election.
    pub async fn election_rows(&self) -> Result<ElectionRows, StoreError> {
        self.store
            .read_blocking(|c| {
                Box::pin(async move {
                    Ok(ElectionRows {
                        elections: c.query(&ELECTIONS, &[], |r| election_row(r)).await?,
                        districts: c.query(&DISTRICTS, &[], |r| district_row(r)).await?,
                        parties: c.query(&PARTIES, &[], |r| party_row(r)).await?,
                        candidates: c.query(&CANDIDATES, &[], |r| candidate_row(r)).await?,
                    })
                })
            })
            .await
    }

    /// Loads an election's roll; `district_ids` are the election's districts
    /// in id order (a voter's slot is the index of its district). The roll's
    /// rows are streamed, off the async workers, on SQLite through a
    /// connection of its own ([`crate::store::Store::read_scan`]).
    pub async fn load_roll(
        &self,
        election_id: i64,
        district_ids: Vec<i64>,
    ) -> Result<Roll, StoreError> {
        self.store
            .read_scan(move |c| {
                Box::pin(async move {
                    let (lo, hi, n) = c
                        .query_one(&ROLL_RANGE, &[&election_id], |r| roll_range_row(r))
                        .await?;
                    let mut roll = Roll::with_range(lo.unwrap_or(1), hi.unwrap_or(0), n)
                        .map_err(|e| StoreError::Internal(format!("{e:#}")))?;
                    c.for_each(&ROLL, &[&election_id], |r| {
                        let (voter_id, district_id) = int_pair(r)?;
                        if let Some(i) = roll_slot(&district_ids, district_id) {
                            roll.put(voter_id, i);
                        }
                        Ok(())
                    })
                    .await?;
                    Ok(roll)
                })
            })
            .await
    }

    /// Sets the voted bit of everyone who voted in the election; how many
    /// (see [`super::Votes::mark_voted`]).
    pub async fn mark_voted(&self, election_id: i64, roll: Arc<Roll>) -> Result<usize, StoreError> {
        self.votes.mark_voted(&self.store, election_id, roll).await
    }
}
