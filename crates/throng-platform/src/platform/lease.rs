//! One worker of a kind per store, whatever the number of nodes: a
//! service's background worker (booking's notifier, voting's mixer and
//! tally projector) runs only while its node holds the lease on the
//! worker's log consumer (`consumer_positions`), renews it as it goes, and
//! hands over when its node dies and the lease lapses.
//!
//! [`spawn`] claims the lease, runs the worker's `hold` until it returns
//! (the lease was lost), and claims again; a node without the lease runs
//! `standby` between claims.

use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::store::{Store, StoreError};

/// A lease this node holds on a log consumer.
pub struct Lease {
    store: Store,
    consumer: &'static str,
    owner: Arc<str>,
    lease_ms: i64,
    renewed: std::sync::Mutex<Instant>,
}

impl Lease {
    /// This node's name in the lease (random per worker).
    pub fn owner(&self) -> &Arc<str> {
        &self.owner
    }

    pub fn consumer(&self) -> &'static str {
        self.consumer
    }

    /// How long a claim or renewal holds.
    pub fn lease_ms(&self) -> i64 {
        self.lease_ms
    }

    /// How long since the lease was last renewed.
    pub fn since_renewed(&self) -> Duration {
        self.renewed.lock().unwrap().elapsed()
    }

    /// Records a renewal that another write made (a position saved with
    /// the lease, as `Store::save_leased_position` does).
    pub fn renewed(&self) {
        *self.renewed.lock().unwrap() = Instant::now();
    }

    /// Renews the lease while the worker idles, when the store needs it
    /// (`Store::idle_lease_renewal_due`); `false` once it was lost. A
    /// failed renewal is logged and tried again at the next call.
    pub async fn keep(&self) -> bool {
        let renewed = *self.renewed.lock().unwrap();
        if !self.store.idle_lease_renewal_due(renewed, self.lease_ms) {
            return true;
        }
        match self
            .store
            .claim_consumer(self.consumer, &self.owner, self.lease_ms)
            .await
        {
            Ok(Some(_)) => {
                self.renewed();
                true
            }
            Ok(None) => false,
            Err(e) => {
                tracing::warn!(consumer = self.consumer, error = %e, "cannot renew the lease");
                true
            }
        }
    }

    /// Saves the consumer's position and renews the lease; `false` when the
    /// lease was lost to another node.
    pub async fn save(&self, position: i64) -> Result<bool, StoreError> {
        let held = self
            .store
            .save_leased_position(self.consumer, &self.owner, position, self.lease_ms)
            .await?;
        if held {
            self.renewed();
        }
        Ok(held)
    }
}

/// How a leased worker runs.
pub struct Worker {
    /// The log consumer whose lease it holds.
    pub consumer: &'static str,
    /// For logs: "confirmation worker".
    pub name: &'static str,
    /// How long a claim or renewal holds.
    pub lease_ms: i64,
    /// How long a node without the lease waits between claims.
    pub standby: Duration,
}

/// Runs `hold` while this node holds `worker`'s lease, from the consumer's
/// saved position; when `hold` returns (the lease was lost), stands by and
/// claims again. Between claims a node without the lease runs `standby`.
pub fn spawn<H, HF, S, SF>(
    store: Store,
    worker: Worker,
    mut hold: H,
    mut standby: S,
) -> tokio::task::JoinHandle<()>
where
    H: FnMut(Lease, i64) -> HF + Send + 'static,
    HF: Future<Output = ()> + Send,
    S: FnMut() -> SF + Send + 'static,
    SF: Future<Output = ()> + Send,
{
    tokio::spawn(async move {
        let owner: Arc<str> = uuid::Uuid::new_v4().to_string().into();
        loop {
            match store
                .claim_consumer(worker.consumer, &owner, worker.lease_ms)
                .await
            {
                Ok(Some(position)) => {
                    tracing::info!(position, "{} holds the lease", worker.name);
                    let lease = Lease {
                        store: store.clone(),
                        consumer: worker.consumer,
                        owner: owner.clone(),
                        lease_ms: worker.lease_ms,
                        renewed: std::sync::Mutex::new(Instant::now()),
                    };
                    hold(lease, position).await;
                    tracing::info!("{} lost its lease; standing by", worker.name);
                }
                Ok(None) => standby().await,
                Err(e) => {
                    tracing::warn!(error = %e, "{} cannot claim its lease; retrying", worker.name)
                }
            }
            tokio::time::sleep(worker.standby).await;
        }
    })
}
