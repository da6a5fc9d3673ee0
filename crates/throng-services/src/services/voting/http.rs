//! Voting routes. Reading (elections, ballots, the board, results) is public;
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
//! `voter_not_found`, `tracker_not_on_board`; 409 `already_voted`,
//! `election_closed`; 415 `unsupported_media_type`; 422 `invalid_field`
//! (body shape), `invalid_sealed_ballot` (not a sealed ballot's size or
//! encoding: what is inside cannot be checked until the opening); 429
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
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::ballot::{self, SEALED_BYTES};
use super::model::{header_id, District, Election, ElectionState, DISTRICT_HEADER, VOTER_HEADER};
use super::roll::Standing;
use super::store::{BoxedBallot, VoteOutcome};
use super::tally::Snapshot;
use super::{ElectionEntry, Identity, VotingState};
use crate::base::clock::{now_ms, rfc3339_ms};
use crate::platform::auth::TokenKeys;
use crate::platform::error::{ApiError, ApiResult};
use crate::platform::extract::{ApiJson, ApiPath, ApiQuery};
use crate::platform::openapi::int_schema;
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
    Arc<crate::platform::session::Sessions>: FromRef<S>,
    Arc<LiveStreams>: FromRef<S>,
{
    OpenApiRouter::default()
        .routes(routes!(list_elections))
        .routes(routes!(get_election))
        .routes(routes!(get_ballot))
        .routes(routes!(vote))
        .routes(routes!(board_summary))
        .routes(routes!(board_page))
        .routes(routes!(board_find))
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

pub fn election_not_found(id: i64) -> ApiError {
    ApiError::not_found("election_not_found", format!("no election with id {id}"))
}

pub fn district_not_found(election: i64, district: i64) -> ApiError {
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
    /// The key ballots are sealed to (base64url; null until the authority
    /// gives it: the election cannot open before).
    pub public_key: Option<String>,
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
        public_key: e.public_key.as_deref().map(ballot::b64),
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
    /// The key ballots are sealed to (base64url), with `suite`.
    pub public_key: Option<String>,
    /// The HPKE suite ballots are sealed with.
    pub suite: String,
    /// A district with fewer ballots at the close is published only inside
    /// its region.
    pub mix_ballots_min: i64,
    /// The public board publishes new trackers every this many ms.
    pub board_period_ms: u64,
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
    /// Where it is published if too few vote in it.
    pub region: Option<String>,
    /// Voters on its roll.
    pub voters: i64,
}

/// Every election
///
/// Public. Every election with its state and times.
#[utoipa::path(get, path = "/api/voting/elections", tag = "voting",
    responses((status = 200, body = ElectionList,
               example = json!({"elections": [{"electionId": 1, "name": "City council 2030",
                   "opensAt": "2030-05-05T05:00:00.000Z", "closesAt": "2030-05-05T17:00:00.000Z",
                   "candidatesPerVoteMax": 3, "open": true, "state": "open",
                   "publicKey": "q4Lw4d9fJb1Yk2c1oVdC3n9Qm8e7s6t5r4u3w2x1y0A"}]}))))]
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
///
/// Public. An election with its state, times and districts.
#[utoipa::path(get, path = "/api/voting/elections/{election_id}", tag = "voting",
    params(("election_id" = i64, Path)),
    responses((status = 200, body = ElectionDetail, description = "The election with its districts (at most 1,000 per election)",
               example = json!({"electionId": 1, "name": "City council 2030", "opensAt": "2030-05-05T05:00:00.000Z",
                   "closesAt": "2030-05-05T17:00:00.000Z", "candidatesPerVoteMax": 3, "open": true,
                   "state": "open", "publicKey": "q4Lw4d9fJb1Yk2c1oVdC3n9Qm8e7s6t5r4u3w2x1y0A",
                   "suite": "DHKEM(X25519, HKDF-SHA256), HKDF-SHA256, AES-128-GCM",
                   "mixBallotsMin": 100, "boardPeriodMs": 10000,
                   "districts": [{"districtId": 1, "code": "N", "name": "North", "region": "Coast", "voters": 5200}]})),
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
            region: d.region.clone(),
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
        public_key: s.public_key,
        suite: ballot::SUITE.to_string(),
        mix_ballots_min: st.mix_ballots_min,
        board_period_ms: st.board_period_ms,
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
    /// In list order: a sealed choice names list `i + 1` for `parties[i]`
    /// and candidate bit `j` for its `candidates[j]` (see `sealTo`).
    pub parties: Vec<BallotParty>,
    /// How the page seals the choice; null until the election has its key.
    pub seal_to: Option<SealTo>,
}

/// How a ballot is sealed: HPKE (RFC 9180) base mode with `suite`, to
/// `publicKey`, with `info`; the plaintext is `plainBytes` bytes: byte 0 =
/// 1, byte 1 = the chosen list's 1-based position in `parties`, bytes
/// 2..27 a bit per candidate of that list (bit `j % 8` of byte `2 + j /
/// 8` for `candidates[j]`), the rest zero. The vote sends `enc ||
/// ciphertext` (base64url), and its tracker is SHA-256 of those bytes.
#[derive(Serialize, Deserialize, ToSchema, Debug)]
#[serde(rename_all = "camelCase")]
pub struct SealTo {
    pub suite: String,
    /// base64url, 32 bytes.
    pub public_key: String,
    /// base64url.
    pub info: String,
    pub plain_bytes: usize,
    pub sealed_bytes: usize,
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
        seal_to: e.public_key.as_deref().map(|key| SealTo {
            suite: ballot::SUITE.to_string(),
            public_key: ballot::b64(key),
            info: ballot::b64(&ballot::info(e.id, d.id)),
            plain_bytes: ballot::PLAIN_BYTES,
            sealed_bytes: SEALED_BYTES,
        }),
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
///
/// Public. A district's ballot: its parties and their candidates, in ballot
/// order. Cacheable: answers an ETag (If-None-Match gives 304).
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
pub fn check_token(
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

/// What a vote answers: the ballot's tracker, and where to find it.
#[derive(Serialize, Deserialize, ToSchema, Debug)]
#[serde(rename_all = "camelCase")]
pub struct Cast {
    /// SHA-256 of the sealed ballot, base64url: the voter's page computes
    /// it too, and finds it on the public board after the next period.
    pub tracker: String,
    pub election_id: i64,
    pub district_id: i64,
    /// The board's address for this tracker.
    pub board_url: String,
}

/// A sealed ballot, as the vote page sends it.
#[derive(Deserialize, ToSchema, Debug)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SealedVote {
    /// `enc || ciphertext` of the ballot sealed to the election's key
    /// (see the ballot's `sealTo`), base64url: 80 bytes.
    pub sealed: String,
}

pub fn already_voted() -> ApiError {
    ApiError::conflict(
        "already_voted",
        "this voter has already voted in this election",
    )
}

/// Casts a voter's sealed vote
///
/// A voter's token from login. Casts the voter's sealed ballot, once. The
/// answer's tracker lets the voter find the ballot on the public board later.
#[utoipa::path(post, path = "/api/voting/elections/{election_id}/votes", tag = "voting",
    params(("election_id" = i64, Path),
           ("voter-id" = inline(HeaderId), Header, description = "The voter, 1 to 9223372036854775807"),
           ("election-district-id" = inline(HeaderId), Header, description = "The voter's district")),
    security(("bearer" = [])),
    request_body(content = SealedVote, description = "The choice sealed in the voter's browser to the election's key (the ballot's sealTo); the server checks its size and stores it, and cannot open it",
                 example = json!({"sealed": "u2yX3cQeS1o0m8mJ7aYdO2Zr4b0mQd3tW9x1cJp5a0E3cYl8mR1q7yFvN2pT0sKbX4wH6uZ9dC5eG8iL1oA2rS3tU4vW5xY6zA7bC8dE9fG0hI1jK2"})),
    responses((status = 201, body = Cast, description = "Location: the tracker on the board",
               example = json!({"tracker": "Qm3r2y1sJ0cV8fJxW4o9kZ2nB7tH1aP6dE5gL3uM0iQ", "electionId": 1, "districtId": 1,
                                "boardUrl": "/api/voting/elections/1/districts/1/board/Qm3r2y1sJ0cV8fJxW4o9kZ2nB7tH1aP6dE5gL3uM0iQ"})),
              (status = 400, description = "invalid_header, malformed_json"),
              (status = 401, description = "missing_token, invalid_token, token_expired (token mode)"),
              (status = 403, description = "identity_mismatch, not_on_roll"),
              (status = 404, description = "election_not_found, district_not_found, voter_not_found"),
              (status = 409, description = "already_voted, ballot_copied (this sealed ballot was cast already), election_closed, election_suspended"),
              (status = 415, description = "unsupported_media_type"),
              (status = 422, description = "invalid_field, invalid_sealed_ballot"),
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
    let ApiJson(body) = ApiJson::<SealedVote>::from_request(req, &()).await?;
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
    // What the server can check without the key: the size. What the sealed
    // bytes hold is checked at the opening, where anything that is not a
    // choice on this district's ballot counts as spoiled.
    let sealed = match ballot::from_b64(&body.sealed) {
        Some(b) if b.len() == SEALED_BYTES => b,
        _ => {
            return Err(ApiError::new(
                StatusCode::UNPROCESSABLE_ENTITY,
                "invalid_sealed_ballot",
                format!(
                    "sealed: {SEALED_BYTES} bytes in base64url, as the ballot's sealTo makes them"
                ),
            ))
        }
    };
    if entry.roll.has_voted(voter_id) {
        return Err(already_voted());
    }
    let tag = ballot::tracker(&sealed);
    let ballot = BoxedBallot {
        election_id,
        district_id,
        sealed,
        tag,
    };
    match st.storage.cast(&entry.roll, voter_id, ballot).await? {
        VoteOutcome::Cast => {
            let tracker = ballot::tracker_text(&tag);
            let board_url = format!(
                "/api/voting/elections/{election_id}/districts/{district_id}/board/{tracker}"
            );
            let mut res = (
                StatusCode::CREATED,
                Json(Cast {
                    tracker,
                    election_id,
                    district_id,
                    board_url: board_url.clone(),
                }),
            )
                .into_response();
            if let Ok(v) = HeaderValue::from_str(&board_url) {
                res.headers_mut().insert(header::LOCATION, v);
            }
            Ok(res)
        }
        VoteOutcome::AlreadyVoted => Err(already_voted()),
        VoteOutcome::CopiedBallot => Err(ApiError::conflict(
            "ballot_copied",
            "this sealed ballot was cast already: the vote page seals a fresh one for every vote",
        )),
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

/// The public board: per district, the ballots on it and its digest.
#[derive(Serialize, Deserialize, ToSchema, Debug)]
#[serde(rename_all = "camelCase")]
pub struct Board {
    pub election_id: i64,
    /// RFC 3339: when the board last moved (null before its first period).
    pub updated_at: Option<String>,
    /// New trackers are published every this many ms.
    pub period_ms: u64,
    /// Whether the board is complete: the election closed and its last
    /// period ran. The box the trustees open must match `digest`.
    pub complete: bool,
    /// The digest of the whole box (hex): SHA-256 over the districts'
    /// digests (see the trustees' `open --board-digest`).
    pub digest: String,
    pub districts: Vec<BoardDistrictOut>,
}

/// A district on the board.
#[derive(Serialize, Deserialize, ToSchema, Debug)]
#[serde(rename_all = "camelCase")]
pub struct BoardDistrictOut {
    pub district_id: i64,
    pub code: Option<String>,
    pub name: String,
    /// Ballots on the board.
    pub ballots: i64,
    /// The district's board digest (hex), chained period by period.
    pub digest: String,
}

/// The election's box digest from a snapshot (districts with no ballot
/// carry their starting digest).
pub fn board_digests(e: &Election, s: &Snapshot) -> Vec<(i64, ballot::Digest32)> {
    e.districts
        .iter()
        .map(|d| {
            let digest = s
                .digests
                .get(&(e.id, d.id))
                .copied()
                .unwrap_or_else(|| ballot::board_digest_start(e.id, d.id));
            (d.id, digest)
        })
        .collect()
}

/// The public ballot board
///
/// Public. The ballot board's state: when it was last published, whether it is
/// complete, and its digest per district and for the whole box, which anyone
/// can recompute from the pages.
#[utoipa::path(get, path = "/api/voting/elections/{election_id}/board", tag = "voting",
    params(("election_id" = i64, Path)),
    responses((status = 200, body = Board,
               example = json!({"electionId": 1, "updatedAt": "2030-05-05T12:00:10.000Z", "periodMs": 10000,
                   "complete": false, "digest": "9f2c0e5d1a7b4c3e8f6d2a1b0c9e8d7f6a5b4c3d2e1f0a9b8c7d6e5f4a3b2c1d",
                   "districts": [{"districtId": 1, "code": "N", "name": "North", "ballots": 1800,
                                  "digest": "1a2b3c4d5e6f708192a3b4c5d6e7f8091a2b3c4d5e6f708192a3b4c5d6e7f809"}]})),
              (status = 404, description = "election_not_found")))]
pub async fn board_summary(
    State(st): State<Arc<VotingState>>,
    ApiPath(election_id): ApiPath<i64>,
) -> ApiResult<Json<Board>> {
    let entry = election_entry(&st, election_id)?;
    let e = &entry.election;
    let s = st.tally.snapshot();
    let digests = board_digests(e, &s);
    Ok(Json(Board {
        election_id,
        updated_at: s.board_at_ms.get(&election_id).copied().map(rfc3339_ms),
        period_ms: st.board_period_ms,
        complete: e.board_final,
        digest: hex::encode(ballot::box_digest(election_id, &digests)),
        districts: e
            .districts
            .iter()
            .zip(&digests)
            .map(|(d, (_, digest))| BoardDistrictOut {
                district_id: d.id,
                code: d.code.clone(),
                name: d.name.clone(),
                ballots: s.ballots.get(&(election_id, d.id)).copied().unwrap_or(0),
                digest: hex::encode(digest),
            })
            .collect(),
    }))
}

#[derive(Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct BoardPageQuery {
    /// The last tracker of the previous page (its `next`).
    after: Option<String>,
    /// 1 to 1000 (default 1000).
    #[param(minimum = 1, maximum = 1000)]
    limit: Option<i64>,
}

/// Trackers of a district's board, in tracker order.
#[derive(Serialize, Deserialize, ToSchema, Debug)]
#[serde(rename_all = "camelCase")]
pub struct BoardPage {
    pub election_id: i64,
    pub district_id: i64,
    pub trackers: Vec<BoardEntry>,
    /// Pass as `after` for the next page; null on the last.
    pub next: Option<String>,
}

/// A tracker on the board and the period that published it.
#[derive(Serialize, Deserialize, ToSchema, Debug)]
#[serde(rename_all = "camelCase")]
pub struct BoardEntry {
    pub tracker: String,
    pub period: i64,
}

const BOARD_PAGE_MAX: i64 = 1000;

fn bad_tracker() -> ApiError {
    ApiError::new(
        StatusCode::BAD_REQUEST,
        "invalid_path",
        "a tracker is 43 characters of base64url, as the vote page shows it",
    )
}

/// A district's board: its trackers, a page at a time
///
/// Public. A district's board: its trackers in order, a page at a time (`after`
/// the last tracker read, `limit`).
#[utoipa::path(get, path = "/api/voting/elections/{election_id}/districts/{district_id}/board", tag = "voting",
    params(("election_id" = i64, Path), ("district_id" = i64, Path), BoardPageQuery),
    responses((status = 200, body = BoardPage,
               example = json!({"electionId": 1, "districtId": 1,
                   "trackers": [{"tracker": "AAv1n8Jc2gYq3XvB6zN0pF4sT7mW9kR1dH5eL2uQ8iO", "period": 3}],
                   "next": null})),
              (status = 400, description = "invalid_query (after is not a tracker, limit outside 1..1000)"),
              (status = 404, description = "election_not_found, district_not_found")))]
pub async fn board_page(
    State(st): State<Arc<VotingState>>,
    ApiPath((election_id, district_id)): ApiPath<(i64, i64)>,
    ApiQuery(q): ApiQuery<BoardPageQuery>,
) -> ApiResult<Json<BoardPage>> {
    let entry = election_entry(&st, election_id)?;
    district_index(&entry.election, district_id)?;
    let limit = q.limit.unwrap_or(BOARD_PAGE_MAX);
    if !(1..=BOARD_PAGE_MAX).contains(&limit) {
        return Err(ApiError::new(
            StatusCode::BAD_REQUEST,
            "invalid_query",
            format!("limit: 1 to {BOARD_PAGE_MAX}"),
        ));
    }
    let after = match q.after.as_deref() {
        None | Some("") => [0u8; ballot::TRACKER_BYTES],
        Some(t) => ballot::parse_tracker(t).ok_or_else(|| {
            ApiError::new(
                StatusCode::BAD_REQUEST,
                "invalid_query",
                "after: a tracker from the previous page's next",
            )
        })?,
    };
    let rows = st
        .storage
        .board_page(election_id, district_id, after, limit)
        .await?;
    let next = (rows.len() as i64 == limit)
        .then(|| rows.last().map(|(t, _)| ballot::tracker_text(t)))
        .flatten();
    Ok(Json(BoardPage {
        election_id,
        district_id,
        trackers: rows
            .iter()
            .map(|(t, period)| BoardEntry {
                tracker: ballot::tracker_text(t),
                period: *period,
            })
            .collect(),
        next,
    }))
}

/// Where a tracker is on the board.
#[derive(Serialize, Deserialize, ToSchema, Debug)]
#[serde(rename_all = "camelCase")]
pub struct OnBoard {
    pub tracker: String,
    pub election_id: i64,
    pub district_id: i64,
    /// The period that published it.
    pub period: i64,
}

/// Whether a tracker is on its district's board
///
/// Public. Whether a voter's tracker is on the district's board, so the voter
/// can check their ballot is in the box. The board is published every period,
/// so a new ballot appears after at most one.
#[utoipa::path(get, path = "/api/voting/elections/{election_id}/districts/{district_id}/board/{tracker}", tag = "voting",
    params(("election_id" = i64, Path), ("district_id" = i64, Path), ("tracker" = String, Path)),
    responses((status = 200, body = OnBoard, description = "On the board: the ballot is in the box the trustees open",
               example = json!({"tracker": "AAv1n8Jc2gYq3XvB6zN0pF4sT7mW9kR1dH5eL2uQ8iO", "electionId": 1, "districtId": 1, "period": 3})),
              (status = 400, description = "invalid_path (not a tracker)"),
              (status = 404, description = "election_not_found, district_not_found, tracker_not_on_board (not yet: the board publishes every period)")))]
pub async fn board_find(
    State(st): State<Arc<VotingState>>,
    ApiPath((election_id, district_id, tracker)): ApiPath<(i64, i64, String)>,
) -> ApiResult<Json<OnBoard>> {
    let entry = election_entry(&st, election_id)?;
    district_index(&entry.election, district_id)?;
    let t = ballot::parse_tracker(&tracker).ok_or_else(bad_tracker)?;
    let period = st
        .storage
        .board_find(election_id, district_id, t)
        .await?
        .ok_or_else(|| {
            ApiError::not_found(
                "tracker_not_on_board",
                format!(
                    "this tracker is not on district {district_id}'s board yet; the board \
                     publishes new trackers every {} s",
                    st.board_period_ms.div_ceil(1000)
                ),
            )
        })?;
    Ok(Json(OnBoard {
        tracker: ballot::tracker_text(&t),
        election_id,
        district_id,
        period,
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
    /// Ballots on the public board (as of its last period).
    pub ballots: i64,
    /// Of the district or the election: turnout is ballots / votersOnRoll.
    pub voters_on_roll: i64,
    /// RFC 3339: when the counted votes of the district (or of any district,
    /// for the whole election) last changed on this node; null before the
    /// first.
    pub updated_at: Option<String>,
    /// Bumped whenever the figures change on this node.
    pub position: i64,
    /// Where the election is in its lifecycle.
    pub state: ElectionState,
    /// Whether party and candidate figures are shown: once the trustees'
    /// results are published. Turnout always is.
    pub results_shown: bool,
    /// Whole-election results, once shown: ballots the opening counted as
    /// spoiled (not a choice on their district's ballot).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spoiled: Option<i64>,
    /// A district too small to publish alone: the unit its figures are
    /// published in (the parties are that unit's, with no candidates).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unit: Option<UnitOut>,
    /// Districts with counted ballots (of `districtsTotal`).
    pub districts_reporting: i64,
    pub districts_total: i64,
    /// Whole-election results only: each district's turnout.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub districts: Option<Vec<DistrictTurnout>>,
    /// Sorted by votes, then id; empty while results are not shown.
    pub parties: Vec<PartyResult>,
}

/// A unit of several districts, published together.
#[derive(Serialize, Deserialize, ToSchema, Debug)]
#[serde(rename_all = "camelCase")]
pub struct UnitOut {
    pub kind: super::opening::UnitKind,
    pub name: String,
    pub district_ids: Vec<i64>,
    pub ballots: i64,
}

/// A district's ballots on the board against its roll.
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
    let r = render_results_out(e, district, s, e.results_shown() && s.has_results(e.id));
    serde_json::to_string(&r).expect("results serialize")
}

/// The results of [`render_results`]; party figures only when `shown`.
pub fn render_results_out(
    e: &Election,
    district: Option<&District>,
    s: &Snapshot,
    shown: bool,
) -> Results {
    // A district published only inside a larger unit shows that unit's
    // party figures, and no candidate's (each stands in one district).
    let merged = district.and_then(|d| s.merged.get(&(e.id, d.id)));
    let key = |p: i64, c: i64| match (district, merged) {
        (Some(_), Some(u)) => s.votes((e.id, u.key, p, c)),
        (Some(d), None) => s.votes((e.id, d.id, p, c)),
        (None, _) => 0,
    };
    // Turnout's roll: a fixed figure, so counted / roll moves only with
    // the published counts.
    let voters_on_roll: i64 = match district {
        Some(d) => d.voters,
        None => e.districts.iter().map(|d| d.voters).sum(),
    };
    // Ballots on the board: they move only with the board's periods.
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
                    candidates: merged.is_none().then_some(candidates),
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
        spoiled: if shown && district.is_none() {
            s.spoiled.get(&e.id).copied()
        } else {
            None
        },
        unit: merged.filter(|_| shown).map(|u| UnitOut {
            kind: u.kind,
            name: u.name.clone(),
            district_ids: u.district_ids.clone(),
            ballots: u.ballots,
        }),
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
///
/// Public, once published. An election's counted results, or one district's
/// with `districtId`.
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
///
/// Public. The results as server-sent events: sent at once and again after each
/// change. Reconnect when the stream ends with `lifetime`.
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
