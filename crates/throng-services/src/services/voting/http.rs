//! Voting routes. Reading (elections, ballots, results, receipts) is public;
//! a vote names its voter in the write-up's headers `voter-id` and
//! `election-district-id` and, unless `serve --voting-identity headers`,
//! proves it with a voter token whose `sub`, `district` and `election` claims
//! match them and the path.
//!
//! Error codes: 400 `invalid_header` / `invalid_path` / `invalid_query` /
//! `malformed_json`; 401 `missing_token` / `invalid_token` /
//! `token_expired`; 403 `identity_mismatch` (the token is not this voter's,
//! or not a voter's), `not_on_roll` (the voter belongs to another
//! district); 404 `election_not_found`, `district_not_found`,
//! `voter_not_found`, `receipt_not_found`; 409 `already_voted`,
//! `election_closed`; 415 `unsupported_media_type`; 422 `invalid_field`
//! (body shape), `party_not_on_ballot`, `candidate_not_on_list`,
//! `too_many_candidates`, `repeated_candidate`; 429
//! `too_many_client_streams`; 503 `too_many_streams`, `draining`.
//! Nothing is written on any error.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::extract::{ConnectInfo, FromRef, FromRequest, Request, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::sse::Event;
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::{Extension, Json};
use serde::{Deserialize, Serialize};
use utoipa::openapi::schema::{ArrayBuilder, ObjectBuilder};
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::model::{
    header_id, District, Election, ElectionState, VoteRequest, CANDIDATES_PER_VOTE_LIMIT,
    DISTRICT_HEADER, VOTER_HEADER,
};
use super::roll::Standing;
use super::store::{self, BoxedBallot, ReceiptState, VoteOutcome};
use super::tally::Snapshot;
use super::{ElectionEntry, Identity, VotingState};
use crate::base::clock::{now_ms, rfc3339_ms};
use crate::platform::auth::TokenKeys;
use crate::platform::error::{ApiError, ApiResult};
use crate::platform::extract::{ApiJson, ApiPath, ApiQuery};
use crate::platform::openapi::{closed_object, int_schema};
use crate::platform::streams::LiveStreams;

/// Results streams send at most one update per this many ms.
const STREAM_UPDATE_MS_MIN: u64 = 250;
/// Retry-After of a stream refused for its client's count.
const CLIENT_STREAMS_RETRY_AFTER_S: u64 = 10;
/// Demo voter tokens live this long.
const DEMO_TOKEN_TTL_S: u64 = 3600;

/// Voting's routes and their operations, for any state that gives
/// `Arc<VotingState>` (see `platform::service`).
pub fn routes<S>() -> OpenApiRouter<S>
where
    S: Clone + Send + Sync + 'static,
    Arc<VotingState>: FromRef<S>,
    Arc<TokenKeys>: FromRef<S>,
    Arc<LiveStreams>: FromRef<S>,
{
    OpenApiRouter::default()
        .routes(routes!(list_elections))
        .routes(routes!(get_election))
        .routes(routes!(get_ballot))
        .routes(routes!(vote))
        .routes(routes!(get_receipt))
        .routes(routes!(results))
        .routes(routes!(results_stream))
        .merge(super::admin::routes())
        .route(
            "/api/voting/demo/voter",
            post(demo_voter).layer(axum::middleware::map_response(
                crate::platform::headers::no_store,
            )),
        )
        .merge(super::page::router().into())
}

pub(super) fn election_not_found(id: i64) -> ApiError {
    ApiError::not_found("election_not_found", format!("no election with id {id}"))
}

pub(super) fn district_not_found(election: i64, district: i64) -> ApiError {
    ApiError::not_found(
        "district_not_found",
        format!("election {election} has no district {district}"),
    )
}

fn election_entry(st: &VotingState, id: i64) -> ApiResult<Arc<ElectionEntry>> {
    st.election(id).ok_or_else(|| election_not_found(id))
}

fn district_index(e: &Election, district_id: i64) -> ApiResult<usize> {
    e.districts
        .binary_search_by_key(&district_id, |d| d.id)
        .map_err(|_| district_not_found(e.id, district_id))
}

/// An election as listed.
#[derive(Serialize, Deserialize, ToSchema, Debug, Clone)]
#[serde(rename_all = "camelCase")]
pub struct ElectionSummary {
    pub election_id: i64,
    pub name: String,
    /// RFC 3339.
    pub opens_at: String,
    /// RFC 3339.
    pub closes_at: String,
    pub candidates_per_vote_max: i64,
    /// Whether votes are taken now.
    pub open: bool,
    /// Where the election is in its lifecycle.
    pub state: ElectionState,
    /// Party and candidate figures are public while votes are taken.
    pub live_results: bool,
}

fn election_summary(e: &Election, now: i64) -> ElectionSummary {
    ElectionSummary {
        election_id: e.id,
        name: e.name.clone(),
        opens_at: rfc3339_ms(e.opens_at_ms),
        closes_at: rfc3339_ms(e.closes_at_ms),
        candidates_per_vote_max: e.candidates_per_vote_max,
        open: e.is_open(now),
        state: e.state,
        live_results: e.live_results,
    }
}

/// Every election.
#[derive(Serialize, Deserialize, ToSchema, Debug)]
pub struct ElectionList {
    pub elections: Vec<ElectionSummary>,
}

/// An election with its districts.
#[derive(Serialize, Deserialize, ToSchema, Debug)]
#[serde(rename_all = "camelCase")]
pub struct ElectionDetail {
    pub election_id: i64,
    pub name: String,
    /// RFC 3339.
    pub opens_at: String,
    /// RFC 3339.
    pub closes_at: String,
    pub candidates_per_vote_max: i64,
    pub open: bool,
    pub state: ElectionState,
    pub live_results: bool,
    /// A district's ballots are published, and counted, once its box holds
    /// this many, or at the close.
    pub mix_ballots_min: i64,
    pub districts: Vec<DistrictOut>,
}

/// A district of an election.
#[derive(Serialize, Deserialize, ToSchema, Debug)]
#[serde(rename_all = "camelCase")]
pub struct DistrictOut {
    pub district_id: i64,
    /// As the authority's definition names it (null for seeded elections).
    pub code: Option<String>,
    pub name: String,
    /// Voters on its roll.
    pub voters: i64,
}

/// Every election
#[utoipa::path(get, path = "/api/voting/elections", tag = "voting",
    responses((status = 200, body = ElectionList,
               example = json!({"elections": [{"electionId": 1, "name": "City council 2030",
                   "opensAt": "2030-05-05T05:00:00.000Z", "closesAt": "2030-05-05T17:00:00.000Z",
                   "candidatesPerVoteMax": 3, "open": true, "state": "open", "liveResults": false}]}))))]
pub async fn list_elections(State(st): State<Arc<VotingState>>) -> Json<ElectionList> {
    let now = now_ms();
    let catalog = st.catalog.load();
    let elections = catalog
        .elections
        .iter()
        .map(|e| election_summary(&e.election, now))
        .collect();
    Json(ElectionList { elections })
}

/// An election with its districts
#[utoipa::path(get, path = "/api/voting/elections/{election_id}", tag = "voting",
    params(("election_id" = i64, Path)),
    responses((status = 200, body = ElectionDetail, description = "The election with its districts (at most 1,000 per election)",
               example = json!({"electionId": 1, "name": "City council 2030", "opensAt": "2030-05-05T05:00:00.000Z",
                   "closesAt": "2030-05-05T17:00:00.000Z", "candidatesPerVoteMax": 3, "open": true,
                   "state": "open", "liveResults": false,
                   "mixBallotsMin": 100, "districts": [{"districtId": 1, "code": "N", "name": "North", "voters": 5200}]})),
              (status = 404, description = "election_not_found")))]
pub async fn get_election(
    State(st): State<Arc<VotingState>>,
    ApiPath(election_id): ApiPath<i64>,
) -> ApiResult<Json<ElectionDetail>> {
    let entry = election_entry(&st, election_id)?;
    let e = &entry.election;
    let s = election_summary(e, now_ms());
    let districts = e
        .districts
        .iter()
        .map(|d| DistrictOut {
            district_id: d.id,
            code: d.code.clone(),
            name: d.name.clone(),
            voters: d.voters,
        })
        .collect();
    Ok(Json(ElectionDetail {
        election_id: s.election_id,
        name: s.name,
        opens_at: s.opens_at,
        closes_at: s.closes_at,
        candidates_per_vote_max: s.candidates_per_vote_max,
        open: s.open,
        state: s.state,
        live_results: s.live_results,
        mix_ballots_min: st.mix_ballots_min,
        districts,
    }))
}

/// A district's ballot.
#[derive(Serialize, Deserialize, ToSchema, Debug)]
#[serde(rename_all = "camelCase")]
pub struct Ballot {
    pub election_id: i64,
    pub district_id: i64,
    pub district_name: String,
    pub candidates_per_vote_max: i64,
    pub parties: Vec<BallotParty>,
}

/// A party on a ballot, with its list in the district.
#[derive(Serialize, Deserialize, ToSchema, Debug)]
#[serde(rename_all = "camelCase")]
pub struct BallotParty {
    pub party_id: i64,
    pub name: String,
    pub short_name: String,
    pub candidates: Vec<BallotCandidate>,
}

/// A candidate on a party's list.
#[derive(Serialize, Deserialize, ToSchema, Debug)]
#[serde(rename_all = "camelCase")]
pub struct BallotCandidate {
    pub candidate_id: i64,
    pub name: String,
    pub list_position: i32,
}

/// The ballot's JSON (built once per district at load).
pub fn render_ballot(e: &Election, d: &District) -> String {
    let parties = d
        .lists
        .iter()
        .filter_map(|l| {
            let p = e.party(l.party_id)?;
            let candidates = l
                .candidates
                .iter()
                .map(|c| BallotCandidate {
                    candidate_id: c.id,
                    name: c.name.clone(),
                    list_position: c.list_position,
                })
                .collect();
            Some(BallotParty {
                party_id: p.id,
                name: p.name.clone(),
                short_name: p.short_name.clone(),
                candidates,
            })
        })
        .collect();
    serde_json::to_string(&Ballot {
        election_id: e.id,
        district_id: d.id,
        district_name: d.name.clone(),
        candidates_per_vote_max: e.candidates_per_vote_max,
        parties,
    })
    .expect("a ballot serializes")
}

fn etag_matches(headers: &HeaderMap, etag: &str) -> bool {
    headers
        .get_all(header::IF_NONE_MATCH)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .any(|v| {
            v.split(',')
                .map(str::trim)
                .any(|t| t == "*" || t.strip_prefix("W/").unwrap_or(t) == etag)
        })
}

/// Whether `Accept-Encoding` allows gzip (RFC 9110 12.5.3: `gzip` or `*`
/// with a q-value above 0; an explicit `gzip;q=0` wins over `*`).
fn accepts_gzip(headers: &HeaderMap) -> bool {
    let mut gzip = None;
    let mut any = None;
    for v in headers.get_all(header::ACCEPT_ENCODING) {
        let Ok(v) = v.to_str() else { continue };
        for item in v.split(',') {
            let mut parts = item.split(';');
            let coding = parts.next().unwrap_or("").trim();
            let q = parts
                .filter_map(|p| p.trim().strip_prefix("q="))
                .filter_map(|q| q.trim().parse::<f32>().ok())
                .next_back()
                .unwrap_or(1.0);
            if coding.eq_ignore_ascii_case("gzip") || coding.eq_ignore_ascii_case("x-gzip") {
                gzip = Some(q > 0.0);
            } else if coding == "*" {
                any = Some(q > 0.0);
            }
        }
    }
    gzip.or(any).unwrap_or(false)
}

/// A district's ballot: its parties and their lists
#[utoipa::path(get, path = "/api/voting/elections/{election_id}/districts/{district_id}/ballot", tag = "voting",
    params(("election_id" = i64, Path), ("district_id" = i64, Path),
           ("Accept-Encoding" = Option<String>, Header, description = "gzip (or *) gets the ballot gzip-compressed, with its own ETag"),
           ("If-None-Match" = Option<String>, Header, description = "An ETag of this ballot: 304 when it matches")),
    responses((status = 200, body = Ballot, description = "ETag, Cache-Control: public, max-age=60, Vary: Accept-Encoding; Content-Encoding: gzip when accepted",
               example = json!({"electionId": 1, "districtId": 1, "districtName": "North", "candidatesPerVoteMax": 3,
                   "parties": [{"partyId": 2, "name": "Green Future", "shortName": "GF",
                       "candidates": [{"candidateId": 21, "name": "Ana Horvat", "listPosition": 1}]}]})),
              (status = 304, description = "If-None-Match matched the ETag"),
              (status = 404, description = "election_not_found or district_not_found")))]
pub async fn get_ballot(
    State(st): State<Arc<VotingState>>,
    ApiPath((election_id, district_id)): ApiPath<(i64, i64)>,
    headers: HeaderMap,
) -> ApiResult<Response> {
    let entry = election_entry(&st, election_id)?;
    let i = district_index(&entry.election, district_id)?;
    let page = &entry.ballots[i];
    let gzip = accepts_gzip(&headers);
    let (body, etag) = if gzip {
        (&page.gzip, &page.gzip_etag)
    } else {
        (&page.body, &page.etag)
    };
    let mut res = if etag_matches(&headers, etag.to_str().unwrap_or("")) {
        StatusCode::NOT_MODIFIED.into_response()
    } else {
        let mut r = body.clone().into_response();
        let h = r.headers_mut();
        h.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
        if gzip {
            h.insert(header::CONTENT_ENCODING, HeaderValue::from_static("gzip"));
        }
        r
    };
    let h = res.headers_mut();
    h.insert(header::ETAG, etag.clone());
    h.insert(
        header::CACHE_CONTROL,
        HeaderValue::from_static("public, max-age=60"),
    );
    h.insert(header::VARY, HeaderValue::from_static("accept-encoding"));
    Ok(res)
}

/// The claims of a voter token.
#[derive(Deserialize)]
struct VoterClaims {
    sub: String,
    role: String,
    district: i64,
    /// Required: a token that named no election would vote in every one.
    #[serde(default)]
    election: Option<i64>,
}

fn identity_mismatch(message: &str) -> ApiError {
    ApiError::new(StatusCode::FORBIDDEN, "identity_mismatch", message)
}

/// Checks that the bearer token is this voter's, in this district and election.
pub(super) fn check_token(
    keys: &TokenKeys,
    headers: &HeaderMap,
    voter_id: i64,
    district_id: i64,
    election_id: i64,
) -> ApiResult<()> {
    let auth = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .ok_or_else(|| {
            ApiError::unauthorized("missing_token", "send Authorization: Bearer <voter token>")
        })?;
    let token = auth
        .strip_prefix("Bearer ")
        .ok_or_else(|| ApiError::unauthorized("invalid_token", "expected 'Bearer <token>'"))?;
    let claims: VoterClaims = keys.verify_as(token.trim())?;
    if claims.role != super::VOTER {
        return Err(identity_mismatch("voting needs a voter token"));
    }
    if claims.sub.parse::<i64>() != Ok(voter_id) || claims.district != district_id {
        return Err(identity_mismatch(
            "the token is for another voter or district than the voter-id and election-district-id headers",
        ));
    }
    match claims.election {
        None => {
            return Err(identity_mismatch(
                "the voter token names no election; issue one with the claim election=<id> \
                 (throng token --role voter --claim district=<id> --claim election=<id>)",
            ))
        }
        Some(e) if e != election_id => {
            return Err(identity_mismatch("the token is for another election"))
        }
        Some(_) => {}
    }
    Ok(())
}

/// The 201 answer of a vote.
#[derive(Serialize, Deserialize, ToSchema, Debug)]
#[serde(rename_all = "camelCase")]
pub struct Receipt {
    /// Keep it: it tells whether the vote was counted, and nothing else.
    pub receipt_id: String,
    pub election_id: i64,
    pub district_id: i64,
}

/// Where a receipt's ballot is.
#[derive(Serialize, Deserialize, ToSchema, Debug, Clone, Copy, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum ReceiptStatus {
    /// In the ballot box: published once its district's box holds
    /// --voting-mix-ballots-min ballots, or at the close.
    Received,
    /// In the tallies.
    Counted,
}

/// A receipt's state: no choice, no district, no voter, so a receipt
/// cannot prove a vote to a buyer.
#[derive(Serialize, Deserialize, ToSchema, Debug)]
#[serde(rename_all = "camelCase")]
pub struct ReceiptOut {
    pub receipt_id: String,
    pub election_id: i64,
    pub status: ReceiptStatus,
    pub counted: bool,
}

pub(super) fn already_voted() -> ApiError {
    ApiError::conflict(
        "already_voted",
        "this voter has already voted in this election",
    )
}

/// Casts a voter's secret vote
#[utoipa::path(post, path = "/api/voting/elections/{election_id}/votes", tag = "voting",
    params(("election_id" = i64, Path),
           ("voter-id" = inline(HeaderId), Header, description = "The voter, 1 to 9223372036854775807"),
           ("election-district-id" = inline(HeaderId), Header, description = "The voter's district")),
    security(("bearer" = [])),
    request_body(content = inline(VoteRequest), description = "{partyId, candidateIds: [up to the election's candidatesPerVoteMax ids on that party's list in the district]}",
                 example = json!({"partyId": 2, "candidateIds": [21]})),
    responses((status = 201, body = Receipt, description = "Location: the receipt",
               example = json!({"receiptId": "5d0c7a3e-1f2b-4c6d-8e9f-0a1b2c3d4e5f", "electionId": 1, "districtId": 1})),
              (status = 400, description = "invalid_header, malformed_json"),
              (status = 401, description = "missing_token, invalid_token, token_expired (token mode)"),
              (status = 403, description = "identity_mismatch, not_on_roll"),
              (status = 404, description = "election_not_found, district_not_found, voter_not_found"),
              (status = 409, description = "already_voted, election_closed"),
              (status = 415, description = "unsupported_media_type"),
              (status = 422, description = "invalid_field, party_not_on_ballot, candidate_not_on_list, too_many_candidates, repeated_candidate"),
              (status = 429, description = "over capacity; see Retry-After")))]
pub async fn vote(
    State(st): State<Arc<VotingState>>,
    ApiPath(election_id): ApiPath<i64>,
    req: Request,
) -> ApiResult<Response> {
    let entry = election_entry(&st, election_id)?;
    let voter_id = header_id(req.headers(), VOTER_HEADER)?;
    let district_id = header_id(req.headers(), DISTRICT_HEADER)?;
    if st.identity == Identity::Token {
        check_token(&st.keys, req.headers(), voter_id, district_id, election_id)?;
    }
    let ApiJson(body) = ApiJson::<VoteRequest>::from_request(req, &()).await?;
    let e = &entry.election;
    let di = district_index(e, district_id)?;
    match entry.roll.standing(voter_id) {
        Standing::Unknown => {
            return Err(ApiError::not_found(
                "voter_not_found",
                format!("no voter with this id in election {election_id}"),
            ))
        }
        Standing::InDistrict(i) if i != di => {
            return Err(ApiError::new(
                StatusCode::FORBIDDEN,
                "not_on_roll",
                format!("the voter is not on the roll of district {district_id}"),
            ))
        }
        Standing::InDistrict(_) => {}
    }
    e.check_open(now_ms())?;
    let vote = e.parse_vote(&e.districts[di], body)?;
    if entry.roll.has_voted(voter_id) {
        return Err(already_voted());
    }
    // The receipt goes to the voter only; the box keeps its tag and the
    // choice sealed under a key outside the database (receipt.rs).
    let receipt = st.receipts.mint(election_id);
    let tag = st.receipts.tag(election_id, &receipt);
    let choice = store::choice(vote.party_id, &vote.candidates_json());
    let ballot = BoxedBallot {
        election_id,
        district_id,
        sealed: st
            .receipts
            .seal(election_id, district_id, &tag, choice.as_bytes()),
        tag,
    };
    let receipt_id = uuid::Uuid::from_bytes(receipt).to_string();
    match st.storage.cast(&entry.roll, voter_id, ballot).await? {
        VoteOutcome::Cast => {
            let location = format!("/api/voting/elections/{election_id}/receipts/{receipt_id}");
            let body = Receipt {
                receipt_id,
                election_id,
                district_id,
            };
            let mut res = (StatusCode::CREATED, Json(body)).into_response();
            if let Ok(v) = HeaderValue::from_str(&location) {
                res.headers_mut().insert(header::LOCATION, v);
            }
            Ok(res)
        }
        VoteOutcome::AlreadyVoted => Err(already_voted()),
        VoteOutcome::NotTakingVotes => {
            // This node's copy of the election was behind the store's row:
            // catch up, and explain by the row.
            st.refresh().await.map_err(|e| {
                tracing::warn!(error = %format!("{e:#}"), "reading the elections' states failed");
                ApiError::internal()
            })?;
            let entry = election_entry(&st, election_id)?;
            entry.election.check_open(now_ms())?;
            Err(ApiError::conflict(
                "election_closed",
                "the election takes no votes now",
            ))
        }
    }
}

fn receipt_not_found() -> ApiError {
    ApiError::not_found(
        "receipt_not_found",
        "no receipt with this id in this election",
    )
}

/// Whether a receipt's vote was counted
#[utoipa::path(get, path = "/api/voting/elections/{election_id}/receipts/{receipt_id}", tag = "voting",
    params(("election_id" = i64, Path), ("receipt_id" = String, Path)),
    responses((status = 200, body = ReceiptOut,
               example = json!({"receiptId": "5d0c7a3e-1f2b-4c6d-8e9f-0a1b2c3d4e5f", "electionId": 1,
                                "status": "counted", "counted": true})),
              (status = 404, description = "election_not_found, receipt_not_found")))]
pub async fn get_receipt(
    State(st): State<Arc<VotingState>>,
    ApiPath((election_id, receipt_id)): ApiPath<(i64, String)>,
) -> ApiResult<Json<ReceiptOut>> {
    election_entry(&st, election_id)?;
    let id = match uuid::Uuid::parse_str(&receipt_id) {
        Ok(id) if receipt_id.len() == 36 => id,
        _ => return Err(receipt_not_found()),
    };
    let receipt = id.into_bytes();
    let minted = st.receipts.minted(election_id, &receipt);
    let tag = st.receipts.tag(election_id, &receipt);
    let state = st
        .storage
        .receipt(election_id, tag, minted)
        .await?
        .ok_or_else(receipt_not_found)?;
    let counted = match state {
        ReceiptState::Boxed => false,
        ReceiptState::Published { position } => position <= st.tally.position(),
    };
    Ok(Json(ReceiptOut {
        receipt_id: id.to_string(),
        election_id,
        status: if counted {
            ReceiptStatus::Counted
        } else {
            ReceiptStatus::Received
        },
        counted,
    }))
}

#[derive(Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ResultsQuery {
    /// One district's results; the whole election's without it.
    district_id: Option<i64>,
}

/// An election's or a district's results.
#[derive(Serialize, Deserialize, ToSchema, Debug)]
#[serde(rename_all = "camelCase")]
pub struct Results {
    pub election_id: i64,
    /// Null for the whole election.
    pub district_id: Option<i64>,
    /// Counted ballots; ballots waiting in the box are not shown.
    pub ballots: i64,
    /// Of the district or the election: turnout is ballots / votersOnRoll.
    pub voters_on_roll: i64,
    /// RFC 3339: when the counted votes of the district (or of any district,
    /// for the whole election) last changed on this node; null before the
    /// first.
    pub updated_at: Option<String>,
    /// The position of the event log the tallies reflect.
    pub position: i64,
    /// Where the election is in its lifecycle.
    pub state: ElectionState,
    /// Whether party and candidate figures are shown: once the results are
    /// published, or all along with liveResults. Turnout always is.
    pub results_shown: bool,
    /// Districts with counted ballots (of `districtsTotal`).
    pub districts_reporting: i64,
    pub districts_total: i64,
    /// Whole-election results only: each district's turnout.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub districts: Option<Vec<DistrictTurnout>>,
    /// Sorted by votes, then id; empty while results are not shown.
    pub parties: Vec<PartyResult>,
}

/// A district's counted ballots against its roll.
#[derive(Serialize, Deserialize, ToSchema, Debug)]
#[serde(rename_all = "camelCase")]
pub struct DistrictTurnout {
    pub district_id: i64,
    pub code: Option<String>,
    pub name: String,
    pub ballots: i64,
    pub voters_on_roll: i64,
}

/// A party's votes.
#[derive(Serialize, Deserialize, ToSchema, Debug)]
#[serde(rename_all = "camelCase")]
pub struct PartyResult {
    pub party_id: i64,
    pub name: String,
    pub short_name: String,
    /// #rrggbb, fixed per party.
    pub color: String,
    pub votes: i64,
    /// One district's results only: its candidates, by votes then id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub candidates: Option<Vec<CandidateResult>>,
}

/// A candidate's votes.
#[derive(Serialize, Deserialize, ToSchema, Debug)]
#[serde(rename_all = "camelCase")]
pub struct CandidateResult {
    pub candidate_id: i64,
    pub name: String,
    pub votes: i64,
}

/// The results' JSON from a snapshot. A district's parties carry their
/// candidates; the whole election's parties do not (candidates stand in one
/// district each, so the district results hold every candidate's count).
pub fn render_results(e: &Election, district: Option<&District>, s: &Snapshot) -> String {
    let r = render_results_out(e, district, s, e.results_shown());
    serde_json::to_string(&r).expect("results serialize")
}

/// The results of [`render_results`]; party figures only when `shown`.
pub fn render_results_out(
    e: &Election,
    district: Option<&District>,
    s: &Snapshot,
    shown: bool,
) -> Results {
    let key = |p: i64, c: i64| match district {
        Some(d) => s.votes((e.id, d.id, p, c)),
        None => 0,
    };
    // Turnout's roll: a fixed figure, so counted / roll moves only with
    // the published counts.
    let voters_on_roll: i64 = match district {
        Some(d) => d.voters,
        None => e.districts.iter().map(|d| d.voters).sum(),
    };
    // Counted ballots only: what waits in the box is not shown, per
    // district or in total (a count that moved with each vote would tell
    // who voted when, and a district's tally change in a round of fewer
    // than the mix minimum would tell how).
    let ballots: i64 = match district {
        Some(d) => s.ballots.get(&(e.id, d.id)).copied().unwrap_or(0),
        None => s
            .ballots
            .iter()
            .filter(|(k, _)| k.0 == e.id)
            .map(|(_, n)| n)
            .sum(),
    };
    let mut parties: Vec<(i64, i64, PartyResult)> = match district {
        Some(d) => d
            .lists
            .iter()
            .filter_map(|l| {
                let p = e.party(l.party_id)?;
                let mut candidates: Vec<(i64, i64, &str)> = l
                    .candidates
                    .iter()
                    .map(|c| (key(p.id, c.id), c.id, c.name.as_str()))
                    .collect();
                candidates.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
                let candidates = candidates
                    .into_iter()
                    .map(|(votes, id, name)| CandidateResult {
                        candidate_id: id,
                        name: name.to_string(),
                        votes,
                    })
                    .collect();
                let votes = key(p.id, 0);
                let party = PartyResult {
                    party_id: p.id,
                    name: p.name.clone(),
                    short_name: p.short_name.clone(),
                    color: p.color(),
                    votes,
                    candidates: Some(candidates),
                };
                Some((votes, p.id, party))
            })
            .collect(),
        None => e
            .parties
            .iter()
            .map(|p| {
                let votes = s.party_totals.get(&(e.id, p.id)).copied().unwrap_or(0);
                let party = PartyResult {
                    party_id: p.id,
                    name: p.name.clone(),
                    short_name: p.short_name.clone(),
                    color: p.color(),
                    votes,
                    candidates: None,
                };
                (votes, p.id, party)
            })
            .collect(),
    };
    parties.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
    let counted = |d: &District| s.ballots.get(&(e.id, d.id)).copied().unwrap_or(0);
    let reporting = |d: &&District| counted(d) > 0;
    let districts_reporting = match district {
        Some(d) => reporting(&d) as i64,
        None => e.districts.iter().filter(reporting).count() as i64,
    };
    Results {
        election_id: e.id,
        district_id: district.map(|d| d.id),
        ballots,
        voters_on_roll,
        updated_at: s
            .updated_at_ms(e.id, district.map(|d| d.id))
            .map(rfc3339_ms),
        position: s.position,
        state: e.state,
        results_shown: shown,
        districts_reporting,
        districts_total: if district.is_some() {
            1
        } else {
            e.districts.len() as i64
        },
        districts: district.is_none().then(|| {
            e.districts
                .iter()
                .map(|d| DistrictTurnout {
                    district_id: d.id,
                    code: d.code.clone(),
                    name: d.name.clone(),
                    ballots: counted(d),
                    voters_on_roll: d.voters,
                })
                .collect()
        }),
        parties: if shown {
            parties.into_iter().map(|p| p.2).collect()
        } else {
            Vec::new()
        },
    }
}

/// A server-sent event of a results stream.
#[derive(ToSchema)]
#[allow(dead_code)]
pub struct ResultsMessage {
    /// `results`, or `end` last.
    event: String,
    /// For `results`, the results as /results answers them; for `end`,
    /// {reason: lifetime|stopping}.
    #[schema(content_media_type = "application/json")]
    data: String,
}

fn results_target(
    st: &VotingState,
    election_id: i64,
    district_id: Option<i64>,
) -> ApiResult<(Arc<ElectionEntry>, Option<usize>)> {
    let entry = election_entry(st, election_id)?;
    let i = match district_id {
        Some(d) => Some(district_index(&entry.election, d)?),
        None => None,
    };
    Ok((entry, i))
}

/// An election's or a district's counted results
#[utoipa::path(get, path = "/api/voting/elections/{election_id}/results", tag = "voting",
    params(("election_id" = i64, Path), ResultsQuery),
    responses((status = 200, body = Results,
               example = json!({"electionId": 1, "districtId": null, "ballots": 1800, "votersOnRoll": 5200,
                   "updatedAt": "2030-05-05T12:00:00.000Z", "position": 4211, "state": "published", "resultsShown": true,
                   "districtsReporting": 1, "districtsTotal": 1,
                   "districts": [{"districtId": 1, "code": "N", "name": "North", "ballots": 1800, "votersOnRoll": 5200}],
                   "parties": [{"partyId": 2, "name": "Green Future", "shortName": "GF", "color": "#2e8b57", "votes": 1000}]})),
              (status = 404, description = "election_not_found, district_not_found")))]
pub async fn results(
    State(st): State<Arc<VotingState>>,
    ApiPath(election_id): ApiPath<i64>,
    ApiQuery(q): ApiQuery<ResultsQuery>,
) -> ApiResult<Response> {
    let (entry, i) = results_target(&st, election_id, q.district_id)?;
    let e = &entry.election;
    let body = render_results(e, i.map(|i| &e.districts[i]), &st.tally.snapshot());
    Ok((
        [
            (header::CONTENT_TYPE, "application/json"),
            (header::CACHE_CONTROL, "no-cache"),
        ],
        body,
    )
        .into_response())
}

/// The results as server-sent events, at once and after each change
#[utoipa::path(get, path = "/api/voting/elections/{election_id}/results/stream", tag = "voting",
    params(("election_id" = i64, Path), ResultsQuery),
    responses((status = 200, content_type = "text/event-stream", body = ResultsMessage,
               description = "text/event-stream: `event: results` with the /results JSON at once and after each change (at most one per 250 ms); `: keep-alive` every 15 s (a third of --idle-timeout-ms when that is less). After --request-timeout-ms, or at once when the node stops, a last `event: end` with data {reason: lifetime|stopping} ends the stream: reconnect after lifetime; after stopping, poll /results (or reconnect through the balancer)",
               example = json!("event: results\ndata: {\"electionId\":1,\"districtId\":null,\"ballots\":1800,\"votersOnRoll\":5200,\"updatedAt\":\"2030-05-05T12:00:00.000Z\",\"position\":4211,\"parties\":[]}\n\n: keep-alive\n\n")),
              (status = 404, description = "election_not_found, district_not_found"),
              (status = 429, description = "too_many_client_streams: this client (IPv4 address or IPv6 /64) has --voting-streams-per-client-max streams open; poll /results; Retry-After"),
              (status = 503, description = "too_many_streams (see --voting-streams-max), draining (the node is stopping); Retry-After")))]
pub async fn results_stream(
    State(st): State<Arc<VotingState>>,
    State(live): State<Arc<LiveStreams>>,
    ApiPath(election_id): ApiPath<i64>,
    ApiQuery(q): ApiQuery<ResultsQuery>,
    peer: Option<Extension<ConnectInfo<SocketAddr>>>,
    headers: HeaderMap,
) -> ApiResult<Response> {
    let (entry, i) = results_target(&st, election_id, q.district_id)?;
    live.admit()?;
    // Without a peer (a router called in-process) no client is counted.
    let client_slot = match peer {
        Some(Extension(ConnectInfo(peer))) => {
            let key = live.client(peer, &headers);
            let slot = st
                .stream_clients
                .enter(key, st.streams_per_client_max)
                .ok_or_else(|| ApiError {
                    retry_after_s: Some(CLIENT_STREAMS_RETRY_AFTER_S),
                    ..ApiError::new(
                        StatusCode::TOO_MANY_REQUESTS,
                        "too_many_client_streams",
                        format!(
                            "this client already has {} live results streams open (the most per \
                             address, --voting-streams-per-client-max); close one, or poll \
                             /api/voting/elections/{election_id}/results",
                            st.streams_per_client_max
                        ),
                    )
                })?;
            Some(slot)
        }
        None => None,
    };
    let permit = st
        .streams
        .clone()
        .try_acquire_owned()
        .map_err(|_| ApiError {
            retry_after_s: Some(5),
            ..ApiError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "too_many_streams",
                format!(
                    "{} live results streams are open; poll /results or retry later",
                    st.streams_max
                ),
            )
        })?;
    let mut changes = st.tally.subscribe();
    changes.borrow_and_update();
    let tally = st.tally.clone();
    let first = true;
    let last_sent: Option<Instant> = None;
    let held = (permit, client_slot);
    let st_for_stream = st.clone();
    let stream = futures::stream::unfold(
        (changes, held, first, last_sent),
        move |(mut changes, held, first, last_sent)| {
            let (tally, entry) = (tally.clone(), entry.clone());
            let st_for_stream = st_for_stream.clone();
            async move {
                if !first {
                    changes.changed().await.ok()?;
                    if let Some(at) = last_sent {
                        let gap = Duration::from_millis(STREAM_UPDATE_MS_MIN);
                        if at.elapsed() < gap {
                            tokio::time::sleep(gap - at.elapsed()).await;
                        }
                    }
                    changes.borrow_and_update();
                }
                // The election's state may have changed (published).
                let entry = st_for_stream.election(entry.election.id).unwrap_or(entry);
                let e = &entry.election;
                let body = render_results(e, i.map(|i| &e.districts[i]), &tally.snapshot());
                let event = Event::default().event("results").data(body);
                Some((event, (changes, held, false, Some(Instant::now()))))
            }
        },
    );
    Ok(live.respond(stream, Some("end")))
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct DemoVoterQuery {
    election_id: Option<i64>,
    district_id: Option<i64>,
}

/// Demo only (`serve --demo`): a voter of the district who has not voted
/// yet, with a voter token, so the page can vote at once. 404 otherwise.
async fn demo_voter(
    State(st): State<Arc<VotingState>>,
    ApiQuery(q): ApiQuery<DemoVoterQuery>,
) -> ApiResult<Response> {
    if !st.demo {
        return Err(ApiError::not_found(
            "route_not_found",
            "demo voters exist only with serve --demo",
        ));
    }
    let election_id = q.election_id.unwrap_or(1);
    let entry = election_entry(&st, election_id)?;
    let e = &entry.election;
    let district_id = q
        .district_id
        .or(e.districts.first().map(|d| d.id))
        .unwrap_or(0);
    let i = district_index(e, district_id)?;
    let Some(voter_id) = entry
        .roll
        .not_voted_in(i, rand::random(), 1)
        .first()
        .copied()
    else {
        return Err(ApiError::conflict(
            "no_voter_left",
            "every demo voter of this district has voted",
        ));
    };
    let mut claims = serde_json::Map::new();
    claims.insert("district".into(), district_id.into());
    claims.insert("election".into(), election_id.into());
    let token = st.keys.issue_with(
        &voter_id.to_string(),
        super::VOTER,
        DEMO_TOKEN_TTL_S,
        claims,
    );
    Ok(Json(DemoVoter {
        voter_id,
        district_id,
        election_id,
        token,
    })
    .into_response())
}

/// A demo page's voter.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct DemoVoter {
    voter_id: i64,
    district_id: i64,
    election_id: i64,
    token: String,
}

crate::schema_type!(
    /// A voter or district id in a header (`header_id`).
    HeaderId => int_schema(1, i64::MAX)
);

crate::schema_type!(
    for VoteRequest => {
        let id = || {
            ObjectBuilder::new()
                .schema_type(utoipa::openapi::schema::Type::Integer)
                .format(Some(utoipa::openapi::schema::SchemaFormat::KnownFormat(
                    utoipa::openapi::schema::KnownFormat::Int64,
                )))
        };
        let candidates = ArrayBuilder::new()
            .items(id())
            .max_items(Some(CANDIDATES_PER_VOTE_LIMIT as usize))
            .description(Some("default []"));
        closed_object(
            [("partyId", id().into()), ("candidateIds", candidates.into())],
            &["partyId"],
        )
        .build()
    }
);

#[cfg(test)]
mod tests {
    use super::*;

    fn accepts(values: &[&str]) -> bool {
        let mut h = HeaderMap::new();
        for v in values {
            h.append(header::ACCEPT_ENCODING, HeaderValue::from_str(v).unwrap());
        }
        accepts_gzip(&h)
    }

    #[test]
    fn gzip_is_sent_only_when_accepted() {
        assert!(!accepts(&[]));
        assert!(accepts(&["gzip"]));
        assert!(accepts(&["gzip, deflate, br, zstd"]));
        assert!(accepts(&["br;q=1.0, GZIP;q=0.5"]));
        assert!(accepts(&["identity", "x-gzip"]));
        assert!(accepts(&["*"]));
        assert!(!accepts(&["br, deflate"]));
        assert!(!accepts(&["identity"]));
        assert!(!accepts(&["gzip;q=0"]));
        assert!(
            !accepts(&["gzip;q=0.0, *"]),
            "an explicit gzip;q=0 wins over *"
        );
        assert!(!accepts(&["*;q=0"]));
        assert!(accepts(&["gzip;q=0.001"]));
    }
}
