//! The baseline on PostgreSQL: reads on pooled connections (statements
//! prepared once per connection), the insert through the store's writer.

use std::sync::{Arc, LazyLock};

use futures::future::BoxFuture;

use super::{election_hours, sql, BallotRows, BaselineStore, VoteRows};
use crate::services::voting::model::ElectionRows;
use crate::services::voting::store::{candidate_row, district_row, election_row, party_row};
use crate::store::postgres::PgStore;
use crate::store::{pg_placeholders, Columns, StoreError};

/// The baseline's table and the candidates' index.
const DDL: &str = "
CREATE TABLE IF NOT EXISTS voting_baseline_votes (
    election_id BIGINT NOT NULL,
    voter_id BIGINT NOT NULL,
    district_id BIGINT NOT NULL,
    party_id BIGINT NOT NULL,
    candidate_ids TEXT NOT NULL,
    PRIMARY KEY (election_id, voter_id)
);
CREATE INDEX IF NOT EXISTS voting_candidates_by_list
    ON voting_candidates (election_id, district_id, party_id, list_position, name);
DELETE FROM voting_baseline_votes;";

static ELECTION: LazyLock<String> = LazyLock::new(|| pg_placeholders(sql::ELECTION));
static DISTRICT: LazyLock<String> = LazyLock::new(|| pg_placeholders(sql::DISTRICT));
static PARTIES: LazyLock<String> = LazyLock::new(|| pg_placeholders(sql::PARTIES));
static CANDIDATES: LazyLock<String> = LazyLock::new(|| pg_placeholders(sql::CANDIDATES));
static VOTER: LazyLock<String> = LazyLock::new(|| pg_placeholders(sql::VOTER));
static LIST: LazyLock<String> = LazyLock::new(|| pg_placeholders(sql::LIST));
static INSERT_VOTE: LazyLock<String> = LazyLock::new(|| pg_placeholders(sql::INSERT_VOTE));

pub struct PgBaseline {
    db: Arc<PgStore>,
}

impl PgBaseline {
    pub fn new(db: Arc<PgStore>) -> PgBaseline {
        PgBaseline { db }
    }
}

impl BaselineStore for PgBaseline {
    fn create_tables(&self) -> BoxFuture<'_, anyhow::Result<()>> {
        Box::pin(async move {
            self.db.client().await?.batch_execute(DDL).await?;
            Ok(())
        })
    }

    fn ballot_rows(
        &self,
        election_id: i64,
        district_id: i64,
    ) -> BoxFuture<'_, Result<BallotRows, StoreError>> {
        Box::pin(async move {
            let client = self.db.client().await?;
            let stmt = client.prepare_cached(&ELECTION).await?;
            let Some(r) = client.query_opt(&stmt, &[&election_id]).await? else {
                return Ok(BallotRows::NoElection);
            };
            let election = election_row(&r)?;
            let stmt = client.prepare_cached(&DISTRICT).await?;
            let Some(r) = client
                .query_opt(&stmt, &[&election_id, &district_id])
                .await?
            else {
                return Ok(BallotRows::NoDistrict);
            };
            let district = district_row(&r)?;
            let stmt = client.prepare_cached(&PARTIES).await?;
            let parties = client
                .query(&stmt, &[&election_id])
                .await?
                .iter()
                .map(party_row)
                .collect::<Result<_, _>>()?;
            let stmt = client.prepare_cached(&CANDIDATES).await?;
            let candidates = client
                .query(&stmt, &[&election_id, &district_id])
                .await?
                .iter()
                .map(candidate_row)
                .collect::<Result<_, _>>()?;
            Ok(BallotRows::Found(ElectionRows {
                elections: vec![election],
                districts: vec![district],
                parties,
                candidates,
            }))
        })
    }

    fn vote_rows(
        &self,
        election_id: i64,
        voter_id: i64,
        district_id: i64,
        party_id: i64,
    ) -> BoxFuture<'_, Result<VoteRows, StoreError>> {
        Box::pin(async move {
            let mut out = VoteRows::default();
            let client = self.db.client().await?;
            let stmt = client.prepare_cached(&ELECTION).await?;
            out.election = match client.query_opt(&stmt, &[&election_id]).await? {
                Some(r) => Some(election_hours(&r)?),
                None => return Ok(out),
            };
            let stmt = client.prepare_cached(&VOTER).await?;
            out.voter_district = match client.query_opt(&stmt, &[&election_id, &voter_id]).await? {
                Some(r) => Some(r.int(0)?),
                None => None,
            };
            if out.voter_district != Some(district_id) {
                let stmt = client.prepare_cached(&DISTRICT).await?;
                out.district_exists = client
                    .query_opt(&stmt, &[&election_id, &district_id])
                    .await?
                    .is_some();
                return Ok(out);
            }
            out.district_exists = true;
            let stmt = client.prepare_cached(&LIST).await?;
            out.list = client
                .query(&stmt, &[&election_id, &district_id, &party_id])
                .await?
                .iter()
                .map(|r| r.int(0))
                .collect::<Result<_, _>>()?;
            Ok(out)
        })
    }

    fn insert_vote(
        &self,
        election_id: i64,
        voter_id: i64,
        district_id: i64,
        party_id: i64,
        candidates_json: String,
    ) -> BoxFuture<'_, Result<bool, StoreError>> {
        let candidates_json = Arc::new(candidates_json);
        Box::pin(self.db.write(move |tx| {
            let candidates_json = candidates_json.clone();
            Box::pin(async move {
                let stmt = tx.tx.prepare(&INSERT_VOTE).await?;
                let n = tx
                    .tx
                    .execute(
                        &stmt,
                        &[
                            &election_id,
                            &voter_id,
                            &district_id,
                            &party_id,
                            &*candidates_json,
                        ],
                    )
                    .await?;
                Ok(n == 1)
            })
        }))
    }
}
