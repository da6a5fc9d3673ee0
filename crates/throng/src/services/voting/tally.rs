//! Tallies per district, party and candidate: a projection of the event log.
//!
//! One projector at a time (a lease on the consumer's row, as booking's
//! confirmation worker) reads `voting.BallotCast` events after its durable
//! position and, in one transaction per step, adds them to `voting_tallies`
//! and saves the position: a crash repeats nothing and loses nothing, so
//! once the box is flushed the tallies equal the stored ballots. The
//! leaseholder keeps its in-memory snapshot from the deltas it applied;
//! other nodes (PostgreSQL) poll the table. Results are served from the
//! snapshot, and Server-Sent Events subscribers are woken by a watch
//! channel after every change.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use arc_swap::ArcSwap;
use tokio::sync::{watch, Notify};

use super::model::EVENT_BALLOT_CAST;
use super::store::{self, TallyKey};
use crate::store::Store;

pub const CONSUMER: &str = "voting-tally";
/// Events read per step at most.
const EVENTS_PER_STEP_MAX: i64 = 1024;
/// How long a projector's lease lasts without renewal.
const LEASE_MS: i64 = 15_000;
/// How often the projector looks for new events and box counts when idle
/// (and the longest a change waits to be seen).
const IDLE_POLL_MS: u64 = 250;
/// How often a node without the lease reads the tallies table.
const STANDBY_POLL_MS: u64 = 500;

/// What results are rendered from.
#[derive(Default, Debug)]
pub struct Snapshot {
    /// The event-log position the tallies reflect.
    pub position: i64,
    /// Votes per (election, district, party, candidate); candidate 0 is the
    /// party's row.
    pub votes: HashMap<TallyKey, i64>,
    /// Ballots in the box per (election, district).
    pub pending: HashMap<(i64, i64), i64>,
    /// Derived: votes per (election, party) over every district.
    pub party_totals: HashMap<(i64, i64), i64>,
    /// Derived: counted ballots per (election, district).
    pub ballots: HashMap<(i64, i64), i64>,
}

impl Snapshot {
    fn new(
        position: i64,
        votes: HashMap<TallyKey, i64>,
        pending: HashMap<(i64, i64), i64>,
    ) -> Snapshot {
        let mut party_totals = HashMap::new();
        let mut ballots = HashMap::new();
        for (&(e, d, p, c), &n) in &votes {
            if c == 0 {
                *party_totals.entry((e, p)).or_insert(0) += n;
                *ballots.entry((e, d)).or_insert(0) += n;
            }
        }
        Snapshot {
            position,
            votes,
            pending,
            party_totals,
            ballots,
        }
    }

    pub fn votes(&self, key: TallyKey) -> i64 {
        self.votes.get(&key).copied().unwrap_or(0)
    }
}

/// The live tallies of every election on this node.
pub struct Tally {
    snapshot: ArcSwap<Snapshot>,
    changed: watch::Sender<u64>,
    /// Woken by the mixer after a round.
    pub wake: Notify,
}

impl Default for Tally {
    fn default() -> Self {
        Tally {
            snapshot: ArcSwap::from_pointee(Snapshot::default()),
            changed: watch::channel(0).0,
            wake: Notify::new(),
        }
    }
}

impl Tally {
    pub fn snapshot(&self) -> Arc<Snapshot> {
        self.snapshot.load_full()
    }

    pub fn subscribe(&self) -> watch::Receiver<u64> {
        self.changed.subscribe()
    }

    fn publish(&self, next: Snapshot) {
        let old = self.snapshot.load();
        let same =
            old.position == next.position && old.votes == next.votes && old.pending == next.pending;
        self.snapshot.store(Arc::new(next));
        if !same {
            self.changed.send_modify(|v| *v += 1);
        }
    }
}

#[derive(serde::Deserialize)]
#[serde(rename_all = "camelCase")]
struct BallotCast {
    election_id: i64,
    district_id: i64,
    party_id: i64,
    candidate_ids: Vec<i64>,
}

pub fn spawn(store: Store, tally: Arc<Tally>) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let owner: Arc<str> = uuid::Uuid::new_v4().to_string().into();
        loop {
            match store.claim_consumer(CONSUMER, &owner, LEASE_MS).await {
                Ok(Some(_)) => {
                    tracing::info!("voting tally projector holds the lease");
                    project(&store, &tally, &owner).await;
                    tracing::info!("voting tally projector lost its lease; standing by");
                }
                Ok(None) => {
                    if let Err(e) = poll(&store, &tally).await {
                        tracing::warn!(error = %e, "reading the voting tallies failed; retrying");
                    }
                }
                Err(e) => {
                    tracing::warn!(error = %e, "voting tally projector cannot claim its lease")
                }
            }
            tokio::time::sleep(Duration::from_millis(STANDBY_POLL_MS)).await;
        }
    })
}

/// A node without the lease: the table as the leaseholder left it.
async fn poll(store: &Store, tally: &Tally) -> Result<(), crate::store::StoreError> {
    let (position, rows) = store::read_tallies(store, CONSUMER).await?;
    let pending = store::box_counts(store).await?;
    tally.publish(Snapshot::new(position, rows.into_iter().collect(), pending));
    Ok(())
}

/// Projects while this node holds the lease; returns when it lost it.
async fn project(store: &Store, tally: &Tally, owner: &Arc<str>) {
    // The table and position as of the claim: only the leaseholder writes.
    let (mut position, mut votes) = loop {
        match store::read_tallies(store, CONSUMER).await {
            Ok((p, rows)) => break (p, rows.into_iter().collect::<HashMap<_, _>>()),
            Err(e) => {
                tracing::warn!(error = %e, "reading the voting tallies failed; retrying");
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
        }
    };
    let mut pending = store::box_counts(store).await.unwrap_or_default();
    tally.publish(Snapshot::new(position, votes.clone(), pending.clone()));
    let mut renewed = Instant::now();
    loop {
        let events = match store.events_after(position, EVENTS_PER_STEP_MAX).await {
            Ok(e) => e,
            Err(e) => {
                tracing::warn!(error = %e, "the tally projector cannot read the event log; retrying");
                tokio::time::sleep(Duration::from_secs(1)).await;
                continue;
            }
        };
        if let Some(last) = events.last().map(|e| e.position) {
            let mut deltas: HashMap<TallyKey, i64> = HashMap::new();
            for e in events.iter().filter(|e| e.event_type == EVENT_BALLOT_CAST) {
                let Ok(b) = serde_json::from_slice::<BallotCast>(&e.payload) else {
                    tracing::error!(
                        position = e.position,
                        "unreadable BallotCast payload; skipped"
                    );
                    continue;
                };
                *deltas
                    .entry((b.election_id, b.district_id, b.party_id, 0))
                    .or_insert(0) += 1;
                for c in b.candidate_ids {
                    *deltas
                        .entry((b.election_id, b.district_id, b.party_id, c))
                        .or_insert(0) += 1;
                }
            }
            let mut sorted: Vec<(TallyKey, i64)> = deltas.into_iter().collect();
            sorted.sort_unstable();
            let sorted = Arc::new(sorted);
            match store::tally_step(
                store,
                CONSUMER,
                owner.clone(),
                last,
                LEASE_MS,
                sorted.clone(),
            )
            .await
            {
                Ok(true) => {}
                Ok(false) => return,
                Err(e) => {
                    tracing::warn!(error = %e, "saving a tally step failed; retrying");
                    tokio::time::sleep(Duration::from_secs(1)).await;
                    continue;
                }
            }
            for (k, n) in sorted.iter() {
                *votes.entry(*k).or_insert(0) += n;
            }
            position = last;
            renewed = Instant::now();
            if let Ok(p) = store::box_counts(store).await {
                pending = p;
            }
            tally.publish(Snapshot::new(position, votes.clone(), pending.clone()));
            continue;
        }
        tokio::select! {
            _ = tally.wake.notified() => {}
            _ = tokio::time::sleep(Duration::from_millis(IDLE_POLL_MS)) => {}
        }
        if let Ok(p) = store::box_counts(store).await {
            if p != pending {
                pending = p;
                tally.publish(Snapshot::new(position, votes.clone(), pending.clone()));
            }
        }
        if renewed.elapsed() >= Duration::from_millis(LEASE_MS as u64 / 3) {
            match store.claim_consumer(CONSUMER, owner, LEASE_MS).await {
                Ok(Some(_)) => renewed = Instant::now(),
                Ok(None) => return,
                Err(e) => tracing::warn!(error = %e, "cannot renew the tally lease"),
            }
        }
    }
}
