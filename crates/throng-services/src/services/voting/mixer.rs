//! The mixer: publishes ballots from the ballot box in rounds, a district
//! at a time, so that a published ballot can be linked at most to the set
//! of its district's voters who voted since the district's last round: at
//! least `--voting-mix-ballots-min` of them.
//!
//! A vote puts its sealed ballot into the box (keyed by its receipt's tag)
//! in the same transaction as the voter's mark; nothing else about it is
//! written. (On SQLite both go first into small tables that the mixer
//! settles into the box and the roll's bits every interval, before its
//! round: `VotingStore::settle`.) A round publishes every district whose
//! box holds at least the minimum, or, once the election has closed, every
//! district (the final flush): its ballots move in random-tag order into
//! `voting_ballots` with one `voting.BallotCast` event each (whole
//! districts up to `store::Rounds::ballots_max` ballots where a round is
//! bounded, as on PostgreSQL; the next round follows at once), and its box
//! rows are deleted (see `VotingStore::publish_round`). One mixer runs at a
//! time: a lease on its consumer row, as booking's confirmation worker.

use std::sync::Arc;
use std::time::Duration;

use super::model::ElectionState;
use super::receipt::ReceiptKey;
use super::store::VotingStore;
use super::tally::Tally;
use super::Catalog;
use crate::platform::lease::{self, Lease};
use crate::store::Store;
use arc_swap::ArcSwap;

pub const CONSUMER: &str = "voting-mixer";
const LEASE_MS: i64 = 15_000;

pub struct MixerConfig {
    /// Ballots a district's box needs for a round while the election is open.
    pub ballots_min: i64,
    /// Opens the box's sealed choices.
    pub keys: Arc<ReceiptKey>,
    /// How often the box is looked at.
    pub interval: Duration,
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
        name: "voting mixer",
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
            async move { mix(&storage, &catalog, &tally, &config, lease).await }
        },
        || async {},
    )
}

/// Publishes rounds while this node holds the lease.
async fn mix(
    storage: &VotingStore,
    catalog: &ArcSwap<Catalog>,
    tally: &Tally,
    config: &MixerConfig,
    lease: Lease,
) {
    loop {
        let now = crate::base::clock::now_ms();
        let elections: Vec<(i64, ElectionState, bool)> = catalog
            .load()
            .elections
            .iter()
            .map(|e| {
                let e = &e.election;
                (e.id, e.state, now >= e.closes_at_ms)
            })
            .collect();
        // A box that held more than one round takes: the next round runs
        // at once.
        let mut more_waiting = false;
        for (id, state, past_closing) in elections {
            match state {
                // Nothing can wait in a draft's box; a tallied election's
                // box is empty.
                ElectionState::Draft | ElectionState::Tallied | ElectionState::Published => {
                    continue
                }
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
            let closed = state == ElectionState::Closed || past_closing;
            // SQLite: the votes since the last interval join the box and
            // the roll's bits first, so a round sees them.
            match storage.settle(id).await {
                Ok(settled) => {
                    more_waiting |= settled.marks as i64 >= super::store::FOLD_MARKS_MAX
                        || (state == ElectionState::Closed && settled.ballots > 0)
                }
                Err(e) => {
                    tracing::warn!(election_id = id, error = %e, "settling votes failed; retrying")
                }
            }
            let min = if closed { 1 } else { config.ballots_min.max(1) };
            match storage.publish_round(&config.keys, id, min).await {
                Ok(round) if round.published == 0 => {
                    // Closed, and nothing left to settle or publish: every
                    // ballot is in the log.
                    if state == ElectionState::Closed && !more_waiting {
                        tallied(storage, id).await;
                    }
                }
                Ok(round) => {
                    more_waiting |= round.more_waiting;
                    tracing::info!(
                        election_id = id,
                        ballots = round.published,
                        districts = round.districts,
                        "published a round of ballots"
                    );
                    tally.wake.notify_one();
                }
                Err(e) => {
                    tracing::warn!(election_id = id, error = %e, "a mixing round failed; retrying")
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

/// Takes the step from closed to tallied (with its event, by the mixer).
async fn tallied(storage: &VotingStore, election_id: i64) {
    let (from, to, event) = super::admin::TALLIED;
    match storage
        .step(
            election_id,
            from,
            to,
            (event, serde_json::json!({"actor": "mixer"})),
        )
        .await
    {
        Ok(Ok(())) => tracing::info!(election_id, "every ballot is counted: tallied"),
        Ok(Err(_)) => {}
        Err(e) => tracing::warn!(election_id, error = %e, "marking the election tallied failed"),
    }
}
