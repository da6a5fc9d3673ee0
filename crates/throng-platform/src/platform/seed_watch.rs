//! Reloads a service's in-memory copy of seeded data when another process
//! seeds the store while it serves: the seed bumps a generation in `meta`,
//! and this task, seeing a generation other than the one the copy was loaded
//! at, calls the service's reload (the old copy serves meanwhile; a failed
//! reload is retried at the next look).

use std::future::Future;
use std::time::Duration;

use crate::store::Store;

/// How often a server looks for a seed made by another process.
pub const INTERVAL_MS: u64 = 1000;

/// Spawns the watcher. `loaded_at` is the generation the service's copy was
/// loaded at (read before loading it); `what` names the copy in logs.
pub fn spawn<F, Fut>(
    store: Store,
    key: &'static str,
    loaded_at: Option<String>,
    what: &'static str,
    reload: F,
) -> tokio::task::JoinHandle<()>
where
    F: Fn() -> Fut + Send + 'static,
    Fut: Future<Output = anyhow::Result<()>> + Send,
{
    tokio::spawn(async move {
        let mut loaded_at = loaded_at;
        loop {
            tokio::time::sleep(Duration::from_millis(INTERVAL_MS)).await;
            let Ok(now) = store.meta_get(key).await else {
                continue;
            };
            if now == loaded_at {
                continue;
            }
            match reload().await {
                Ok(()) => loaded_at = now,
                Err(e) => {
                    tracing::warn!(error = %e, what, "reloading after a new seed failed; retrying")
                }
            }
        }
    })
}
