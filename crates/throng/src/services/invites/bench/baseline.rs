//! The write-up's way of storing an answer, run beside ours by `throng
//! bench invites`: each answer its own transaction on its own connection
//! (the write-up measured 1,300 single-row inserts/s, one connection,
//! sequentially). For the bench only: a service of its own
//! ([`InvitesBaseline`]) that `throng bench`'s child servers plug in
//! (`Experiment::comparison_service`); `throng serve` never mounts it, and
//! it is not in the OpenAPI document.
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

use futures::future::BoxFuture;

use crate::platform::error::ApiResult;
use crate::platform::extract::ApiPath;
use crate::platform::service::{AppState, Platform, Service, ServiceState, Started};
use crate::services::invites::http::{answer_response, check_answer};
use crate::services::invites::store::{pg_answer, sqlite_answer};
use crate::services::invites::InvitesState;
use crate::store::{Store, StoreError};

/// The write-up's design as a service of the bench's child servers.
pub struct InvitesBaseline;

impl Service for InvitesBaseline {
    fn name(&self) -> &'static str {
        "invites-baseline"
    }

    fn start<'a>(
        &'a self,
        _platform: &'a Platform,
        _args: &'a clap::ArgMatches,
    ) -> BoxFuture<'a, anyhow::Result<Started>> {
        Box::pin(async { Ok(Started::new(Arc::new(OwnConnection::default()))) })
    }

    fn router(&self) -> Router<AppState> {
        router()
    }

    fn openapi(&self) -> utoipa::openapi::OpenApi {
        utoipa::openapi::OpenApi::default()
    }
}

pub fn router<S>() -> Router<S>
where
    S: Clone + Send + Sync + 'static,
    Arc<InvitesState>: FromRef<S>,
    Arc<OwnConnection>: FromRef<S>,
{
    Router::new().route(
        "/api/invites/baseline/sites/{site_id}/answers",
        post(baseline_answer),
    )
}

/// The baseline's own SQLite connection (opened on first use).
#[derive(Default)]
pub struct OwnConnection(Mutex<Option<rusqlite::Connection>>);

impl ServiceState for OwnConnection {}

async fn baseline_answer(
    State(st): State<Arc<InvitesState>>,
    State(own): State<Arc<OwnConnection>>,
    ApiPath(site_id): ApiPath<i64>,
    request: axum::extract::Request,
) -> ApiResult<Response> {
    let checked = check_answer(&st, site_id, request).await?;
    let cmd = checked.cmd;
    // Written outside the writer: this visitor's checks read the table.
    if let Some(index) = st.index() {
        index.ask_table(cmd.visitor_id);
    }
    let outcome = match &st.store {
        Store::Sqlite(s) => {
            let path = s.path().to_path_buf();
            tokio::task::spawn_blocking(move || {
                let mut guard = own.0.lock().unwrap();
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
