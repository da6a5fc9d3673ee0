//! The naive design of try-register, run beside ours by `throng bench
//! booking`: one conditional `UPDATE` of the slot per request, in autocommit
//! (its own commit and fsync), no registration row, no event, no sealing of
//! personal data, no one-registration-per-person rule. On PostgreSQL from a
//! pool of its own of [`NAIVE_PG_CONNECTIONS`] connections; on SQLite through
//! one connection of its own behind a mutex (SQLite has one writer). It is
//! what a user who wrote the endpoint in an afternoon would run, and what
//! ours must beat while doing everything the naive one leaves out. Its
//! statement is the conditional write that decides a slot where writers
//! are shared (`store/slot_rows.rs`); its connections are the store's
//! autocommit ones (`Store::autocommit`).
//!
//! For the bench only: a service of its own ([`NaiveBooking`]) that `throng
//! bench`'s child servers plug in (`Experiment::comparison_services`);
//! `throng serve` never mounts it, and it is not in the OpenAPI document.

use std::sync::Arc;

use axum::extract::{FromRef, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::{Json, Router};
use serde::Deserialize;

use crate::platform::error::{ApiError, ApiResult};
use crate::platform::extract::ApiJson;
use crate::platform::service::{
    AppState, NoArgs, OpenApiRouter, Platform, Service, ServiceState, Started,
};
use crate::services::booking::model::{Day, SlotRef};
use crate::services::booking::store::slot_rows::TAKE_SLOT;
use crate::store::Autocommit;

/// The naive design's PostgreSQL pool (the figure it was measured with).
pub const NAIVE_PG_CONNECTIONS: usize = 32;

/// The naive design as a service of the bench's child servers.
pub struct NaiveBooking;

impl Service for NaiveBooking {
    const NAME: &'static str = "booking-naive";
    type Args = NoArgs;
    type SeedArgs = NoArgs;
    type State = Naive;

    async fn start(&self, platform: &Platform, _args: NoArgs) -> anyhow::Result<Started<Naive>> {
        Ok(Started::new(Arc::new(Naive {
            connections: platform.store.autocommit(NAIVE_PG_CONNECTIONS),
        })))
    }

    /// Left out of the API document: the bench's routes are not the API.
    fn routes(&self) -> OpenApiRouter<AppState> {
        router().into()
    }
}

pub fn router<S>() -> Router<S>
where
    S: Clone + Send + Sync + 'static,
    Arc<Naive>: FromRef<S>,
{
    Router::new().route("/api/booking/baseline/registrations", post(naive_register))
}

/// What the naive endpoint keeps between requests: its connections, opened
/// on first use.
pub struct Naive {
    connections: Autocommit,
}

impl ServiceState for Naive {}

/// The same body as the real endpoint; only the slot is read.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct NaiveRequest {
    place_id: i64,
    day: String,
    time_slot: i32,
}

async fn naive_register(
    State(st): State<Arc<Naive>>,
    ApiJson(req): ApiJson<NaiveRequest>,
) -> ApiResult<Response> {
    let day = Day::parse("day", &req.day)?;
    let id = format!("naive-{}", uuid::Uuid::new_v4().simple());
    let slot = SlotRef {
        place_id: req.place_id,
        day,
        time_slot: req.time_slot,
    };
    let updated = st
        .connections
        .run(move |c| {
            Box::pin(async move {
                c.execute(&TAKE_SLOT, &[&slot.place_id, &slot.day.0, &slot.time_slot])
                    .await
            })
        })
        .await?;
    if updated == 1 {
        Ok((StatusCode::CREATED, Json(serde_json::json!({ "id": id }))).into_response())
    } else {
        Err(ApiError::conflict(
            "slot_taken",
            "the slot is taken (or does not exist)",
        ))
    }
}
