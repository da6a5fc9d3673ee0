//! The write-up's way of storing an answer, run beside ours by `throng
//! bench invites`: each answer its own transaction on its own connection
//! (the write-up measured 1,300 single-row inserts/s, one connection,
//! sequentially). For the bench only: mounted by `serve
//! --invites-baseline-routes` (404 `route_not_found` without it), not part
//! of the API (not in the OpenAPI document).
//!
//! `POST /api/invites/baseline/sites/{siteId}/answers` checks exactly what
//! the real endpoint checks (`http::check_answer`) and applies the same
//! rules with the same SQL (`store::sqlite_answer` / `store::pg_answer`), but
//! commits alone: on SQLite through one connection of its own behind a
//! mutex (`BEGIN IMMEDIATE`, the answer, `COMMIT` with its own fsync), on
//! PostgreSQL in its own transaction on a pooled connection. What it shows
//! is what group commit buys.

use std::sync::{Arc, Mutex};

use axum::extract::{FromRef, State};
use axum::response::Response;
use axum::routing::post;
use axum::Router;

use super::http::{answer_response, check_answer};
use super::store::{pg_answer, sqlite_answer};
use super::InvitesState;
use crate::platform::error::{ApiError, ApiResult};
use crate::platform::extract::ApiPath;
use crate::store::{Store, StoreError};

pub fn router<S>() -> Router<S>
where
    S: Clone + Send + Sync + 'static,
    Arc<InvitesState>: FromRef<S>,
{
    Router::new().route(
        "/api/invites/baseline/sites/{site_id}/answers",
        post(baseline_answer),
    )
}

/// The baseline's own SQLite connection (opened on first use).
#[derive(Default)]
pub struct OwnConnection(Mutex<Option<rusqlite::Connection>>);

async fn baseline_answer(
    State(st): State<Arc<InvitesState>>,
    ApiPath(site_id): ApiPath<i64>,
    request: axum::extract::Request,
) -> ApiResult<Response> {
    if !st.baseline_routes {
        return Err(ApiError::not_found(
            "route_not_found",
            "the baseline routes answer only with serve --invites-baseline-routes",
        ));
    }
    let checked = check_answer(&st, site_id, request).await?;
    let cmd = checked.cmd;
    // Written outside the writer: this visitor's checks read the table.
    if let Some(index) = st.index() {
        index.ask_table(cmd.visitor_id);
    }
    let outcome = match &st.store {
        Store::Sqlite(s) => {
            let (path, st2) = (s.path().to_path_buf(), st.clone());
            tokio::task::spawn_blocking(move || {
                let mut guard = st2.baseline_conn.0.lock().unwrap();
                if guard.is_none() {
                    let c = crate::store::sqlite::open_connection(&path, 4 * 1024, false)
                        .map_err(|e| StoreError::Unavailable(e.to_string()))?;
                    *guard = Some(c);
                }
                let c = guard.as_mut().expect("opened above");
                let tx = c.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
                let outcome = sqlite_answer(&tx, &cmd)?;
                tx.commit()?;
                Ok::<_, StoreError>(outcome)
            })
            .await
            .map_err(|e| StoreError::Internal(format!("baseline answer task: {e}")))??
        }
        Store::Postgres(p) => {
            let mut client = p.client().await?;
            let tx = client.transaction().await.map_err(StoreError::from)?;
            let outcome = pg_answer(&tx, &cmd).await?;
            tx.commit().await.map_err(StoreError::from)?;
            outcome
        }
    };
    answer_response(&checked, outcome)
}
