//! An election authority's routes: the draft from its definition, the
//! roll (answered with the voters' credentials, once), the lifecycle's
//! steps, voters' logins with their credentials, and the audit's exports.
//!
//! Error codes: 400 `invalid_path`, `malformed_json`; 401 `missing_token`,
//! `invalid_token`, `token_expired`, `invalid_credentials`; 403
//! `forbidden`; 404 `election_not_found`; 409 `invalid_transition`,
//! `roll_frozen`, `roll_empty`, `roll_importing`, `election_closed`,
//! `not_tallied`, `election_not_closed`; 415 `unsupported_media_type`;
//! 422 `invalid_field`, `invalid_definition`, `invalid_roll`; 429
//! `too_many_attempts`.

use std::net::SocketAddr;
use std::sync::Arc;

use axum::body::{Body, Bytes};
use axum::extract::{ConnectInfo, FromRef, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::{Extension, Json};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::credential::{self, CredentialSource, CREDENTIAL_HASH_BYTES};
use super::definition::{self, Definition, FieldProblem};
use super::http::{election_not_found, render_results_out};
use super::model::{Election, ElectionState};
use super::opening::{BoxFile, ResultsFile};
use super::roll::Standing;
use super::store::{RollRows, StepRefused};
use super::trustee::KeyFile;
use super::{ElectionEntry, VotingState, VOTER};
use crate::base::clock::{now_ms, rfc3339_ms};
use crate::platform::auth::{Caller, Role, TokenKeys};
use crate::platform::body_limit::LargeBody;
use crate::platform::error::{ApiError, ApiResult};
use crate::platform::extract::{ApiJson, ApiPath};
use crate::platform::streams::LiveStreams;

/// Bytes of a roll at most (10,000,000 voters of 40 bytes a line).
pub const ROLL_BYTES_MAX: usize = 400 * 1024 * 1024;
/// Bytes of a definition at most.
pub const DEFINITION_BYTES_MAX: usize = 16 * 1024 * 1024;
/// Time for a roll's upload, import and answer at most.
pub const ROLL_IMPORT_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(300);
/// Time for a definition's upload and answer at most.
pub const DEFINITION_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(60);

/// The routes whose bodies are larger than `--body-limit-bytes` allows.
pub static LARGE_BODIES: &[LargeBody] = &[
    LargeBody {
        method: "PUT",
        path: "/api/voting/elections/{election_id}/roll",
        bytes_max: ROLL_BYTES_MAX,
        timeout: ROLL_IMPORT_TIMEOUT,
    },
    LargeBody {
        method: "PUT",
        path: "/api/voting/elections/{election_id}/results",
        bytes_max: RESULTS_BYTES_MAX,
        timeout: ROLL_IMPORT_TIMEOUT,
    },
    LargeBody {
        method: "POST",
        path: "/api/voting/elections",
        bytes_max: DEFINITION_BYTES_MAX,
        timeout: DEFINITION_TIMEOUT,
    },
];

/// Bytes of a trustees' results document at most (its opened ballots:
/// ~40 bytes each).
pub const RESULTS_BYTES_MAX: usize = 512 << 20;

/// Voters on one roll at most.
pub const ROLL_VOTERS_MAX: usize = 10_000_000;
/// Bytes of a voter id on the roll at most.
pub const VOTER_ID_BYTES_MAX: usize = 64;
/// Problems a refused roll reports at most (each with its line).
pub const ROLL_ERRORS_MAX: usize = 20;
/// Voter tokens from a login live this long.
pub const VOTER_TOKEN_TTL_S: u64 = 3600;
/// Rows of the credentials' answer per chunk sent.
const CREDENTIAL_ROWS_PER_CHUNK: usize = 20_000;
/// Events of an election's log read at most.
pub const AUDIT_LOG_EVENTS_MAX: i64 = 10_000;

/// The authority's routes and their operations.
pub fn routes<S>() -> OpenApiRouter<S>
where
    S: Clone + Send + Sync + 'static,
    Arc<VotingState>: FromRef<S>,
    Arc<TokenKeys>: FromRef<S>,
    Arc<crate::platform::session::Sessions>: FromRef<S>,
    Arc<LiveStreams>: FromRef<S>,
{
    // Bodies bounded by the service's own limits ([`LARGE_BODIES`], checked
    // before the handler runs), not by axum's default.
    let large = OpenApiRouter::default()
        .routes(routes!(create_election))
        .routes(routes!(import_roll))
        .routes(routes!(import_results))
        .layer(axum::extract::DefaultBodyLimit::disable());
    OpenApiRouter::default()
        .merge(large)
        .routes(routes!(extend_election))
        .routes(routes!(login))
        .routes(routes!(set_key))
        .routes(routes!(export_box))
        .routes(routes!(open_election))
        .routes(routes!(suspend_election))
        .routes(routes!(resume_election))
        .routes(routes!(close_election))
        .routes(routes!(publish_results))
        .routes(routes!(audit_turnout))
        .routes(routes!(audit_voters))
        .routes(routes!(audit_results_csv))
        .routes(routes!(audit_results_json))
        .routes(routes!(audit_log))
}

fn admin(caller: &Caller) -> ApiResult<String> {
    Ok(caller.require(Role::ADMIN)?.sub.clone())
}

fn entry(st: &VotingState, id: i64) -> ApiResult<Arc<ElectionEntry>> {
    st.election(id).ok_or_else(|| election_not_found(id))
}

/// Catches this node's catalog up with the store.
async fn refreshed(st: &VotingState) -> ApiResult<()> {
    st.refresh().await.map_err(|e| {
        tracing::warn!(error = %format!("{e:#}"), "reading the elections' states failed");
        ApiError::unavailable("the database is unavailable; retry shortly")
    })
}

/// An election's lifecycle as the authority sees it.
#[derive(Serialize, Deserialize, ToSchema, Debug)]
#[serde(rename_all = "camelCase")]
pub struct ElectionStatus {
    pub election_id: i64,
    pub name: String,
    pub state: ElectionState,
    /// RFC 3339.
    pub opens_at: String,
    /// RFC 3339.
    pub closes_at: String,
    /// Whether the authority gave the election's public key (it cannot
    /// open without).
    pub has_key: bool,
    /// Voters on the roll.
    pub voters: i64,
}

fn status_of(e: &Election) -> ElectionStatus {
    ElectionStatus {
        election_id: e.id,
        name: e.name.clone(),
        state: e.state,
        opens_at: rfc3339_ms(e.opens_at_ms),
        closes_at: rfc3339_ms(e.closes_at_ms),
        has_key: e.public_key.is_some(),
        voters: e.districts.iter().map(|d| d.voters).sum(),
    }
}

/// The answer of a draft made.
#[derive(Serialize, Deserialize, ToSchema, Debug)]
#[serde(rename_all = "camelCase")]
pub struct Drafted {
    pub election_id: i64,
    pub state: ElectionState,
}

/// Problems as one message: `path: what` per problem, `; ` between.
pub fn problems_message(problems: &[FieldProblem]) -> String {
    problems
        .iter()
        .map(|p| {
            if p.path.is_empty() {
                p.message.clone()
            } else {
                format!("{}: {}", p.path, p.message)
            }
        })
        .collect::<Vec<_>>()
        .join("; ")
}

/// Creates a draft election from its authority's definition
///
/// An admin token. Creates a draft election from its authority's definition:
/// name, times, districts, parties and candidates. Every problem in the
/// definition is listed at once, as `path: what`.
#[utoipa::path(post, path = "/api/voting/elections", tag = "voting",
    security(("bearer" = [])),
    request_body(content = Definition, description = "The election: districts (code, name, lists of each party's candidates), parties (code, name, colour), candidatesPerVoteMax, opensAt, closesAt (RFC 3339), liveResults",
        example = json!({"name": "Town council 2030", "opensAt": "2030-05-05T07:00:00+02:00",
            "closesAt": "2030-05-05T20:00:00+02:00", "candidatesPerVoteMax": 2, "liveResults": false,
            "parties": [{"code": "GF", "name": "Green Future", "colour": "#2e8b57"}],
            "districts": [{"code": "N", "name": "North", "lists": [{"party": "GF", "candidates": ["Ana Horvat"]}]}]})),
    responses((status = 201, body = Drafted, description = "Location: the election",
               example = json!({"electionId": 2, "state": "draft"})),
              (status = 403, description = "forbidden: an admin token is needed"),
              (status = 422, description = "invalid_definition: every problem as `path: what`, e.g. `districts[3].code: ...`")))]
pub async fn create_election(
    State(st): State<Arc<VotingState>>,
    caller: Caller,
    body: Bytes,
) -> ApiResult<Response> {
    let actor = admin(&caller)?;
    let checked = definition::parse_json(&body).map_err(|p| {
        ApiError::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            "invalid_definition",
            problems_message(&p),
        )
    })?;
    let id = st.storage.create_election(Arc::new(checked), actor).await?;
    refreshed(&st).await?;
    tracing::info!(election_id = id, "an election was drafted");
    let mut res = (
        StatusCode::CREATED,
        Json(Drafted {
            election_id: id,
            state: ElectionState::Draft,
        }),
    )
        .into_response();
    if let Ok(v) = HeaderValue::from_str(&format!("/api/voting/elections/{id}")) {
        res.headers_mut().insert(header::LOCATION, v);
    }
    Ok(res)
}

/// The body of `PATCH /api/voting/elections/{id}`.
#[derive(Deserialize, ToSchema, Debug)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ElectionPatch {
    /// A later closing time (RFC 3339), before the current one has passed.
    pub closes_at: String,
}

fn transition_refused(id: i64, r: StepRefused, action: &str, needs: &str) -> ApiError {
    match r {
        StepRefused::NotFound => election_not_found(id),
        StepRefused::In(state) => ApiError::conflict(
            "invalid_transition",
            format!(
                "the election is {}; {action} needs it {needs}",
                state.as_str()
            ),
        ),
    }
}

/// Extends an election's closing time
///
/// An admin token. Moves an election's closing time later, before it has
/// passed.
#[utoipa::path(patch, path = "/api/voting/elections/{election_id}", tag = "voting",
    params(("election_id" = i64, Path)),
    security(("bearer" = [])),
    request_body(content = ElectionPatch, example = json!({"closesAt": "2030-05-05T21:00:00+02:00"})),
    responses((status = 200, body = ElectionStatus,
               example = json!({"electionId": 2, "name": "Town council 2030", "state": "open",
                   "opensAt": "2030-05-05T05:00:00.000Z", "closesAt": "2030-05-05T19:00:00.000Z",
                   "liveResults": false, "voters": 10000})),
              (status = 403, description = "forbidden"),
              (status = 404, description = "election_not_found"),
              (status = 409, description = "invalid_transition: closed, or its closing time has passed"),
              (status = 422, description = "invalid_field: closesAt is no RFC 3339 time, or not later than the current closing time")))]
pub async fn extend_election(
    State(st): State<Arc<VotingState>>,
    caller: Caller,
    ApiPath(election_id): ApiPath<i64>,
    ApiJson(patch): ApiJson<ElectionPatch>,
) -> ApiResult<Json<ElectionStatus>> {
    let actor = admin(&caller)?;
    let e = entry(&st, election_id)?;
    if e.election.state.is_over() {
        return Err(transition_refused(
            election_id,
            StepRefused::In(e.election.state),
            "extending",
            "draft, open or suspended",
        ));
    }
    let closes = definition::parse_time(&patch.closes_at)
        .ok_or_else(|| ApiError::invalid_field("closesAt: an RFC 3339 time with an offset"))?;
    if closes <= e.election.closes_at_ms {
        return Err(ApiError::invalid_field(format!(
            "closesAt: later than the current closing time, {}",
            rfc3339_ms(e.election.closes_at_ms)
        )));
    }
    st.storage
        .extend(election_id, closes, actor)
        .await?
        .map_err(|r| match r {
            StepRefused::In(s) if !s.is_over() => ApiError::conflict(
                "invalid_transition",
                "the closing time has passed: the election is closing",
            ),
            r => transition_refused(election_id, r, "extending", "draft, open or suspended"),
        })?;
    refreshed(&st).await?;
    Ok(Json(status_of(&entry(&st, election_id)?.election)))
}

/// A step of the lifecycle: from which states, to which, its event.
struct Step {
    action: &'static str,
    from: &'static [ElectionState],
    needs: &'static str,
    to: ElectionState,
    event: &'static str,
}

const OPEN: Step = Step {
    action: "opening",
    from: &[ElectionState::Draft],
    needs: "draft",
    to: ElectionState::Open,
    event: "voting.ElectionOpened",
};
const SUSPEND: Step = Step {
    action: "suspending",
    from: &[ElectionState::Open],
    needs: "open",
    to: ElectionState::Suspended,
    event: "voting.ElectionSuspended",
};
const RESUME: Step = Step {
    action: "resuming",
    from: &[ElectionState::Suspended],
    needs: "suspended",
    to: ElectionState::Open,
    event: "voting.ElectionResumed",
};
const CLOSE: Step = Step {
    action: "closing",
    from: &[ElectionState::Open, ElectionState::Suspended],
    needs: "open or suspended",
    to: ElectionState::Closed,
    event: "voting.ElectionClosed",
};
const PUBLISH: Step = Step {
    action: "publishing",
    from: &[ElectionState::Tallied],
    needs: "tallied (every ballot counted, shortly after the close)",
    to: ElectionState::Published,
    event: "voting.ResultsPublished",
};

/// The step from closed to tallied, taken by the mixer once every ballot
/// is published.
pub(super) const TALLIED: (&[ElectionState], ElectionState, &str) = (
    &[ElectionState::Closed],
    ElectionState::Tallied,
    "voting.ElectionTallied",
);

async fn take_step(
    st: &VotingState,
    caller: &Caller,
    election_id: i64,
    step: Step,
) -> ApiResult<Json<ElectionStatus>> {
    let actor = admin(caller)?;
    entry(st, election_id)?;
    st.storage
        .step(
            election_id,
            step.from,
            step.to,
            (step.event, serde_json::json!({"actor": actor})),
        )
        .await?
        .map_err(|r| transition_refused(election_id, r, step.action, step.needs))?;
    tracing::info!(
        election_id,
        state = step.to.as_str(),
        "an election's state changed"
    );
    refreshed(st).await?;
    Ok(Json(status_of(&entry(st, election_id)?.election)))
}

const STATUS_EXAMPLE: &str = r#"{"electionId": 2, "name": "Town council 2030", "state": "open", "opensAt": "2030-05-05T05:00:00.000Z", "closesAt": "2030-05-05T18:00:00.000Z", "hasKey": true, "voters": 10000}"#;

/// Opens a draft election: votes are taken from its opening to its closing time
///
/// An admin token. Opens a draft election once it has its public key and its
/// roll: votes are taken from its opening time to its closing time.
#[utoipa::path(post, path = "/api/voting/elections/{election_id}/open", tag = "voting",
    params(("election_id" = i64, Path)), security(("bearer" = [])),
    responses((status = 200, body = ElectionStatus, example = json!(serde_json::from_str::<serde_json::Value>(STATUS_EXAMPLE).unwrap())),
              (status = 403, description = "forbidden"), (status = 404, description = "election_not_found"),
              (status = 409, description = "invalid_transition (not a draft), key_missing (give the public key first), roll_empty (import the roll first), roll_importing")))]
pub async fn open_election(
    State(st): State<Arc<VotingState>>,
    caller: Caller,
    ApiPath(election_id): ApiPath<i64>,
) -> ApiResult<Json<ElectionStatus>> {
    admin(&caller)?;
    let _importing = st.roll_imports.try_lock().map_err(|_| {
        ApiError::conflict(
            "roll_importing",
            "a roll is being imported on this node; open the election once it is done",
        )
    })?;
    refreshed(&st).await?;
    let e = entry(&st, election_id)?;
    if e.election.state == ElectionState::Draft && e.roll.voters() == 0 {
        return Err(ApiError::conflict(
            "roll_empty",
            format!(
                "the roll is empty: import it first (PUT /api/voting/elections/{election_id}/roll)"
            ),
        ));
    }
    if e.election.state == ElectionState::Draft && e.election.public_key.is_none() {
        return Err(ApiError::conflict(
            "key_missing",
            format!(
                "the election has no public key: make one with `throng voting keygen` away from \
                 this server and give it (PUT /api/voting/elections/{election_id}/key)"
            ),
        ));
    }
    take_step(&st, &caller, election_id, OPEN).await
}

/// Suspends voting in an open election
///
/// An admin token. Stops taking votes in an open election until it is resumed.
#[utoipa::path(post, path = "/api/voting/elections/{election_id}/suspend", tag = "voting",
    params(("election_id" = i64, Path)), security(("bearer" = [])),
    responses((status = 200, body = ElectionStatus, example = json!(serde_json::from_str::<serde_json::Value>(&STATUS_EXAMPLE.replace("\"open\"", "\"suspended\"")).unwrap())),
              (status = 403, description = "forbidden"), (status = 404, description = "election_not_found"),
              (status = 409, description = "invalid_transition: not open")))]
pub async fn suspend_election(
    State(st): State<Arc<VotingState>>,
    caller: Caller,
    ApiPath(election_id): ApiPath<i64>,
) -> ApiResult<Json<ElectionStatus>> {
    take_step(&st, &caller, election_id, SUSPEND).await
}

/// Resumes voting in a suspended election
///
/// An admin token. Takes votes again in a suspended election.
#[utoipa::path(post, path = "/api/voting/elections/{election_id}/resume", tag = "voting",
    params(("election_id" = i64, Path)), security(("bearer" = [])),
    responses((status = 200, body = ElectionStatus, example = json!(serde_json::from_str::<serde_json::Value>(STATUS_EXAMPLE).unwrap())),
              (status = 403, description = "forbidden"), (status = 404, description = "election_not_found"),
              (status = 409, description = "invalid_transition: not suspended")))]
pub async fn resume_election(
    State(st): State<Arc<VotingState>>,
    caller: Caller,
    ApiPath(election_id): ApiPath<i64>,
) -> ApiResult<Json<ElectionStatus>> {
    take_step(&st, &caller, election_id, RESUME).await
}

/// Closes an election: no vote is taken after this answers
///
/// An admin token. Closes an open or suspended election: no vote is taken once
/// this answers, and the remaining ballots are published on the board.
#[utoipa::path(post, path = "/api/voting/elections/{election_id}/close", tag = "voting",
    params(("election_id" = i64, Path)), security(("bearer" = [])),
    responses((status = 200, body = ElectionStatus, description = "Closed; the mixer publishes the remaining ballots and the election becomes tallied",
               example = json!(serde_json::from_str::<serde_json::Value>(&STATUS_EXAMPLE.replace("\"open\"", "\"closed\"")).unwrap())),
              (status = 403, description = "forbidden"), (status = 404, description = "election_not_found"),
              (status = 409, description = "invalid_transition: not open or suspended")))]
pub async fn close_election(
    State(st): State<Arc<VotingState>>,
    caller: Caller,
    ApiPath(election_id): ApiPath<i64>,
) -> ApiResult<Json<ElectionStatus>> {
    let res = take_step(&st, &caller, election_id, CLOSE).await?;
    st.tally.wake.notify_one();
    Ok(res)
}

/// Publishes a tallied election's results
///
/// An admin token. Makes a tallied election's results public.
#[utoipa::path(post, path = "/api/voting/elections/{election_id}/publish", tag = "voting",
    params(("election_id" = i64, Path)), security(("bearer" = [])),
    responses((status = 200, body = ElectionStatus, example = json!(serde_json::from_str::<serde_json::Value>(&STATUS_EXAMPLE.replace("\"open\"", "\"published\"")).unwrap())),
              (status = 403, description = "forbidden"), (status = 404, description = "election_not_found"),
              (status = 409, description = "invalid_transition: not tallied yet (closed elections are tallied within a few seconds)")))]
pub async fn publish_results(
    State(st): State<Arc<VotingState>>,
    caller: Caller,
    ApiPath(election_id): ApiPath<i64>,
) -> ApiResult<Json<ElectionStatus>> {
    take_step(&st, &caller, election_id, PUBLISH).await
}

// ---------------------------------------------------------------- the roll

/// A roll parsed and checked: its rows and their order by voter id.
pub struct ParsedRoll {
    pub rows: RollRows,
    /// Row indexes sorted by voter id.
    pub by_ref: Vec<u32>,
}

/// Parses a roll (`voter_id,district` then a row per voter) for `e`: every
/// problem with its line, at most [`ROLL_ERRORS_MAX`].
pub fn parse_roll(e: &Election, body: &[u8]) -> Result<ParsedRoll, Vec<String>> {
    let mut errors = Vec::new();
    let mut rows = RollRows {
        refs: Vec::with_capacity(body.len()),
        ends: Vec::with_capacity(body.len() / 16),
        districts: Vec::with_capacity(body.len() / 16),
    };
    let codes: std::collections::HashMap<&str, i64> = e
        .districts
        .iter()
        .filter_map(|d| d.code.as_deref().map(|c| (c, d.id)))
        .collect();
    let mut reader = csv::ReaderBuilder::new()
        .has_headers(false)
        .flexible(true)
        .from_reader(body);
    let mut record = csv::ByteRecord::new();
    let mut lines: Vec<u32> = Vec::new();
    let mut first = true;
    loop {
        if errors.len() >= ROLL_ERRORS_MAX {
            break;
        }
        match reader.read_byte_record(&mut record) {
            Ok(false) => break,
            Ok(true) => {}
            Err(err) => {
                let line = err.position().map(|p| p.line()).unwrap_or(0);
                errors.push(format!("line {line}: {err}"));
                break;
            }
        }
        let line = record.position().map(|p| p.line()).unwrap_or(0);
        let field = |i: usize| record.get(i).map(|f| f.trim_ascii());
        if first {
            first = false;
            let header = (field(0), field(1), record.len());
            if header != (Some(&b"voter_id"[..]), Some(&b"district"[..]), 2) {
                errors.push(format!(
                    "line {line}: the first line must be the header voter_id,district"
                ));
                break;
            }
            continue;
        }
        if record.len() == 1 && field(0) == Some(b"") {
            continue; // a blank line
        }
        if record.len() != 2 {
            errors.push(format!(
                "line {line}: 2 fields (voter_id,district), not {}",
                record.len()
            ));
            continue;
        }
        let (voter, district) = (field(0).unwrap_or(b""), field(1).unwrap_or(b""));
        let voter_ok = match std::str::from_utf8(voter) {
            Ok(v) => {
                !v.is_empty() && v.len() <= VOTER_ID_BYTES_MAX && !v.chars().any(char::is_control)
            }
            Err(_) => false,
        };
        if !voter_ok {
            errors.push(format!(
                "line {line}: voter_id must be 1 to {VOTER_ID_BYTES_MAX} bytes of UTF-8 text without control characters"
            ));
            continue;
        }
        let Some(&district_id) = std::str::from_utf8(district)
            .ok()
            .and_then(|d| codes.get(d))
        else {
            errors.push(format!(
                "line {line}: district {:?} is no district code of this election",
                String::from_utf8_lossy(district)
            ));
            continue;
        };
        if rows.ends.len() >= ROLL_VOTERS_MAX {
            errors.push(format!(
                "line {line}: a roll holds at most {ROLL_VOTERS_MAX} voters"
            ));
            break;
        }
        rows.refs.extend_from_slice(voter);
        rows.ends.push(rows.refs.len() as u32);
        rows.districts.push(district_id);
        lines.push(line as u32);
    }
    if first && errors.is_empty() {
        errors.push("line 1: the first line must be the header voter_id,district".into());
    }
    if errors.is_empty() && rows.is_empty() {
        errors.push("the roll names no voter".into());
    }
    if first || errors.len() >= ROLL_ERRORS_MAX {
        return Err(errors);
    }
    let mut by_ref: Vec<u32> = (0..rows.len() as u32).collect();
    by_ref.sort_unstable_by(|&a, &b| rows.voter_ref(a as usize).cmp(rows.voter_ref(b as usize)));
    for w in by_ref.windows(2) {
        let (a, b) = (w[0] as usize, w[1] as usize);
        if rows.voter_ref(a) == rows.voter_ref(b) {
            let (first, again) = (lines[a].min(lines[b]), lines[a].max(lines[b]));
            errors.push(format!(
                "line {again}: voter id {:?} is on line {first} too",
                String::from_utf8_lossy(rows.voter_ref(a))
            ));
            if errors.len() >= ROLL_ERRORS_MAX {
                break;
            }
        }
    }
    if !errors.is_empty() {
        errors.sort_by_key(|m| {
            m.strip_prefix("line ")
                .and_then(|m| m.split(':').next())
                .and_then(|n| n.parse::<u64>().ok())
        });
        errors.truncate(ROLL_ERRORS_MAX);
        return Err(errors);
    }
    Ok(ParsedRoll { rows, by_ref })
}

/// A CSV field: quoted when it holds a comma, a quote or a line break.
fn csv_field(out: &mut Vec<u8>, v: &[u8]) {
    if v.iter().any(|b| matches!(b, b',' | b'"' | b'\n' | b'\r')) || v.first() == Some(&b' ') {
        out.push(b'"');
        for &b in v {
            if b == b'"' {
                out.push(b'"');
            }
            out.push(b);
        }
        out.push(b'"');
    } else {
        out.extend_from_slice(v);
    }
}

fn csv_answer(body: Body, filename: &str) -> Response {
    let mut res = body.into_response();
    let h = res.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/csv; charset=utf-8"),
    );
    if let Ok(v) = HeaderValue::from_str(&format!("attachment; filename=\"{filename}\"")) {
        h.insert(header::CONTENT_DISPOSITION, v);
    }
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    res
}

fn is_csv(headers: &HeaderMap) -> bool {
    headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .is_some_and(|v| v.trim().eq_ignore_ascii_case("text/csv"))
}

/// Imports (or replaces) a draft election's roll; answers each voter's credential, once
///
/// An admin token. Imports (or replaces) a draft election's roll from CSV
/// (Content-Type: text/csv). The answer holds each voter's credential: it is
/// the only copy, so keep it; the store keeps keyed hashes only.
#[utoipa::path(put, path = "/api/voting/elections/{election_id}/roll", tag = "voting",
    params(("election_id" = i64, Path)), security(("bearer" = [])),
    request_body(content = String, content_type = "text/csv",
        description = "The header voter_id,district, then a line per voter: the voter's id as the authority gives it (1 to 64 bytes) and a district code of the election. Replaces the roll while the election is a draft. At most 10,000,000 voters, at most 400 MiB",
        example = "voter_id,district\nA-0001,N\nA-0002,S\n"),
    responses((status = 200, content_type = "text/csv", body = String,
               description = "voter_id,credential per voter, in the roll's order: the only copy of the credentials (the store keeps keyed hashes). Cache-Control: no-store",
               example = "voter_id,credential\nA-0001,7KQX-M2PD-RTW9H\nA-0002,HB3N-X8ZQ-4KCFA\n"),
              (status = 403, description = "forbidden"), (status = 404, description = "election_not_found"),
              (status = 409, description = "roll_frozen: the election is no longer a draft; roll_importing: another import runs on this node"),
              (status = 413, description = "body_too_large: over 400 MiB"),
              (status = 415, description = "unsupported_media_type: send Content-Type: text/csv"),
              (status = 422, description = "invalid_roll: each problem with its line; nothing was imported")))]
pub async fn import_roll(
    State(st): State<Arc<VotingState>>,
    caller: Caller,
    ApiPath(election_id): ApiPath<i64>,
    headers: HeaderMap,
    body: Bytes,
) -> ApiResult<Response> {
    let actor = admin(&caller)?;
    if !is_csv(&headers) {
        return Err(ApiError::new(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "unsupported_media_type",
            "send the roll as Content-Type: text/csv",
        ));
    }
    let _one = st.roll_imports.try_lock().map_err(|_| {
        ApiError::conflict(
            "roll_importing",
            "another roll import runs on this node; retry once it is done",
        )
    })?;
    refreshed(&st).await?;
    let e = entry(&st, election_id)?;
    if e.election.state != ElectionState::Draft {
        return Err(ApiError::conflict(
            "roll_frozen",
            format!(
                "the election is {}: its roll can change only while it is a draft",
                e.election.state.as_str()
            ),
        ));
    }
    let started = std::time::Instant::now();
    let key = st.credentials.clone();
    let election = e.election.clone();
    let (parsed, source, hashes) = tokio::task::spawn_blocking(move || {
        let parsed = parse_roll(&election, &body)?;
        drop(body);
        let source = CredentialSource::random();
        let hashes: Vec<[u8; CREDENTIAL_HASH_BYTES]> = (0..parsed.rows.len())
            .map(|i| key.hash(election.id, i as i64 + 1, &source.credential(i as u64)))
            .collect();
        Ok::<_, Vec<String>>((parsed, source, hashes))
    })
    .await
    .map_err(|_| ApiError::internal())?
    .map_err(|errors| {
        ApiError::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            "invalid_roll",
            format!("nothing was imported: {}", errors.join("; ")),
        )
    })?;
    let voters = parsed.rows.len();
    let counted = st
        .storage
        .import_roll(election_id, &parsed.rows, &hashes, &parsed.by_ref, actor)
        .await
        .map_err(|err| {
            tracing::error!(election_id, error = %format!("{err:#}"), "a roll import failed");
            ApiError::internal()
        })?;
    drop(hashes);
    if !counted {
        tracing::warn!(election_id, "the election was opened while its roll loaded");
    }
    refreshed(&st).await?;
    tracing::info!(
        election_id,
        voters,
        elapsed_ms = started.elapsed().as_millis() as u64,
        "imported a roll"
    );
    let rows = Arc::new(parsed.rows);
    let source = Arc::new(source);
    let chunks = (0..voters.div_ceil(CREDENTIAL_ROWS_PER_CHUNK)).map(move |c| {
        let mut out = Vec::with_capacity(CREDENTIAL_ROWS_PER_CHUNK * 32 + 32);
        if c == 0 {
            out.extend_from_slice(b"voter_id,credential\n");
        }
        let from = c * CREDENTIAL_ROWS_PER_CHUNK;
        for i in from..(from + CREDENTIAL_ROWS_PER_CHUNK).min(rows.len()) {
            csv_field(&mut out, rows.voter_ref(i));
            out.push(b',');
            out.extend_from_slice(credential::printed(&source.credential(i as u64)).as_bytes());
            out.push(b'\n');
        }
        Ok::<_, std::convert::Infallible>(Bytes::from(out))
    });
    Ok(csv_answer(
        Body::from_stream(futures::stream::iter(chunks)),
        &format!("election-{election_id}-credentials.csv"),
    ))
}

// ---------------------------------------------------------------- login

/// A voter's login.
#[derive(Deserialize, ToSchema, Debug)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct LoginRequest {
    /// The voter's id as on the roll.
    pub voter_id: String,
    /// As handed out (dashes, spaces and case do not matter).
    pub credential: String,
}

/// A voter signed in: the token the vote needs, and its ballot.
#[derive(Serialize, Deserialize, ToSchema, Debug)]
#[serde(rename_all = "camelCase")]
pub struct VoterSession {
    /// A voter token (Authorization: Bearer) for this election's vote.
    pub token: String,
    /// The voter's number on the roll: the vote's `voter-id` header.
    pub voter_number: i64,
    pub election_id: i64,
    /// The vote's `election-district-id` header.
    pub district_id: i64,
    pub district_name: String,
    /// RFC 3339: when the token expires.
    pub expires_at: String,
}

fn invalid_credentials() -> ApiError {
    ApiError::unauthorized(
        "invalid_credentials",
        "this voter id and credential do not match the election's roll; check both as handed out",
    )
}

fn too_many_attempts(retry_after_s: u64, whose: &str) -> ApiError {
    ApiError {
        retry_after_s: Some(retry_after_s),
        ..ApiError::new(
            StatusCode::TOO_MANY_REQUESTS,
            "too_many_attempts",
            format!("too many login attempts {whose} in a minute; try again in {retry_after_s} s"),
        )
    }
}

/// Signs a voter in with the voter id and credential of the roll
///
/// Public. Signs a voter in with the voter id and credential from the roll; the
/// answer's token casts the vote. A wrong id and a wrong credential answer
/// alike; attempts are limited per voter id and per client.
#[utoipa::path(post, path = "/api/voting/elections/{election_id}/login", tag = "voting",
    params(("election_id" = i64, Path)),
    request_body(content = LoginRequest, example = json!({"voterId": "A-0001", "credential": "7KQX-M2PD-RTW9H"})),
    responses((status = 200, body = VoterSession, description = "Cache-Control: no-store",
               example = json!({"token": "eyJ0eXAiOiJKV1QiLCJhbGciOiJIUzI1NiJ9...", "voterNumber": 1, "electionId": 2,
                   "districtId": 1, "districtName": "North", "expiresAt": "2030-05-05T08:00:00.000Z"})),
              (status = 401, description = "invalid_credentials: an unknown voter id and a wrong credential answer alike"),
              (status = 404, description = "election_not_found"),
              (status = 409, description = "election_closed: no more votes"),
              (status = 422, description = "invalid_field"),
              (status = 429, description = "too_many_attempts: 5 a minute per voter id, 60 per client address; Retry-After")))]
pub async fn login(
    State(st): State<Arc<VotingState>>,
    ApiPath(election_id): ApiPath<i64>,
    peer: Option<Extension<ConnectInfo<SocketAddr>>>,
    headers: HeaderMap,
    ApiJson(req): ApiJson<LoginRequest>,
) -> ApiResult<Response> {
    let e = entry(&st, election_id)?;
    if req.voter_id.len() > VOTER_ID_BYTES_MAX || req.credential.len() > 64 {
        return Err(invalid_credentials());
    }
    let now = now_ms();
    if let Some(Extension(ConnectInfo(peer))) = peer {
        let client = format!("{:?}", st.live.client(peer, &headers));
        st.client_logins
            .attempt(&client, now)
            .map_err(|s| too_many_attempts(s, "from this address"))?;
    }
    let voter_ref = req.voter_id.trim().to_string();
    st.voter_logins
        .attempt(&format!("{election_id}:{voter_ref}"), now)
        .map_err(|s| too_many_attempts(s, "for this voter id"))?;
    if e.election.state.is_over() {
        return Err(ApiError::conflict(
            "election_closed",
            format!(
                "the election closed at {}",
                rfc3339_ms(e.election.closes_at_ms)
            ),
        ));
    }
    let found = st.storage.credential_of(election_id, voter_ref).await?;
    // An unknown voter costs the same hash as a wrong credential.
    let (number, stored) = found.unwrap_or((0, vec![0u8; CREDENTIAL_HASH_BYTES]));
    let matches = st
        .credentials
        .verify(election_id, number, &req.credential, &stored);
    if !matches || number == 0 {
        return Err(invalid_credentials());
    }
    let Standing::InDistrict(i) = e.roll.standing(number) else {
        // The store's roll is newer than this node's: catch up once.
        refreshed(&st).await?;
        return Err(ApiError::unavailable(
            "the roll is being loaded on this server; retry in a moment",
        ));
    };
    let district = &e.election.districts[i];
    let mut claims = serde_json::Map::new();
    claims.insert("district".into(), district.id.into());
    claims.insert("election".into(), election_id.into());
    let token = st
        .keys
        .issue_with(&number.to_string(), VOTER, VOTER_TOKEN_TTL_S, claims);
    let mut res = Json(VoterSession {
        token,
        voter_number: number,
        election_id,
        district_id: district.id,
        district_name: district.name.clone(),
        expires_at: rfc3339_ms(now + VOTER_TOKEN_TTL_S as i64 * 1000),
    })
    .into_response();
    res.headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    Ok(res)
}

// ---------------------------------------------------------------- audit

/// Turnout per district: voters on the roll and ballots cast (CSV)
///
/// An admin token. Per district, the voters on the roll and the ballots cast,
/// as CSV.
#[utoipa::path(get, path = "/api/voting/elections/{election_id}/audit/turnout.csv", tag = "voting",
    params(("election_id" = i64, Path)), security(("bearer" = [])),
    responses((status = 200, content_type = "text/csv", body = String,
               example = "district,name,voters,ballots\nN,North,5200,3100\n"),
              (status = 403, description = "forbidden"), (status = 404, description = "election_not_found")))]
pub async fn audit_turnout(
    State(st): State<Arc<VotingState>>,
    caller: Caller,
    ApiPath(election_id): ApiPath<i64>,
) -> ApiResult<Response> {
    admin(&caller)?;
    let e = entry(&st, election_id)?;
    let cast = st.storage.ballots_cast(election_id).await?;
    let mut out = b"district,name,voters,ballots\n".to_vec();
    for d in &e.election.districts {
        let ballots: i64 = cast.iter().filter(|c| c.0 == d.id).map(|c| c.1).sum();
        let code = d.code.clone().unwrap_or_else(|| d.id.to_string());
        csv_field(&mut out, code.as_bytes());
        out.push(b',');
        csv_field(&mut out, d.name.as_bytes());
        out.extend_from_slice(format!(",{},{ballots}\n", d.voters).as_bytes());
    }
    Ok(csv_answer(
        Body::from(out),
        &format!("election-{election_id}-turnout.csv"),
    ))
}

/// The ids of the voters who voted, once the election is closed (CSV)
///
/// An admin token, once the election is closed. The ids of the voters who
/// voted, as CSV in the roll's order: never when or how.
#[utoipa::path(get, path = "/api/voting/elections/{election_id}/audit/voters.csv", tag = "voting",
    params(("election_id" = i64, Path)), security(("bearer" = [])),
    responses((status = 200, content_type = "text/csv", body = String,
               description = "voter_id per voter who voted, in the roll's order; ids only, never when or how",
               example = "voter_id\nA-0001\nA-0007\n"),
              (status = 403, description = "forbidden"), (status = 404, description = "election_not_found"),
              (status = 409, description = "election_not_closed: while votes are taken, who voted when would show")))]
pub async fn audit_voters(
    State(st): State<Arc<VotingState>>,
    caller: Caller,
    ApiPath(election_id): ApiPath<i64>,
) -> ApiResult<Response> {
    admin(&caller)?;
    let e = entry(&st, election_id)?;
    if !e.election.state.is_over() {
        return Err(ApiError::conflict(
            "election_not_closed",
            format!(
                "the election is {}: the voters who voted are listed once it is closed",
                e.election.state.as_str()
            ),
        ));
    }
    let ids = e.election.districts.iter().map(|d| d.id).collect();
    let voted = st.storage.voters_who_voted(election_id, ids).await?;
    let mut out = b"voter_id\n".to_vec();
    for v in voted {
        csv_field(&mut out, v.as_bytes());
        out.push(b'\n');
    }
    Ok(csv_answer(
        Body::from(out),
        &format!("election-{election_id}-voters.csv"),
    ))
}

fn results_ready(e: &Election) -> ApiResult<()> {
    match e.state {
        ElectionState::Tallied | ElectionState::Published => Ok(()),
        s => Err(ApiError::conflict(
            "not_tallied",
            format!(
                "the election is {}: its results are exported once it is closed and tallied",
                s.as_str()
            ),
        )),
    }
}

/// Results per district, per party and candidate, once tallied (CSV)
///
/// An admin token, once tallied. Votes per district, party and candidate as
/// CSV; a party's own row has no candidate.
#[utoipa::path(get, path = "/api/voting/elections/{election_id}/audit/results.csv", tag = "voting",
    params(("election_id" = i64, Path)), security(("bearer" = [])),
    responses((status = 200, content_type = "text/csv", body = String,
               description = "district,party,candidate,votes; a party's own row has no candidate",
               example = "district,party,candidate,votes\nN,GF,,1200\nN,GF,Ana Horvat,800\n"),
              (status = 403, description = "forbidden"), (status = 404, description = "election_not_found"),
              (status = 409, description = "not_tallied")))]
pub async fn audit_results_csv(
    State(st): State<Arc<VotingState>>,
    caller: Caller,
    ApiPath(election_id): ApiPath<i64>,
) -> ApiResult<Response> {
    admin(&caller)?;
    let e = entry(&st, election_id)?;
    results_ready(&e.election)?;
    let snapshot = st.tally.snapshot();
    let mut out = b"district,party,candidate,votes\n".to_vec();
    for d in &e.election.districts {
        let r = render_results_out(&e.election, Some(d), &snapshot, true);
        let code = d.code.clone().unwrap_or_else(|| d.id.to_string());
        for p in &r.parties {
            let party = e
                .election
                .party(p.party_id)
                .and_then(|x| x.code.clone())
                .unwrap_or_else(|| p.party_id.to_string());
            for (candidate, votes) in std::iter::once((String::new(), p.votes)).chain(
                p.candidates
                    .iter()
                    .flatten()
                    .map(|c| (c.name.clone(), c.votes)),
            ) {
                csv_field(&mut out, code.as_bytes());
                out.push(b',');
                csv_field(&mut out, party.as_bytes());
                out.push(b',');
                csv_field(&mut out, candidate.as_bytes());
                out.extend_from_slice(format!(",{votes}\n").as_bytes());
            }
        }
    }
    Ok(csv_answer(
        Body::from(out),
        &format!("election-{election_id}-results.csv"),
    ))
}

/// Results of every district, once tallied
#[derive(Serialize, Deserialize, ToSchema, Debug)]
#[serde(rename_all = "camelCase")]
pub struct AuditResults {
    pub election_id: i64,
    pub state: ElectionState,
    pub districts: Vec<super::http::Results>,
}

/// Results per district, per party and candidate, once tallied (JSON)
///
/// An admin token, once tallied. Votes per district, party and candidate as
/// JSON.
#[utoipa::path(get, path = "/api/voting/elections/{election_id}/audit/results.json", tag = "voting",
    params(("election_id" = i64, Path)), security(("bearer" = [])),
    responses((status = 200, body = AuditResults,
               example = json!({"electionId": 2, "state": "tallied", "districts": []})),
              (status = 403, description = "forbidden"), (status = 404, description = "election_not_found"),
              (status = 409, description = "not_tallied")))]
pub async fn audit_results_json(
    State(st): State<Arc<VotingState>>,
    caller: Caller,
    ApiPath(election_id): ApiPath<i64>,
) -> ApiResult<Json<AuditResults>> {
    admin(&caller)?;
    let e = entry(&st, election_id)?;
    results_ready(&e.election)?;
    let snapshot = st.tally.snapshot();
    Ok(Json(AuditResults {
        election_id,
        state: e.election.state,
        districts: e
            .election
            .districts
            .iter()
            .map(|d| render_results_out(&e.election, Some(d), &snapshot, true))
            .collect(),
    }))
}

/// One action on an election.
#[derive(Serialize, Deserialize, ToSchema, Debug)]
#[serde(rename_all = "camelCase")]
pub struct AuditEntry {
    /// Its event's position in the log.
    pub position: i64,
    /// e.g. voting.ElectionOpened.
    pub event_type: String,
    /// RFC 3339.
    pub at: String,
    /// Who: the admin token's `sub`, or `mixer` / `clock` for the steps
    /// the service takes itself.
    pub actor: String,
    /// The event's data.
    pub data: serde_json::Value,
}

/// The log of an election's administrative actions.
#[derive(Serialize, Deserialize, ToSchema, Debug)]
pub struct AuditLog {
    pub entries: Vec<AuditEntry>,
}

/// The log of an election's administrative actions, oldest first
///
/// An admin token. Every administrative action on the election (created,
/// opened, closed, ...) with who and when, oldest first.
#[utoipa::path(get, path = "/api/voting/elections/{election_id}/audit/log", tag = "voting",
    params(("election_id" = i64, Path)), security(("bearer" = [])),
    responses((status = 200, body = AuditLog,
               example = json!({"entries": [{"position": 12, "eventType": "voting.ElectionOpened",
                   "at": "2030-05-05T05:00:00.000Z", "actor": "registrar", "data": {"actor": "registrar"}}]})),
              (status = 403, description = "forbidden"), (status = 404, description = "election_not_found")))]
pub async fn audit_log(
    State(st): State<Arc<VotingState>>,
    caller: Caller,
    ApiPath(election_id): ApiPath<i64>,
) -> ApiResult<Json<AuditLog>> {
    admin(&caller)?;
    entry(&st, election_id)?;
    let events = st
        .store
        .read_stream(
            &super::model::election_stream(election_id),
            0,
            true,
            AUDIT_LOG_EVENTS_MAX,
        )
        .await?;
    let entries = events
        .into_iter()
        .map(|ev| {
            let data: serde_json::Value =
                serde_json::from_slice(&ev.payload).unwrap_or(serde_json::Value::Null);
            AuditEntry {
                position: ev.position,
                event_type: ev.event_type,
                at: rfc3339_ms(ev.created_at_ms),
                actor: data["actor"].as_str().unwrap_or("").to_string(),
                data,
            }
        })
        .collect();
    Ok(Json(AuditLog { entries }))
}

/// Gives a draft election the public key its ballots are sealed to
///
/// An admin token. Gives a draft election the trustees' public key; ballots are
/// sealed to it in the voter's browser, and only the trustees' opening reads
/// them.
#[utoipa::path(put, path = "/api/voting/elections/{election_id}/key", tag = "voting",
    params(("election_id" = i64, Path)), security(("bearer" = [])),
    request_body(content = KeyFile, description = "The public key file `throng voting keygen` wrote (public.json); the private key stays split among the trustees",
                 example = json!({"format": "throng-election-key/1", "suite": "DHKEM(X25519, HKDF-SHA256), HKDF-SHA256, AES-128-GCM",
                                  "publicKey": "q4Lw4d9fJb1Yk2c1oVdC3n9Qm8e7s6t5r4u3w2x1y0A", "threshold": 3, "trustees": 5})),
    responses((status = 200, body = ElectionStatus, example = json!(serde_json::from_str::<serde_json::Value>(STATUS_EXAMPLE).unwrap())),
              (status = 403, description = "forbidden"), (status = 404, description = "election_not_found"),
              (status = 409, description = "invalid_transition (only a draft's key can be given)"),
              (status = 422, description = "invalid_key (not a key file of this suite)")))]
pub async fn set_key(
    State(st): State<Arc<VotingState>>,
    caller: Caller,
    ApiPath(election_id): ApiPath<i64>,
    ApiJson(file): ApiJson<KeyFile>,
) -> ApiResult<Json<ElectionStatus>> {
    let actor = admin(&caller)?;
    entry(&st, election_id)?;
    let invalid = |m: &str| {
        ApiError::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            "invalid_key",
            m.to_string(),
        )
    };
    if file.format != super::trustee::KEY_FORMAT || file.suite != super::ballot::SUITE {
        return Err(invalid(&format!(
            "format: {}, suite: {}, as `throng voting keygen` writes them",
            super::trustee::KEY_FORMAT,
            super::ballot::SUITE
        )));
    }
    let key = super::ballot::from_b64(&file.public_key)
        .filter(|k| super::ballot::valid_public_key(k))
        .ok_or_else(|| invalid("publicKey: 32 bytes of an X25519 public key, base64url"))?;
    if file.threshold < 1 || file.threshold > file.trustees {
        return Err(invalid("threshold: 1 to trustees"));
    }
    let set = st
        .storage
        .set_public_key(
            election_id,
            key,
            file.threshold as i64,
            file.trustees as i64,
            actor,
        )
        .await?;
    if !set {
        return Err(ApiError::conflict(
            "invalid_transition",
            "only a draft's key can be given: ballots already sealed would not open with another",
        ));
    }
    refreshed(&st).await?;
    Ok(Json(status_of(&entry(&st, election_id)?.election)))
}

/// Exports the closed election's ballot box for the trustees' opening
///
/// An admin token, once the election is closed and its last board period has
/// run. The sealed ballots by district, for the trustees' opening; its digest
/// is the public board's.
#[utoipa::path(get, path = "/api/voting/elections/{election_id}/box", tag = "voting",
    params(("election_id" = i64, Path)), security(("bearer" = [])),
    responses((status = 200, body = BoxFile, description = "Sealed ballots only, by district, period and tracker; its digest is the public board's",
               example = json!({"format": "throng-ballot-box/1", "electionId": 2, "electionName": "Town council 2030",
                   "publicKey": "q4Lw4d9fJb1Yk2c1oVdC3n9Qm8e7s6t5r4u3w2x1y0A", "candidatesPerVoteMax": 3, "ballotsMin": 100,
                   "districts": [{"id": 1, "code": "N", "name": "North", "region": "Coast",
                                  "lists": [{"partyId": 1, "candidateIds": [1, 2, 3]}],
                                  "ballots": [{"period": 1, "sealed": "u2yX3cQeS1o0m8mJ7aYdO2Zr4b0mQd3tW9x1cJp5a0E"}],
                                  "digest": "1a2b3c4d5e6f708192a3b4c5d6e7f8091a2b3c4d5e6f708192a3b4c5d6e7f809"}],
                   "digest": "9f2c0e5d1a7b4c3e8f6d2a1b0c9e8d7f6a5b4c3d2e1f0a9b8c7d6e5f4a3b2c1d"})),
              (status = 403, description = "forbidden"), (status = 404, description = "election_not_found"),
              (status = 409, description = "box_not_complete (the election is not closed, or its last board period has not run yet: retry after a period)")))]
pub async fn export_box(
    State(st): State<Arc<VotingState>>,
    caller: Caller,
    ApiPath(election_id): ApiPath<i64>,
) -> ApiResult<Response> {
    let actor = admin(&caller)?;
    refreshed(&st).await?;
    let e = entry(&st, election_id)?;
    let el = &e.election;
    if !el.state.is_over() || !el.board_final {
        return Err(ApiError::conflict(
            "box_not_complete",
            format!(
                "the box is complete once the election is closed and the board's last period \
                 ran (within {} s of the close); retry then",
                st.board_period_ms.div_ceil(1000)
            ),
        ));
    }
    let rows = st.storage.box_rows(election_id).await?;
    let file = box_file(&st, el, &rows);
    tracing::info!(election_id, actor = %actor, ballots = rows.ballots.len(), "exported the ballot box");
    Ok((
        [(axum::http::header::CONTENT_TYPE, "application/json")],
        serde_json::to_string(&file).map_err(|_| ApiError::internal())?,
    )
        .into_response())
}

/// The box file of a complete board.
fn box_file(st: &VotingState, e: &super::model::Election, rows: &super::store::BoxRows) -> BoxFile {
    use super::ballot;
    use super::opening::{BoxBallot, BoxDistrict, BoxList, BOX_FORMAT};
    let mut districts: Vec<BoxDistrict> = e
        .districts
        .iter()
        .map(|d| BoxDistrict {
            id: d.id,
            code: d.code.clone(),
            name: d.name.clone(),
            region: d.region.clone(),
            lists: d
                .lists
                .iter()
                .map(|l| BoxList {
                    party_id: l.party_id,
                    candidate_ids: l.candidates.iter().map(|c| c.id).collect(),
                })
                .collect(),
            ballots: Vec::new(),
            digest: String::new(),
        })
        .collect();
    let mut digests: Vec<(i64, ballot::Digest32)> = Vec::new();
    for d in &mut districts {
        let mut digest = ballot::board_digest_start(e.id, d.id);
        let mine = rows.ballots.iter().filter(|b| b.0 == d.id);
        let mut period_trackers: Vec<ballot::Tracker> = Vec::new();
        let mut period = None;
        for (_, p, sealed, tracker) in mine {
            if period != Some(*p) {
                if let Some(prev) = period {
                    digest = ballot::board_digest_extend(&digest, prev, &period_trackers);
                }
                period_trackers.clear();
                period = Some(*p);
            }
            period_trackers.push(*tracker);
            d.ballots.push(BoxBallot {
                period: *p,
                sealed: ballot::b64(sealed),
            });
        }
        if let Some(prev) = period {
            digest = ballot::board_digest_extend(&digest, prev, &period_trackers);
        }
        d.digest = hex::encode(digest);
        digests.push((d.id, digest));
    }
    BoxFile {
        format: BOX_FORMAT.into(),
        election_id: e.id,
        election_name: e.name.clone(),
        public_key: e.public_key.as_deref().map(ballot::b64).unwrap_or_default(),
        candidates_per_vote_max: e.candidates_per_vote_max,
        ballots_min: st.mix_ballots_min,
        districts,
        digest: hex::encode(ballot::box_digest(e.id, &digests)),
    }
}

/// Imports the trustees' opened results; the election becomes tallied
///
/// An admin token. Imports the results the trustees opened from the exported
/// box; they must match the box, and the election becomes tallied.
#[utoipa::path(put, path = "/api/voting/elections/{election_id}/results", tag = "voting",
    params(("election_id" = i64, Path)), security(("bearer" = [])),
    request_body(content = ResultsFile, description = "The results file `throng voting open` wrote from this election's box",
                 example = json!({"format": "throng-results/1", "electionId": 2,
                     "boxDigest": "9f2c0e5d1a7b4c3e8f6d2a1b0c9e8d7f6a5b4c3d2e1f0a9b8c7d6e5f4a3b2c1d", "ballotsMin": 100,
                     "units": [{"kind": "district", "name": "N", "districtIds": [1], "ballots": 1, "spoiled": 0,
                                "parties": [{"partyId": 1, "votes": 1, "candidates": [{"candidateId": 1, "votes": 1}]}],
                                "opened": [{"partyId": 1, "candidateIds": [1]}]}]})),
    responses((status = 200, body = ElectionStatus, example = json!(serde_json::from_str::<serde_json::Value>(STATUS_EXAMPLE).unwrap())),
              (status = 403, description = "forbidden"), (status = 404, description = "election_not_found"),
              (status = 409, description = "invalid_transition (not closed, or results already imported), box_not_complete"),
              (status = 422, description = "results_mismatch (another box, a district missing or twice, counts that do not add up)")))]
pub async fn import_results(
    State(st): State<Arc<VotingState>>,
    caller: Caller,
    ApiPath(election_id): ApiPath<i64>,
    ApiJson(results): ApiJson<ResultsFile>,
) -> ApiResult<Json<ElectionStatus>> {
    let actor = admin(&caller)?;
    refreshed(&st).await?;
    let e = entry(&st, election_id)?;
    let el = &e.election;
    if el.state != ElectionState::Closed || !el.board_final {
        return Err(ApiError::conflict(
            "invalid_transition",
            "results are imported once the election is closed and its box complete, once",
        ));
    }
    let rows = st.storage.box_rows(election_id).await?;
    let file = box_file(&st, el, &rows);
    let mismatch =
        |m: String| ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, "results_mismatch", m);
    if results.format != super::opening::RESULTS_FORMAT || results.election_id != election_id {
        return Err(mismatch(format!(
            "format: {}, electionId: {election_id}",
            super::opening::RESULTS_FORMAT
        )));
    }
    if results.box_digest != file.digest {
        return Err(mismatch(format!(
            "boxDigest: these results opened another box ({}) than this election's ({})",
            results.box_digest, file.digest
        )));
    }
    // Every district in one unit, and each unit's ballots those of its
    // districts' boxes; counts that add up to the opened ballots.
    let mut seen = std::collections::HashSet::new();
    for (i, u) in results.units.iter().enumerate() {
        let mut boxed = 0i64;
        for d in &u.district_ids {
            if !seen.insert(*d) {
                return Err(mismatch(format!(
                    "units[{i}]: district {d} is in two units"
                )));
            }
            boxed += file
                .districts
                .iter()
                .find(|x| x.id == *d)
                .map(|x| x.ballots.len() as i64)
                .ok_or_else(|| mismatch(format!("units[{i}]: no district {d} in this election")))?;
        }
        if boxed != u.ballots || u.opened.len() as i64 != u.ballots {
            return Err(mismatch(format!(
                "units[{i}]: {} ballots, {} opened, but its districts' boxes hold {boxed}",
                u.ballots,
                u.opened.len()
            )));
        }
        let spoiled = u.opened.iter().filter(|b| b.spoiled.is_some()).count() as i64;
        let votes: i64 = u.parties.iter().map(|p| p.votes).sum();
        if spoiled != u.spoiled || votes != u.ballots - spoiled {
            return Err(mismatch(format!(
                "units[{i}]: its counts do not add up to its opened ballots (run `throng voting recount`)"
            )));
        }
    }
    if seen.len() != file.districts.len() {
        return Err(mismatch(format!(
            "the units name {} of the election's {} districts",
            seen.len(),
            file.districts.len()
        )));
    }
    let document = serde_json::to_string(&results).map_err(|_| ApiError::internal())?;
    let stored = st
        .storage
        .import_results(election_id, results.box_digest.clone(), document, actor)
        .await?;
    if !stored {
        return Err(ApiError::conflict(
            "invalid_transition",
            "the election is no longer closed (results already imported?)",
        ));
    }
    st.tally.touch();
    refreshed(&st).await?;
    Ok(Json(status_of(&entry(&st, election_id)?.election)))
}
