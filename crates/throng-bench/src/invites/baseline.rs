//! The write-up's way of storing an answer, run beside ours by `throng
//! bench invites`: each answer its own transaction on its own connection
//! (the write-up measured 1,300 single-row inserts/s, one connection,
//! sequentially). For the bench only: a service of its own
//! ([`InvitesBaseline`]) that `throng bench`'s child servers plug in
//! (`Experiment::comparison_services`); `throng serve` never mounts it, and
//! it is not in the OpenAPI document.
//!
//! `POST /api/invites/baseline/sites/{siteId}/answers` checks exactly what
//! the real endpoint checks (`http::check_answer`) and applies the same
//! rules with the same SQL (the store's `Decider`), but commits alone
//! (`Store::write_alone`): on SQLite through one connection of its own
//! behind a mutex (`BEGIN IMMEDIATE`, the answer, `COMMIT` with its own
//! fsync), on PostgreSQL in its own transaction on a pooled connection.
//! What it shows is what group commit buys.

use std::sync::Arc;

use axum::extract::{FromRef, State};
use axum::response::Response;
use axum::routing::post;
use axum::Router;

use crate::platform::error::ApiResult;
use crate::platform::extract::ApiPath;
use crate::platform::service::{
    AppState, NoArgs, OpenApiRouter, Platform, Service, ServiceState, Started,
};
use crate::services::invites::http::{answer_response, check_answer};
use crate::services::invites::InvitesState;

/// The write-up's design as a service of the bench's child servers.
pub struct InvitesBaseline;

impl Service for InvitesBaseline {
    const NAME: &'static str = "invites-baseline";
    type Args = NoArgs;
    type SeedArgs = NoArgs;
    type State = BaselineState;

    async fn start(
        &self,
        _platform: &Platform,
        _args: NoArgs,
    ) -> anyhow::Result<Started<BaselineState>> {
        Ok(Started::new(Arc::new(BaselineState)))
    }

    /// Left out of the API document: the bench's routes are not the API.
    fn routes(&self) -> OpenApiRouter<AppState> {
        router().into()
    }
}

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

/// The baseline's state: none of its own (it answers through the invites
/// state's store and decider).
pub struct BaselineState;

impl ServiceState for BaselineState {}

async fn baseline_answer(
    State(st): State<Arc<InvitesState>>,
    ApiPath(site_id): ApiPath<i64>,
    request: axum::extract::Request,
) -> ApiResult<Response> {
    let checked = check_answer(&st, site_id, request).await?;
    let cmd = checked.cmd;
    // Written outside the writer: this visitor's checks read the table.
    if let Some(index) = st.storage.index() {
        index.ask_table(cmd.visitor_id);
    }
    let decider = st.storage.decider();
    let outcome = st
        .store
        .write_alone(move |c| Box::pin(async move { decider.decide(c, &cmd).await }))
        .await?;
    answer_response(&checked, outcome)
}
