//! The write-up's last design of try-register, run beside ours by `throng
//! bench booking`: the slots live in Redis, and a registration is one
//! `HSETNX` of the slot's time in its place and day's hash (`booking:{place
//! id}:{day}`), the value a new registration id. `HSETNX` sets the field
//! only if it is absent, so the first registration of a slot is 201 and
//! every later one 409. The body is throng's (`RegistrationRequest`, parsed
//! by the same types) and the place, day and time slot are checked by the
//! same rules; the person is not checked, sealed or stored, and there is no
//! place or slot table: a slot that was never opened is registered like any
//! other, as Redis knows only the fields it was given.
//!
//! Two Redis servers, one route each:
//!
//! - `/api/booking/baseline/redis/registrations` (`--booking-redis-url`):
//!   the write-up's, not durable (a Redis run with `--save ""
//!   --appendonly no` answers before anything reaches the disk);
//! - `/api/booking/baseline/redis-durable/registrations`
//!   (`--booking-redis-durable-url`): the same handler on a Redis with
//!   `--appendonly yes --appendfsync always`, which writes and fsyncs its
//!   append-only file before it answers (the commands of one pass of its
//!   event loop share the fsync), so a 201 is on disk as ours is.
//!
//! For the bench only: a service of its own ([`RedisBooking`]) that `throng
//! bench booking`'s child servers plug in (`Experiment::comparison_services`),
//! with flags only `throng bench-server` has; `throng serve` never mounts
//! it, and it is not in the OpenAPI document. A route whose Redis was not
//! given answers 503 `redis_not_configured`.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use axum::extract::{FromRef, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::{Json, Router};
use redis::aio::{ConnectionManager, ConnectionManagerConfig};

use crate::platform::error::{ApiError, ApiResult};
use crate::platform::extract::ApiJson;
use crate::platform::service::{AppState, OpenApiRouter, Platform, Service, ServiceState, Started};
use crate::services::booking::model::{RegistrationRequest, SlotRef};

/// The Redis design as a service of the bench's child servers.
pub struct RedisBooking;

#[derive(clap::Args, Debug, Clone, Default)]
pub struct RedisArgs {
    /// The Redis the write-up's design decides in, not durable (e.g.
    /// redis://127.0.0.1:6379/15); its keys are `booking:{place}:{day}`.
    #[arg(long)]
    pub booking_redis_url: Option<String>,
    /// The same design on a Redis with `--appendonly yes --appendfsync
    /// always` (durable); `throng bench booking` starts one of its own.
    #[arg(long)]
    pub booking_redis_durable_url: Option<String>,
}

impl Service for RedisBooking {
    const NAME: &'static str = "booking-redis";
    type Args = RedisArgs;
    type SeedArgs = crate::platform::service::NoArgs;
    type State = RedisDesigns;

    async fn start(
        &self,
        _platform: &Platform,
        args: RedisArgs,
    ) -> anyhow::Result<Started<RedisDesigns>> {
        let open = |url: Option<String>| async move {
            match url {
                Some(url) => Pool::open(&url).await.map(Some),
                None => Ok(None),
            }
        };
        Ok(Started::new(Arc::new(RedisDesigns {
            volatile: open(args.booking_redis_url).await?,
            durable: open(args.booking_redis_durable_url).await?,
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
    Arc<RedisDesigns>: FromRef<S>,
{
    Router::new()
        .route(
            "/api/booking/baseline/redis/registrations",
            post(register_volatile),
        )
        .route(
            "/api/booking/baseline/redis-durable/registrations",
            post(register_durable),
        )
}

/// The two Redis servers' connections, each absent when its flag was not
/// given.
pub struct RedisDesigns {
    volatile: Option<Pool>,
    durable: Option<Pool>,
}

impl ServiceState for RedisDesigns {}

/// Multiplexed connections, one per core: each pipelines the commands of
/// every request that uses it (Redis answers them in order), so a handful
/// carries hundreds of requests in flight, and one per core lets each
/// connection's reader and writer run on its own worker thread.
struct Pool {
    connections: Vec<ConnectionManager>,
    next: AtomicUsize,
}

/// How long a command may wait for its answer before the request is 503.
/// Generous: an `appendfsync always` Redis waits for the disk.
const RESPONSE_TIMEOUT: Duration = Duration::from_secs(5);
/// Commands queued per connection before callers wait (the crate's
/// default, 50, is below the bench's crowd of 256).
const PIPELINE_BUFFER: usize = 1024;

impl Pool {
    async fn open(url: &str) -> anyhow::Result<Pool> {
        let client = redis::Client::open(url)
            .map_err(|e| anyhow::anyhow!("--booking-redis-*url {url}: {e}"))?;
        let config = ConnectionManagerConfig::new()
            .set_response_timeout(Some(RESPONSE_TIMEOUT))
            .set_connection_timeout(Some(Duration::from_secs(2)))
            .set_pipeline_buffer_size(PIPELINE_BUFFER);
        let n = std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(1);
        let mut connections = Vec::with_capacity(n);
        for _ in 0..n {
            connections.push(
                client
                    .get_connection_manager_with_config(config.clone())
                    .await
                    .map_err(|e| anyhow::anyhow!("cannot connect to Redis at {url}: {e}"))?,
            );
        }
        Ok(Pool {
            connections,
            next: AtomicUsize::new(0),
        })
    }

    fn connection(&self) -> ConnectionManager {
        let i = self.next.fetch_add(1, Ordering::Relaxed) % self.connections.len();
        // A clone shares the connection (a handle to its queue).
        self.connections[i].clone()
    }
}

/// The hash of a place and day; the field is the time slot.
pub fn slot_key(slot: &SlotRef) -> (String, i32) {
    (
        format!("booking:{}:{}", slot.place_id, slot.day.to_text()),
        slot.time_slot,
    )
}

async fn register_volatile(
    State(st): State<Arc<RedisDesigns>>,
    ApiJson(req): ApiJson<RegistrationRequest>,
) -> ApiResult<Response> {
    register(st.volatile.as_ref(), "--booking-redis-url", &req).await
}

async fn register_durable(
    State(st): State<Arc<RedisDesigns>>,
    ApiJson(req): ApiJson<RegistrationRequest>,
) -> ApiResult<Response> {
    register(st.durable.as_ref(), "--booking-redis-durable-url", &req).await
}

async fn register(
    pool: Option<&Pool>,
    flag: &str,
    req: &RegistrationRequest,
) -> ApiResult<Response> {
    let slot = req.slot()?;
    let Some(pool) = pool else {
        return Err(ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "redis_not_configured",
            format!("this server was started without {flag}"),
        ));
    };
    let id = format!("redis-{}", uuid::Uuid::new_v4().simple());
    let (key, field) = slot_key(&slot);
    let set: bool = redis::cmd("HSETNX")
        .arg(&key)
        .arg(field)
        .arg(&id)
        .query_async(&mut pool.connection())
        .await
        .map_err(redis_error)?;
    if set {
        Ok((StatusCode::CREATED, Json(serde_json::json!({ "id": id }))).into_response())
    } else {
        Err(ApiError::conflict("slot_taken", "the slot is taken"))
    }
}

fn redis_error(e: redis::RedisError) -> ApiError {
    if e.is_io_error() || e.is_timeout() || e.is_connection_dropped() {
        tracing::warn!(error = %e, "redis unavailable");
        ApiError::unavailable("Redis is unavailable; retry shortly")
    } else {
        tracing::error!(error = %e, "redis error");
        ApiError::internal()
    }
}
