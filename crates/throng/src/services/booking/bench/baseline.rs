//! The naive design of try-register, run beside ours by `throng bench
//! booking`: one conditional `UPDATE` of the slot per request, in autocommit
//! (its own commit and fsync), no registration row, no event, no sealing of
//! personal data, no one-registration-per-person rule. On PostgreSQL from a
//! pool of its own of [`NAIVE_PG_CONNECTIONS`] connections; on SQLite through
//! one connection of its own behind a mutex (SQLite has one writer). It is
//! what a user who wrote the endpoint in an afternoon would run, and what
//! ours must beat while doing everything the naive one leaves out.
//!
//! For the bench only: a service of its own ([`NaiveBooking`]) that `throng
//! bench`'s child servers plug in (`Experiment::comparison_service`);
//! `throng serve` never mounts it, and it is not in the OpenAPI document.

use std::sync::{Arc, Mutex};

use axum::extract::{FromRef, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::{Json, Router};
use serde::Deserialize;

use crate::platform::error::{ApiError, ApiResult};
use crate::platform::extract::ApiJson;
use crate::platform::service::{AppState, NoArgs, Platform, Service, ServiceState, Started};
use crate::services::booking::model::Day;
use crate::store::{Store, StoreError};

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
            store: platform.store.clone(),
            sqlite: Mutex::default(),
            pg: Default::default(),
        })))
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
    Arc<Naive>: FromRef<S>,
{
    Router::new().route("/api/booking/baseline/registrations", post(naive_register))
}

/// What the naive endpoint keeps between requests (its connections,
/// opened on first use).
pub struct Naive {
    store: Store,
    sqlite: Mutex<Option<rusqlite::Connection>>,
    pg: tokio::sync::OnceCell<deadpool_postgres::Pool>,
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
    let updated = match &st.store {
        Store::Sqlite(s) => {
            let (path, st2, id) = (s.path().to_path_buf(), st.clone(), id.clone());
            tokio::task::spawn_blocking(move || {
                let mut guard = st2.sqlite.lock().unwrap();
                if guard.is_none() {
                    let c = crate::store::sqlite::open_connection(&path, 4 * 1024, false)
                        .map_err(|e| StoreError::Unavailable(e.to_string()))?;
                    *guard = Some(c);
                }
                let c = guard.as_mut().expect("opened above");
                let updated = c
                    .prepare_cached(
                        "UPDATE booking_slots SET registration_id = ?1
                         WHERE place_id = ?2 AND day = ?3 AND time_slot = ?4
                           AND registration_id IS NULL",
                    )?
                    .execute(rusqlite::params![id, req.place_id, day.0, req.time_slot])?;
                Ok::<_, StoreError>(updated)
            })
            .await
            .map_err(|e| StoreError::Internal(format!("naive register task: {e}")))??
        }
        Store::Postgres(p) => {
            let pool = st
                .pg
                .get_or_try_init(|| async { p.pool_of(NAIVE_PG_CONNECTIONS) })
                .await
                .map_err(|e| StoreError::Unavailable(e.to_string()))?;
            let client = pool.get().await.map_err(StoreError::from)?;
            let stmt = client
                .prepare_cached(
                    "UPDATE booking_slots SET registration_id = $1
                     WHERE place_id = $2 AND day = $3 AND time_slot = $4
                       AND registration_id IS NULL",
                )
                .await
                .map_err(StoreError::from)?;
            client
                .execute(&stmt, &[&id, &req.place_id, &day.0, &req.time_slot])
                .await
                .map_err(StoreError::from)? as usize
        }
    };
    if updated == 1 {
        Ok((StatusCode::CREATED, Json(serde_json::json!({ "id": id }))).into_response())
    } else {
        Err(ApiError::conflict(
            "slot_taken",
            "the slot is taken (or does not exist)",
        ))
    }
}
