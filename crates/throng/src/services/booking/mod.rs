//! Booking: appointment slots (places x days x time slots), an atomic
//! try-register, personal data sealed at rest, confirmations sent from the
//! event log by a worker. See `002_7f70e933fb451a1c.txt`.

pub mod http;
pub mod model;
pub mod availability;
pub mod bench;
pub mod notifier;
pub mod page;
pub mod seed;
pub mod store;

use std::sync::Arc;

use tokio::sync::Notify;

use crate::store::Store;

/// The booking service's share of the application state.
pub struct BookingState {
    /// Wakes the confirmation worker when a registration commits.
    pub notify_worker: Arc<Notify>,
    /// The in-memory availability index (SQLite store only; see
    /// `availability.rs` for why PostgreSQL nodes read the database).
    pub availability: Option<Arc<availability::Availability>>,
}

impl BookingState {
    pub async fn new(store: &Store) -> anyhow::Result<BookingState> {
        let availability = match store {
            Store::Sqlite(s) => {
                let started = std::time::Instant::now();
                let index = s.read_blocking(|c| availability::Availability::load(c)).await?;
                tracing::info!(
                    slots = index.slots(),
                    elapsed_ms = started.elapsed().as_millis() as u64,
                    "loaded the booking availability index"
                );
                Some(Arc::new(index))
            }
            Store::Postgres(_) => None,
        };
        Ok(BookingState { notify_worker: Arc::new(Notify::new()), availability })
    }
}
