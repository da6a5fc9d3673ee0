//! The baseline on SQLite: reads on the store's read connections, the
//! insert through its writer (one command of a group commit).

use std::sync::Arc;

use futures::future::BoxFuture;

use super::{election_hours, sql, BallotRows, BaselineStore, VoteRows};
use crate::services::voting::model::ElectionRows;
use crate::services::voting::store::{candidate_row, district_row, election_row, party_row};
use crate::store::sqlite::SqliteStore;
use crate::store::sqlite::{all, optional};
use crate::store::{Columns, StoreError};

/// The baseline's table and the candidates' index.
const DDL: &str = "
CREATE TABLE IF NOT EXISTS voting_baseline_votes (
    election_id INTEGER NOT NULL,
    voter_id INTEGER NOT NULL,
    district_id INTEGER NOT NULL,
    party_id INTEGER NOT NULL,
    candidate_ids TEXT NOT NULL,
    PRIMARY KEY (election_id, voter_id)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS voting_candidates_by_list
    ON voting_candidates (election_id, district_id, party_id, list_position, name);
DELETE FROM voting_baseline_votes;";

pub struct SqliteBaseline {
    db: Arc<SqliteStore>,
}

impl SqliteBaseline {
    pub fn new(db: Arc<SqliteStore>) -> SqliteBaseline {
        SqliteBaseline { db }
    }
}

impl BaselineStore for SqliteBaseline {
    fn create_tables(&self) -> BoxFuture<'_, anyhow::Result<()>> {
        Box::pin(async move {
            self.db
                .write(|c| {
                    c.execute_batch(DDL)?;
                    Ok(())
                })
                .await?;
            Ok(())
        })
    }

    fn ballot_rows(
        &self,
        election_id: i64,
        district_id: i64,
    ) -> BoxFuture<'_, Result<BallotRows, StoreError>> {
        Box::pin(self.db.read(move |c| {
            let Some(election) =
                optional(&mut *c.prepare_cached(sql::ELECTION)?, [election_id], |r| {
                    election_row(r)
                })?
            else {
                return Ok(BallotRows::NoElection);
            };
            let Some(district) = optional(
                &mut *c.prepare_cached(sql::DISTRICT)?,
                [election_id, district_id],
                |r| district_row(r),
            )?
            else {
                return Ok(BallotRows::NoDistrict);
            };
            let parties = all(&mut *c.prepare_cached(sql::PARTIES)?, [election_id], |r| {
                party_row(r)
            })?;
            let candidates = all(
                &mut *c.prepare_cached(sql::CANDIDATES)?,
                [election_id, district_id],
                |r| candidate_row(r),
            )?;
            Ok(BallotRows::Found(ElectionRows {
                elections: vec![election],
                districts: vec![district],
                parties,
                candidates,
            }))
        }))
    }

    fn vote_rows(
        &self,
        election_id: i64,
        voter_id: i64,
        district_id: i64,
        party_id: i64,
    ) -> BoxFuture<'_, Result<VoteRows, StoreError>> {
        let mut out = VoteRows::default();
        Box::pin(self.db.read(move |c| {
            out.election = optional(&mut *c.prepare_cached(sql::ELECTION)?, [election_id], |r| {
                election_hours(r)
            })?;
            if out.election.is_none() {
                return Ok(out);
            }
            out.voter_district = optional(
                &mut *c.prepare_cached(sql::VOTER)?,
                [election_id, voter_id],
                |r| r.int(0),
            )?;
            if out.voter_district != Some(district_id) {
                out.district_exists = optional(
                    &mut *c.prepare_cached(sql::DISTRICT)?,
                    [election_id, district_id],
                    |_| Ok(()),
                )?
                .is_some();
                return Ok(out);
            }
            out.district_exists = true;
            out.list = all(
                &mut *c.prepare_cached(sql::LIST)?,
                [election_id, district_id, party_id],
                |r| r.int(0),
            )?;
            Ok(out)
        }))
    }

    fn insert_vote(
        &self,
        election_id: i64,
        voter_id: i64,
        district_id: i64,
        party_id: i64,
        candidates_json: String,
    ) -> BoxFuture<'_, Result<bool, StoreError>> {
        Box::pin(self.db.write(move |c| {
            let n = c
                .prepare_cached(sql::INSERT_VOTE)?
                .execute(rusqlite::params![
                    election_id,
                    voter_id,
                    district_id,
                    party_id,
                    candidates_json
                ])?;
            Ok(n == 1)
        }))
    }
}
