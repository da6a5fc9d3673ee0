//! The write-up's own design (the election write-up, parts 2 and 3: ASP.NET
//! Core + EF Core on Azure SQL), run beside ours by `throng bench voting`
//! on the same server and data. For the bench only: a service of its own
//! ([`VotingBaseline`]) that `throng bench`'s child servers plug in
//! (`Experiment::comparison_services`); `throng serve` neither mounts its
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
//! (`sqlite::DDL`, `postgres::DDL`), only in the bench's store.
//!
//! Its storage is one small trait ([`BaselineStore`], `sqlite.rs` and
//! `postgres.rs` beside this file), chosen once from the store at start; its
//! SQL is written once ([`sql`], `?N` made `$N` by `pg_placeholders`).

mod postgres;
mod sqlite;

use std::collections::HashMap;
use std::sync::Arc;

use axum::extract::{FromRef, FromRequest, Request, State};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use futures::future::BoxFuture;
use serde_json::json;

use crate::base::clock::now_ms;
use crate::platform::auth::TokenKeys;
use crate::platform::error::{ApiError, ApiResult};
use crate::platform::extract::{ApiJson, ApiPath};
use crate::platform::service::{
    AppState, NoArgs, OpenApiRouter, Platform, Service, ServiceState, Started,
};
use crate::services::voting::model::{
    header_id, Candidate, District, Election, ElectionRows, PartyList, VoteRequest,
    DISTRICT_HEADER, VOTER_HEADER,
};
use crate::services::voting::{http, Identity, VotingState};
use crate::store::Columns;
use crate::store::{Store, StoreError};

/// The write-up's design as a service of the bench's child servers.
pub struct VotingBaseline;

/// What its start made: its storage (it answers from `VotingState`
/// otherwise).
pub struct BaselineState {
    storage: Arc<dyn BaselineStore>,
}

impl ServiceState for BaselineState {}

impl Service for VotingBaseline {
    const NAME: &'static str = "voting-baseline";
    type Args = NoArgs;
    type SeedArgs = NoArgs;
    type State = BaselineState;

    async fn start(
        &self,
        platform: &Platform,
        _args: NoArgs,
    ) -> anyhow::Result<Started<BaselineState>> {
        let storage = open(&platform.store);
        storage.create_tables().await?;
        Ok(Started::new(Arc::new(BaselineState { storage })))
    }

    /// Left out of the API document: the bench's routes are not the API.
    fn routes(&self) -> OpenApiRouter<AppState> {
        router().into()
    }
}

/// The baseline's routes.
pub fn router<S>() -> Router<S>
where
    S: Clone + Send + Sync + 'static,
    Arc<VotingState>: FromRef<S>,
    Arc<BaselineState>: FromRef<S>,
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

// ---------------------------------------------------------------- storage

/// The baseline's storage: what its two endpoints read and write.
trait BaselineStore: Send + Sync {
    /// Makes its table (emptied: the bench seeds a fresh election before
    /// its child servers start), and the candidates' index its reads need.
    fn create_tables(&self) -> BoxFuture<'_, anyhow::Result<()>>;

    /// The ballot's reads: the election, the district, the parties and the
    /// district's candidates.
    fn ballot_rows(
        &self,
        election_id: i64,
        district_id: i64,
    ) -> BoxFuture<'_, Result<BallotRows, StoreError>>;

    /// The vote's reads (see [`VoteRows`]).
    fn vote_rows(
        &self,
        election_id: i64,
        voter_id: i64,
        district_id: i64,
        party_id: i64,
    ) -> BoxFuture<'_, Result<VoteRows, StoreError>>;

    /// Inserts the vote; `false` when the voter already has one here.
    fn insert_vote(
        &self,
        election_id: i64,
        voter_id: i64,
        district_id: i64,
        party_id: i64,
        candidates_json: String,
    ) -> BoxFuture<'_, Result<bool, StoreError>>;
}

/// The baseline storage of `store`.
fn open(store: &Store) -> Arc<dyn BaselineStore> {
    store.choose(
        |s| Arc::new(sqlite::SqliteBaseline::new(s.clone())) as Arc<dyn BaselineStore>,
        |p| Arc::new(postgres::PgBaseline::new(p.clone())) as Arc<dyn BaselineStore>,
    )
}

/// The baseline's SQL, the same in both dialects.
mod sql {
    pub const ELECTION: &str = "SELECT id, name, opens_at_ms, closes_at_ms, candidates_per_vote_max
                               FROM voting_elections WHERE id = ?1";
    pub const DISTRICT: &str = "SELECT election_id, district_id, name FROM voting_districts
                               WHERE election_id = ?1 AND district_id = ?2";
    pub const PARTIES: &str =
        "SELECT election_id, party_id, name, short_name FROM voting_parties WHERE election_id = ?1";
    pub const CANDIDATES: &str =
        "SELECT election_id, candidate_id, district_id, party_id, list_position, name
     FROM voting_candidates WHERE election_id = ?1 AND district_id = ?2";
    pub const VOTER: &str =
        "SELECT district_id FROM voting_voters WHERE election_id = ?1 AND voter_id = ?2";
    pub const LIST: &str = "SELECT candidate_id FROM voting_candidates
                           WHERE election_id = ?1 AND district_id = ?2 AND party_id = ?3";
    pub const INSERT_VOTE: &str =
        "INSERT INTO voting_baseline_votes (election_id, voter_id, district_id, party_id, candidate_ids)
     VALUES (?1, ?2, ?3, ?4, ?5) ON CONFLICT DO NOTHING";
}

/// (opens_at_ms, closes_at_ms, candidates_per_vote_max) of a row of
/// [`sql::ELECTION`].
fn election_hours(r: &impl Columns) -> Result<(i64, i64, i64), StoreError> {
    Ok((r.int(2)?, r.int(3)?, r.int(4)?))
}

// ---------------------------------------------------------------- ballot

/// What the ballot's reads found.
enum BallotRows {
    NoElection,
    NoDistrict,
    /// One election, one district, its parties and the district's candidates.
    Found(ElectionRows),
}

async fn get_ballot(
    State(base): State<Arc<BaselineState>>,
    ApiPath((election_id, district_id)): ApiPath<(i64, i64)>,
) -> ApiResult<Response> {
    let rows = match base.storage.ballot_rows(election_id, district_id).await? {
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
#[derive(Default)]
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

async fn vote(
    State(st): State<Arc<VotingState>>,
    State(base): State<Arc<BaselineState>>,
    ApiPath(election_id): ApiPath<i64>,
    req: Request,
) -> ApiResult<Response> {
    let voter_id = header_id(req.headers(), VOTER_HEADER)?;
    let district_id = header_id(req.headers(), DISTRICT_HEADER)?;
    if st.identity == Identity::Token {
        http::check_token(&st.keys, req.headers(), voter_id, district_id, election_id)?;
    }
    let ApiJson(body) = ApiJson::<VoteRequest>::from_request(req, &()).await?;
    let rows = base
        .storage
        .vote_rows(election_id, voter_id, district_id, body.party_id)
        .await?;
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
    let inserted = base
        .storage
        .insert_vote(
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
