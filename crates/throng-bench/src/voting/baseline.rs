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
//! ([`DDL`]), only in the bench's store.
//!
//! Its storage is four functions over the store ([`create_tables`],
//! [`ballot_rows`], [`vote_rows`], [`insert_vote`]), written once against
//! the store's seam.

use std::collections::HashMap;
use std::sync::Arc;

use axum::extract::{FromRef, FromRequest, Request, State};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
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
use crate::services::voting::store::{candidate_row, district_row, election_row, party_row};
use crate::services::voting::{http, Identity, VotingState};
use crate::store::{Columns, Sql, Store, StoreError};

/// The write-up's design as a service of the bench's child servers.
pub struct VotingBaseline;

/// What its start made: its handle on the store (it answers from
/// `VotingState` otherwise).
pub struct BaselineState {
    store: Store,
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
        create_tables(&platform.store).await?;
        Ok(Started::new(Arc::new(BaselineState {
            store: platform.store.clone(),
        })))
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
    Arc<crate::platform::session::Sessions>: FromRef<S>,
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

/// The baseline's table and the candidates' index.
static DDL: Sql = Sql::per_dialect(
    "CREATE TABLE IF NOT EXISTS voting_baseline_votes (
        election_id INTEGER NOT NULL,
        voter_id INTEGER NOT NULL,
        district_id INTEGER NOT NULL,
        party_id INTEGER NOT NULL,
        candidate_ids TEXT NOT NULL,
        PRIMARY KEY (election_id, voter_id)
    ) WITHOUT ROWID;
    CREATE INDEX IF NOT EXISTS voting_candidates_by_list
        ON voting_candidates (election_id, district_id, party_id, list_position, name);
    DELETE FROM voting_baseline_votes;",
    "CREATE TABLE IF NOT EXISTS voting_baseline_votes (
        election_id BIGINT NOT NULL,
        voter_id BIGINT NOT NULL,
        district_id BIGINT NOT NULL,
        party_id BIGINT NOT NULL,
        candidate_ids TEXT NOT NULL,
        PRIMARY KEY (election_id, voter_id)
    );
    CREATE INDEX IF NOT EXISTS voting_candidates_by_list
        ON voting_candidates (election_id, district_id, party_id, list_position, name);
    DELETE FROM voting_baseline_votes;",
);

static ELECTION: Sql = Sql::new(concat!(
    "SELECT ",
    throng_services::voting_election_columns!(),
    " FROM voting_elections WHERE id = ?1"
));
static DISTRICT: Sql = Sql::new(
    "SELECT election_id, district_id, name, code, region FROM voting_districts
      WHERE election_id = ?1 AND district_id = ?2",
);
static PARTIES: Sql = Sql::new(
    "SELECT election_id, party_id, name, short_name, code, color FROM voting_parties
      WHERE election_id = ?1",
);
static CANDIDATES: Sql = Sql::new(
    "SELECT election_id, candidate_id, district_id, party_id, list_position, name
       FROM voting_candidates WHERE election_id = ?1 AND district_id = ?2",
);
static VOTER: Sql =
    Sql::new("SELECT district_id FROM voting_voters WHERE election_id = ?1 AND voter_id = ?2");
static LIST: Sql = Sql::new(
    "SELECT candidate_id FROM voting_candidates
      WHERE election_id = ?1 AND district_id = ?2 AND party_id = ?3",
);
static INSERT_VOTE: Sql = Sql::new(
    "INSERT INTO voting_baseline_votes (election_id, voter_id, district_id, party_id, candidate_ids)
     VALUES (?1, ?2, ?3, ?4, ?5) ON CONFLICT DO NOTHING",
);

/// Makes its table (emptied: the bench seeds a fresh election before its
/// child servers start), and the candidates' index its reads need.
async fn create_tables(store: &Store) -> Result<(), StoreError> {
    store
        .write(|tx| Box::pin(async move { tx.batch(&DDL).await }))
        .await
}

/// The ballot's reads: the election, the district, the parties and the
/// district's candidates.
async fn ballot_rows(
    store: &Store,
    election_id: i64,
    district_id: i64,
) -> Result<BallotRows, StoreError> {
    store
        .read(move |c| {
            Box::pin(async move {
                let Some(election) = c
                    .query_opt(&ELECTION, &[&election_id], |r| election_row(r))
                    .await?
                else {
                    return Ok(BallotRows::NoElection);
                };
                let Some(district) = c
                    .query_opt(&DISTRICT, &[&election_id, &district_id], |r| {
                        district_row(r)
                    })
                    .await?
                else {
                    return Ok(BallotRows::NoDistrict);
                };
                let parties = c.query(&PARTIES, &[&election_id], |r| party_row(r)).await?;
                let candidates = c
                    .query(&CANDIDATES, &[&election_id, &district_id], |r| {
                        candidate_row(r)
                    })
                    .await?;
                Ok(BallotRows::Found(ElectionRows {
                    elections: vec![election],
                    districts: vec![district],
                    parties,
                    candidates,
                }))
            })
        })
        .await
}

/// The vote's reads (see [`VoteRows`]).
async fn vote_rows(
    store: &Store,
    election_id: i64,
    voter_id: i64,
    district_id: i64,
    party_id: i64,
) -> Result<VoteRows, StoreError> {
    store
        .read(move |c| {
            Box::pin(async move {
                let mut out = VoteRows {
                    election: c
                        .query_opt(&ELECTION, &[&election_id], |r| election_hours(r))
                        .await?,
                    ..VoteRows::default()
                };
                if out.election.is_none() {
                    return Ok(out);
                }
                out.voter_district = c
                    .query_opt(&VOTER, &[&election_id, &voter_id], |r| r.int(0))
                    .await?;
                if out.voter_district != Some(district_id) {
                    out.district_exists = c
                        .query_opt(&DISTRICT, &[&election_id, &district_id], |_| Ok(()))
                        .await?
                        .is_some();
                    return Ok(out);
                }
                out.district_exists = true;
                out.list = c
                    .query(&LIST, &[&election_id, &district_id, &party_id], |r| {
                        r.int(0)
                    })
                    .await?;
                Ok(out)
            })
        })
        .await
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
    let candidates_json = Arc::new(candidates_json);
    store
        .write(move |tx| {
            let candidates_json = candidates_json.clone();
            Box::pin(async move {
                let n = tx
                    .execute(
                        &INSERT_VOTE,
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

/// (opens_at_ms, closes_at_ms, candidates_per_vote_max) of a row of
/// [`ELECTION`].
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
    let rows = match ballot_rows(&base.store, election_id, district_id).await? {
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
    let rows = vote_rows(
        &base.store,
        election_id,
        voter_id,
        district_id,
        body.party_id,
    )
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
        state: crate::services::voting::model::ElectionState::Open,
        roll_version: 0,
        public_key: None,
        board_period: 0,
        board_final: false,
    };
    election.check_open(now_ms())?;
    let district = District {
        id: district_id,
        name: String::new(),
        code: None,
        region: None,
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
        &base.store,
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
