//! Booking: appointment slots (places x days x time slots), an atomic
//! try-register, personal data sealed at rest, confirmations sent from the
//! event log by a worker. See `002_7f70e933fb451a1c.txt`.

pub mod availability;
pub mod bench;
pub mod http;
pub mod model;
pub mod notifier;
pub mod page;
pub mod seed;
pub mod store;

use std::sync::Arc;

use arc_swap::ArcSwap;
use tokio::sync::Notify;

use crate::store::Store;

/// How often a server looks for a seed made by another process.
const SEED_WATCH_INTERVAL_MS: u64 = 1000;

/// The booking service's share of the application state.
pub struct BookingState {
    /// Wakes the confirmation worker when a registration commits.
    pub notify_worker: Arc<Notify>,
    /// The in-memory availability index (SQLite store only; see
    /// `availability.rs` for why PostgreSQL nodes read the database).
    availability: Option<ArcSwap<availability::Availability>>,
    /// The seed generation the index was loaded at.
    seed_generation: std::sync::Mutex<Option<String>>,
}

impl BookingState {
    pub async fn new(store: &Store) -> anyhow::Result<BookingState> {
        let generation = store.meta_get(seed::SEED_GENERATION_KEY).await?;
        let availability = match store {
            Store::Sqlite(_) => Some(ArcSwap::from_pointee(load_index(store).await?)),
            Store::Postgres(_) => None,
        };
        Ok(BookingState {
            notify_worker: Arc::new(Notify::new()),
            availability,
            seed_generation: std::sync::Mutex::new(generation),
        })
    }

    /// The current index, if this store keeps one.
    pub fn index(&self) -> Option<Arc<availability::Availability>> {
        self.availability.as_ref().map(|a| a.load_full())
    }

    /// Reloads the index when another process seeded the store (the seed
    /// bumps a generation in `meta`); the old index serves meanwhile.
    pub fn spawn_seed_watcher(
        self: &Arc<Self>,
        store: Store,
    ) -> Option<tokio::task::JoinHandle<()>> {
        self.availability.as_ref()?;
        let this = self.clone();
        Some(tokio::spawn(async move {
            loop {
                tokio::time::sleep(std::time::Duration::from_millis(SEED_WATCH_INTERVAL_MS)).await;
                let Ok(now) = store.meta_get(seed::SEED_GENERATION_KEY).await else {
                    continue;
                };
                if now == *this.seed_generation.lock().unwrap() {
                    continue;
                }
                match load_index(&store).await {
                    Ok(index) => {
                        if let Some(a) = &this.availability {
                            a.store(Arc::new(index));
                        }
                        *this.seed_generation.lock().unwrap() = now;
                    }
                    Err(e) => {
                        tracing::warn!(error = %e, "reloading the availability index failed; retrying")
                    }
                }
            }
        }))
    }
}

async fn load_index(store: &Store) -> anyhow::Result<availability::Availability> {
    let Store::Sqlite(s) = store else {
        anyhow::bail!("the availability index is for SQLite stores")
    };
    let started = std::time::Instant::now();
    let index = s.read_blocking(availability::Availability::load).await?;
    tracing::info!(
        slots = index.slots(),
        elapsed_ms = started.elapsed().as_millis() as u64,
        "loaded the booking availability index"
    );
    Ok(index)
}
