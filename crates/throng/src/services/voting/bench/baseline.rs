//! The write-up's own design (the election write-up, parts 2 and 3: ASP.NET
//! Core + EF Core on Azure SQL), run beside ours by `throng bench voting`
//! on the same server and data. For the bench only: a service of its own
//! ([`VotingBaseline`]) that `throng bench`'s child servers plug in
//! (`Experiment::comparison_service`); `throng serve` neither mounts its
//! routes nor creates its table, and it is not in the OpenAPI document nor
//! the index's links.
//!
//! - `GET /api/voting/baseline/elections/{electionId}/districts/{districtId}/ballot`
//!   reads the election, the district, the parties and the district's
//!   candidates from the database on every request (no cache, no ETag) and
//!   answers the same JSON as the real ballot endpoint (`http::render_ballot`
//!   on the rows).
//! - `POST /api/voting/baseline/elections/{electionId}/votes` takes the
//!   real endpoint's headers and body, validates with database reads (the
//!   election and its hours, the voter's row in `voting_voters` and its
//!   district, the party's candidates in that district in
//!   `voting_candidates`), then inserts the vote into
//!   `voting_baseline_votes` in one write command (the primary key
//!   `(election_id, voter_id)` answers 409 `already_voted`). 201
//!   `{receiptId}` (a random uuid). Error codes are the real endpoint's for
//!   the cases it checks.
//!
//! Reads go through the store's read path, the insert through its writer,
//! so the writer's group commit serves this design as it serves ours (more
//! than EF Core's one transaction per request would get). The index
//! `voting_candidates_by_list` serves the candidates' reads by district and
//! party, as EF Core's foreign-key indexes serve the write-up's (covering,
//! so SQLite uses it without statistics); our own design never reads it per
//! request.
//!
//! Not secret: `voting_baseline_votes` keeps each voter beside their choice,
//! as the write-up's table does. Both are made by the bench child at start
//! ([`DDL_SQLITE`], [`DDL_PG`]), only in the bench's store.

use std::collections::HashMap;
use std::sync::Arc;

use axum::extract::{FromRef, FromRequest, Request, State};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use rusqlite::OptionalExtension;
use serde_json::json;

use crate::base::clock::now_ms;
use crate::platform::auth::TokenKeys;
use crate::platform::error::{ApiError, ApiResult};
use crate::platform::extract::{ApiJson, ApiPath};
use crate::platform::service::{AppState, NoArgs, Platform, Service, ServiceState, Started};
use crate::services::voting::model::{
    header_id, Candidate, District, Election, ElectionRows, PartyList, VoteRequest,
    DISTRICT_HEADER, VOTER_HEADER,
};
use crate::services::voting::{http, Identity, VotingState};
use crate::store::{Store, StoreError};

/// The write-up's design as a service of the bench's child servers.
pub struct VotingBaseline;

/// What its start made (nothing to keep: it answers from `VotingState`).
pub struct Made;

impl ServiceState for Made {}

/// Its table (emptied: the bench seeds a fresh election before its child
/// servers start), and the candidates' index its reads need.
pub const DDL_SQLITE: &str = "
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

/// [`DDL_SQLITE`] for PostgreSQL.
pub const DDL_PG: &str = "
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

impl Service for VotingBaseline {
    const NAME: &'static str = "voting-baseline";
    type Args = NoArgs;
    type SeedArgs = NoArgs;
    type State = Made;

    async fn start(&self, platform: &Platform, _args: NoArgs) -> anyhow::Result<Started<Made>> {
        match &platform.store {
            Store::Sqlite(s) => {
                s.write(|c| {
                    c.execute_batch(DDL_SQLITE)?;
                    Ok(())
                })
                .await?
            }
            Store::Postgres(p) => p.client().await?.batch_execute(DDL_PG).await?,
        }
        Ok(Started::new(Arc::new(Made)))
    }

    fn router(&self) -> Router<AppState> {
        router()
    }

    fn openapi(&self) -> utoipa::openapi::OpenApi {
        utoipa::openapi::OpenApi::default()
    }
}

/// The baseline's routes.
pub fn router<S>() -> Router<S>
where
    S: Clone + Send + Sync + 'static,
    Arc<VotingState>: FromRef<S>,
    Arc<TokenKeys>: FromRef<S>,
{
    Router::new()
        .route(
            "/api/voting/baseline/elections/{election_id}/districts/{district_id}/ballot",
            get(get_ballot),
        )
        .route(
            "/api/voting/baseline/elections/{election_id}/votes",
            post(vote),
        )
}

// ---------------------------------------------------------------- SQL

const ELECTION_SQLITE: &str = "SELECT id, name, opens_at_ms, closes_at_ms, candidates_per_vote_max
                               FROM voting_elections WHERE id = ?1";
const ELECTION_PG: &str = "SELECT id, name, opens_at_ms, closes_at_ms, candidates_per_vote_max
                           FROM voting_elections WHERE id = $1";
const DISTRICT_SQLITE: &str = "SELECT election_id, district_id, name FROM voting_districts
                               WHERE election_id = ?1 AND district_id = ?2";
const DISTRICT_PG: &str = "SELECT election_id, district_id, name FROM voting_districts
                           WHERE election_id = $1 AND district_id = $2";
const PARTIES_SQLITE: &str =
    "SELECT election_id, party_id, name, short_name FROM voting_parties WHERE election_id = ?1";
const PARTIES_PG: &str =
    "SELECT election_id, party_id, name, short_name FROM voting_parties WHERE election_id = $1";
const CANDIDATES_SQLITE: &str =
    "SELECT election_id, candidate_id, district_id, party_id, list_position, name
     FROM voting_candidates WHERE election_id = ?1 AND district_id = ?2";
const CANDIDATES_PG: &str =
    "SELECT election_id, candidate_id, district_id, party_id, list_position, name
     FROM voting_candidates WHERE election_id = $1 AND district_id = $2";
const VOTER_SQLITE: &str =
    "SELECT district_id FROM voting_voters WHERE election_id = ?1 AND voter_id = ?2";
const VOTER_PG: &str =
    "SELECT district_id FROM voting_voters WHERE election_id = $1 AND voter_id = $2";
const LIST_SQLITE: &str = "SELECT candidate_id FROM voting_candidates
                           WHERE election_id = ?1 AND district_id = ?2 AND party_id = ?3";
const LIST_PG: &str = "SELECT candidate_id FROM voting_candidates
                       WHERE election_id = $1 AND district_id = $2 AND party_id = $3";
const INSERT_SQLITE: &str =
    "INSERT INTO voting_baseline_votes (election_id, voter_id, district_id, party_id, candidate_ids)
     VALUES (?1, ?2, ?3, ?4, ?5) ON CONFLICT DO NOTHING";
const INSERT_PG: &str =
    "INSERT INTO voting_baseline_votes (election_id, voter_id, district_id, party_id, candidate_ids)
     VALUES ($1, $2, $3, $4, $5) ON CONFLICT DO NOTHING";

type ElectionRow = (i64, String, i64, i64, i64);

// ---------------------------------------------------------------- ballot

/// What the ballot's reads found.
enum BallotRows {
    NoElection,
    NoDistrict,
    /// One election, one district, its parties and the district's candidates.
    Found(ElectionRows),
}

async fn ballot_rows(
    store: &Store,
    election_id: i64,
    district_id: i64,
) -> Result<BallotRows, StoreError> {
    match store {
        Store::Sqlite(s) => {
            s.read(move |c| {
                let election: Option<ElectionRow> = c
                    .prepare_cached(ELECTION_SQLITE)?
                    .query_row([election_id], |r| {
                        Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?))
                    })
                    .optional()?;
                let Some(election) = election else {
                    return Ok(BallotRows::NoElection);
                };
                let district: Option<(i64, i64, String)> = c
                    .prepare_cached(DISTRICT_SQLITE)?
                    .query_row([election_id, district_id], |r| {
                        Ok((r.get(0)?, r.get(1)?, r.get(2)?))
                    })
                    .optional()?;
                let Some(district) = district else {
                    return Ok(BallotRows::NoDistrict);
                };
                let parties = c
                    .prepare_cached(PARTIES_SQLITE)?
                    .query_map([election_id], |r| {
                        Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?))
                    })?
                    .collect::<Result<_, _>>()?;
                let candidates = c
                    .prepare_cached(CANDIDATES_SQLITE)?
                    .query_map([election_id, district_id], |r| {
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
                Ok(BallotRows::Found(ElectionRows {
                    elections: vec![election],
                    districts: vec![district],
                    parties,
                    candidates,
                }))
            })
            .await
        }
        Store::Postgres(p) => {
            let client = p.client().await?;
            let stmt = client.prepare_cached(ELECTION_PG).await?;
            let Some(r) = client.query_opt(&stmt, &[&election_id]).await? else {
                return Ok(BallotRows::NoElection);
            };
            let election: ElectionRow = (
                r.get(0),
                r.get(1),
                r.get(2),
                r.get(3),
                r.get::<_, i32>(4) as i64,
            );
            let stmt = client.prepare_cached(DISTRICT_PG).await?;
            let Some(r) = client
                .query_opt(&stmt, &[&election_id, &district_id])
                .await?
            else {
                return Ok(BallotRows::NoDistrict);
            };
            let district = (r.get(0), r.get(1), r.get(2));
            let stmt = client.prepare_cached(PARTIES_PG).await?;
            let parties = client
                .query(&stmt, &[&election_id])
                .await?
                .iter()
                .map(|r| (r.get(0), r.get(1), r.get(2), r.get(3)))
                .collect();
            let stmt = client.prepare_cached(CANDIDATES_PG).await?;
            let candidates = client
                .query(&stmt, &[&election_id, &district_id])
                .await?
                .iter()
                .map(|r| (r.get(0), r.get(1), r.get(2), r.get(3), r.get(4), r.get(5)))
                .collect();
            Ok(BallotRows::Found(ElectionRows {
                elections: vec![election],
                districts: vec![district],
                parties,
                candidates,
            }))
        }
    }
}

async fn get_ballot(
    State(st): State<Arc<VotingState>>,
    ApiPath((election_id, district_id)): ApiPath<(i64, i64)>,
) -> ApiResult<Response> {
    let rows = match ballot_rows(&st.store, election_id, district_id).await? {
        BallotRows::NoElection => return Err(http::election_not_found(election_id)),
        BallotRows::NoDistrict => return Err(http::district_not_found(election_id, district_id)),
        BallotRows::Found(rows) => rows,
    };
    let elections = rows.assemble(&HashMap::new());
    let e = elections
        .first()
        .ok_or_else(|| http::election_not_found(election_id))?;
    let d = e
        .districts
        .first()
        .ok_or_else(|| http::district_not_found(election_id, district_id))?;
    let body = http::render_ballot(e, d);
    Ok(([(header::CONTENT_TYPE, "application/json")], body).into_response())
}

// ---------------------------------------------------------------- vote

/// What the vote's reads found.
struct VoteRows {
    /// (opens_at_ms, closes_at_ms, candidates_per_vote_max)
    election: Option<(i64, i64, i64)>,
    /// The voter's district, if the voter is on the election's roll.
    voter_district: Option<i64>,
    /// The district named by the header exists.
    district_exists: bool,
    /// The candidates on the party's list in the voter's district.
    list: Vec<i64>,
}

async fn vote_rows(
    store: &Store,
    election_id: i64,
    voter_id: i64,
    district_id: i64,
    party_id: i64,
) -> Result<VoteRows, StoreError> {
    let mut out = VoteRows {
        election: None,
        voter_district: None,
        district_exists: false,
        list: Vec::new(),
    };
    match store {
        Store::Sqlite(s) => {
            s.read(move |c| {
                out.election = c
                    .prepare_cached(ELECTION_SQLITE)?
                    .query_row([election_id], |r| Ok((r.get(2)?, r.get(3)?, r.get(4)?)))
                    .optional()?;
                if out.election.is_none() {
                    return Ok(out);
                }
                out.voter_district = c
                    .prepare_cached(VOTER_SQLITE)?
                    .query_row([election_id, voter_id], |r| r.get(0))
                    .optional()?;
                if out.voter_district != Some(district_id) {
                    out.district_exists = c
                        .prepare_cached(DISTRICT_SQLITE)?
                        .query_row([election_id, district_id], |_| Ok(()))
                        .optional()?
                        .is_some();
                    return Ok(out);
                }
                out.district_exists = true;
                out.list = c
                    .prepare_cached(LIST_SQLITE)?
                    .query_map([election_id, district_id, party_id], |r| r.get(0))?
                    .collect::<Result<_, _>>()?;
                Ok(out)
            })
            .await
        }
        Store::Postgres(p) => {
            let client = p.client().await?;
            let stmt = client.prepare_cached(ELECTION_PG).await?;
            out.election = client
                .query_opt(&stmt, &[&election_id])
                .await?
                .map(|r| (r.get(2), r.get(3), r.get::<_, i32>(4) as i64));
            if out.election.is_none() {
                return Ok(out);
            }
            let stmt = client.prepare_cached(VOTER_PG).await?;
            out.voter_district = client
                .query_opt(&stmt, &[&election_id, &voter_id])
                .await?
                .map(|r| r.get(0));
            if out.voter_district != Some(district_id) {
                let stmt = client.prepare_cached(DISTRICT_PG).await?;
                out.district_exists = client
                    .query_opt(&stmt, &[&election_id, &district_id])
                    .await?
                    .is_some();
                return Ok(out);
            }
            out.district_exists = true;
            let stmt = client.prepare_cached(LIST_PG).await?;
            out.list = client
                .query(&stmt, &[&election_id, &district_id, &party_id])
                .await?
                .iter()
                .map(|r| r.get(0))
                .collect();
            Ok(out)
        }
    }
}

/// Inserts the vote; `false` when the voter already has one here.
async fn insert_vote(
    store: &Store,
    election_id: i64,
    voter_id: i64,
    district_id: i64,
    party_id: i64,
    candidates_json: String,
) -> Result<bool, StoreError> {
    match store {
        Store::Sqlite(s) => {
            s.write(move |c| {
                let n = c.prepare_cached(INSERT_SQLITE)?.execute(rusqlite::params![
                    election_id,
                    voter_id,
                    district_id,
                    party_id,
                    candidates_json
                ])?;
                Ok(n == 1)
            })
            .await
        }
        Store::Postgres(p) => {
            let candidates_json = Arc::new(candidates_json);
            p.write(move |tx| {
                let candidates_json = candidates_json.clone();
                Box::pin(async move {
                    let stmt = tx.tx.prepare(INSERT_PG).await?;
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
            })
            .await
        }
    }
}

async fn vote(
    State(st): State<Arc<VotingState>>,
    ApiPath(election_id): ApiPath<i64>,
    req: Request,
) -> ApiResult<Response> {
    let voter_id = header_id(req.headers(), VOTER_HEADER)?;
    let district_id = header_id(req.headers(), DISTRICT_HEADER)?;
    if st.identity == Identity::Token {
        http::check_token(&st.keys, req.headers(), voter_id, district_id, election_id)?;
    }
    let ApiJson(body) = ApiJson::<VoteRequest>::from_request(req, &()).await?;
    let rows = vote_rows(&st.store, election_id, voter_id, district_id, body.party_id).await?;
    let Some((opens_at_ms, closes_at_ms, candidates_per_vote_max)) = rows.election else {
        return Err(http::election_not_found(election_id));
    };
    if !rows.district_exists {
        return Err(http::district_not_found(election_id, district_id));
    }
    match rows.voter_district {
        None => {
            return Err(ApiError::not_found(
                "voter_not_found",
                format!("no voter with this id in election {election_id}"),
            ))
        }
        Some(d) if d != district_id => {
            return Err(ApiError::new(
                StatusCode::FORBIDDEN,
                "not_on_roll",
                format!("the voter is not on the roll of district {district_id}"),
            ))
        }
        Some(_) => {}
    }
    // The read rows as the model's types, so the rules (and their errors)
    // are the real endpoint's.
    let election = Election {
        id: election_id,
        name: String::new(),
        opens_at_ms,
        closes_at_ms,
        candidates_per_vote_max,
        districts: Vec::new(),
        parties: Vec::new(),
    };
    election.check_open(now_ms())?;
    let district = District {
        id: district_id,
        name: String::new(),
        lists: if rows.list.is_empty() {
            Vec::new()
        } else {
            vec![PartyList {
                party_id: body.party_id,
                candidates: rows
                    .list
                    .iter()
                    .map(|&id| Candidate {
                        id,
                        name: String::new(),
                        list_position: 0,
                    })
                    .collect(),
            }]
        },
        voters: 0,
    };
    let vote = election.parse_vote(&district, body)?;
    let inserted = insert_vote(
        &st.store,
        election_id,
        voter_id,
        district_id,
        vote.party_id,
        vote.candidates_json(),
    )
    .await?;
    if !inserted {
        return Err(http::already_voted());
    }
    let receipt_id = uuid::Uuid::new_v4().to_string();
    Ok((
        StatusCode::CREATED,
        Json(json!({ "receiptId": receipt_id })),
    )
        .into_response())
}
