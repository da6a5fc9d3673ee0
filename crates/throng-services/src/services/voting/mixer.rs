//! The board worker: closes an election at its closing time, folds the
//! roll's marks (SQLite), and runs the public board's periods: every
//! `--voting-board-period-ms` the ballots cast since the last period go on
//! the board (`VotingStore::board_period`), and once the election is
//! closed one last period completes the box for its export. Ballots are
//! sealed to the trustees' key: nothing here can open them. One worker
//! runs at a time: a lease on its consumer row, as booking's confirmation
//! worker.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use super::model::ElectionState;
use super::store::VotingStore;
use super::tally::Tally;
use super::Catalog;
use crate::platform::lease::{self, Lease};
use crate::store::Store;
use arc_swap::ArcSwap;

pub const CONSUMER: &str = "voting-mixer";
const LEASE_MS: i64 = 15_000;

pub struct MixerConfig {
    /// How often closing times and the roll's marks are looked at.
    pub interval: Duration,
    /// How often the board publishes the ballots cast since its last
    /// period.
    pub board_period: Duration,
}

pub fn spawn(
    store: Store,
    storage: Arc<VotingStore>,
    catalog: Arc<ArcSwap<Catalog>>,
    tally: Arc<Tally>,
    config: MixerConfig,
) -> tokio::task::JoinHandle<()> {
    let worker = lease::Worker {
        consumer: CONSUMER,
        name: "voting board",
        lease_ms: LEASE_MS,
        standby: Duration::from_millis(LEASE_MS as u64 / 3),
    };
    let config = Arc::new(config);
    lease::spawn(
        store,
        worker,
        move |lease, _| {
            let (storage, catalog) = (storage.clone(), catalog.clone());
            let (tally, config) = (tally.clone(), config.clone());
            async move { run(&storage, &catalog, &tally, &config, lease).await }
        },
        || async {},
    )
}

/// Runs periods while this node holds the lease.
async fn run(
    storage: &VotingStore,
    catalog: &ArcSwap<Catalog>,
    tally: &Tally,
    config: &MixerConfig,
    lease: Lease,
) {
    // When each election's last period ran on this node (a new leaseholder
    // starts a period at once).
    let mut last_period: HashMap<i64, std::time::Instant> = HashMap::new();
    loop {
        let now = crate::base::clock::now_ms();
        let elections: Vec<(i64, ElectionState, bool, bool)> = catalog
            .load()
            .elections
            .iter()
            .map(|e| {
                let e = &e.election;
                (e.id, e.state, now >= e.closes_at_ms, e.board_final)
            })
            .collect();
        let mut more_waiting = false;
        for (id, state, past_closing, board_final) in elections {
            match state {
                // Nothing is cast in a draft; after the last period the
                // board does not move.
                ElectionState::Draft => continue,
                _ if board_final => continue,
                ElectionState::Open | ElectionState::Suspended if past_closing => {
                    // The closing time passed: the store's clock decides,
                    // and the step is logged.
                    match storage.close_by_clock(id).await {
                        Ok(true) => tracing::info!(election_id = id, "closed at its closing time"),
                        Ok(false) => {}
                        Err(e) => {
                            tracing::warn!(election_id = id, error = %e, "closing failed; retrying")
                        }
                    }
                }
                _ => {}
            }
            // SQLite: the marks since the last interval join the roll's bits.
            match storage.settle(id).await {
                Ok(settled) => more_waiting |= settled.marks as i64 >= super::store::FOLD_MARKS_MAX,
                Err(e) => {
                    tracing::warn!(election_id = id, error = %e, "settling marks failed; retrying")
                }
            }
            let due = last_period
                .get(&id)
                .is_none_or(|at| at.elapsed() >= config.board_period);
            let closed = state.is_over();
            if !due && !closed {
                continue;
            }
            match storage.board_period(id, closed).await {
                Ok(p) => {
                    last_period.insert(id, std::time::Instant::now());
                    if p.period > 0 {
                        tracing::info!(
                            election_id = id,
                            period = p.period,
                            ballots = p.ballots,
                            last = closed,
                            "published a board period"
                        );
                        tally.touch();
                    }
                }
                Err(e) => {
                    tracing::warn!(election_id = id, error = %e, "a board period failed; retrying")
                }
            }
        }
        if !more_waiting {
            tokio::time::sleep(config.interval).await;
        }
        if !lease.keep().await {
            return;
        }
    }
}
