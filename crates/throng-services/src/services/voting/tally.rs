//! Tallies per district, party and candidate: a projection of the event log.
//!
//! One projector at a time (a lease on the consumer's row, as booking's
//! confirmation worker) reads `voting.BallotCast` events after its durable
//! position and, in one transaction per step, adds them to `voting_tallies`
//! and saves the position: a crash repeats nothing and loses nothing, so
//! once the box is flushed the tallies equal the stored ballots. The
//! leaseholder adds the deltas it applied to its in-memory counts; other
//! nodes (PostgreSQL) poll the table. Results are served from a snapshot
//! of the counts (copied when read after a change, see [`Tally`]), and
//! Server-Sent Events subscribers are woken by a watch channel after every
//! change.

use std::collections::HashMap;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use arc_swap::ArcSwap;
use tokio::sync::{watch, Notify};

use super::model::{ballot_stream, is_ballot_stream, BALLOT_STREAM_CATEGORY, EVENT_BALLOT_CAST};
use super::store::{TallyKey, VotingStore};
use crate::platform::lease::{self, Lease};
use crate::store::Store;

pub const CONSUMER: &str = "voting-tally";
/// Events read per step at most.
const EVENTS_PER_STEP_MAX: i64 = 4096;
/// A step that did not fill waits this long before the next one, so busy
/// steps carry thousands of ballots: a step upserts every tally row its
/// ballots touch (up to ~3 per ballot, scattered over the table's pages), so
/// its cost grows with the rows touched, not with the ballots. Live results
/// update at most every `STREAM_UPDATE_MS_MIN` (250 ms) anyway.
const STEP_GATHER_MS: u64 = 200;
/// How long a projector's lease lasts without renewal.
const LEASE_MS: i64 = 15_000;
/// How long the projector's position may move through events that hold no
/// ballot before it is saved (a third of the lease: the save renews it).
/// A restart scans at most this much of the log again.
const POSITION_SAVE_MS: u64 = LEASE_MS as u64 / 3;
/// How often the projector looks for new events when idle
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
    /// Derived: votes per (election, party) over every district.
    pub party_totals: HashMap<(i64, i64), i64>,
    /// Derived: counted ballots per (election, district).
    pub ballots: HashMap<(i64, i64), i64>,
    /// When this node last saw each (election, district)'s counted votes
    /// change (Unix ms). Published counts only: the box does not move it,
    /// and a round in one district does not move another's.
    pub updated_at_ms: HashMap<(i64, i64), i64>,
}

impl Snapshot {
    fn new(position: i64, votes: HashMap<TallyKey, i64>) -> Snapshot {
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
            party_totals,
            ballots,
            updated_at_ms: HashMap::new(),
        }
    }

    pub fn votes(&self, key: TallyKey) -> i64 {
        self.votes.get(&key).copied().unwrap_or(0)
    }

    /// When the counted votes of one district (or, with `None`, of any
    /// district of the election) last changed on this node; `None` before
    /// the first change.
    pub fn updated_at_ms(&self, election_id: i64, district_id: Option<i64>) -> Option<i64> {
        match district_id {
            Some(d) => self.updated_at_ms.get(&(election_id, d)).copied(),
            None => self
                .updated_at_ms
                .iter()
                .filter(|(k, _)| k.0 == election_id)
                .map(|(_, &t)| t)
                .max(),
        }
    }
}

/// What the projector (or a standby node's poll) last set; snapshots are
/// copied from it only when read.
#[derive(Default)]
struct Live {
    position: i64,
    votes: HashMap<TallyKey, i64>,
    /// Bumped on every change; the cached snapshot names the one it copied.
    version: u64,
    /// When each (election, district)'s `votes` last changed (Unix ms).
    counted_at_ms: HashMap<(i64, i64), i64>,
}

/// The live tallies of every election on this node.
///
/// A step adds its counts in place; a [`Snapshot`] (a copy of every count,
/// ~1 MB for the write-up's 24,000 candidates) is built only when a reader
/// asks and something changed since the last one. Copying on every step
/// instead was most of the server's page faults under the voting bench
/// (~20 steps/s, each a fresh megabyte that the allocator then returned).
pub struct Tally {
    live: Mutex<Live>,
    /// The last snapshot built, with the `Live::version` it copied.
    cached: ArcSwap<(u64, Arc<Snapshot>)>,
    /// `Live::position`, readable without the lock (receipts' `counted`).
    position: AtomicI64,
    changed: watch::Sender<u64>,
    /// Woken by the mixer after a round.
    pub wake: Notify,
}

impl Default for Tally {
    fn default() -> Self {
        Tally {
            live: Mutex::new(Live::default()),
            cached: ArcSwap::from_pointee((0, Arc::new(Snapshot::default()))),
            position: AtomicI64::new(0),
            changed: watch::channel(0).0,
            wake: Notify::new(),
        }
    }
}

impl Tally {
    /// The tallies as of the latest change.
    pub fn snapshot(&self) -> Arc<Snapshot> {
        let live = self.live.lock().unwrap_or_else(|p| p.into_inner());
        let cached = self.cached.load();
        if cached.0 == live.version {
            return cached.1.clone();
        }
        let mut s = Snapshot::new(live.position, live.votes.clone());
        s.updated_at_ms = live.counted_at_ms.clone();
        let s = Arc::new(s);
        self.cached.store(Arc::new((live.version, s.clone())));
        s
    }

    /// The event-log position the tallies reflect.
    pub fn position(&self) -> i64 {
        self.position.load(Ordering::Acquire)
    }

    pub fn subscribe(&self) -> watch::Receiver<u64> {
        self.changed.subscribe()
    }

    /// Tells subscribers to render again (what they show changed besides
    /// the counts: an election's state).
    pub fn touch(&self) {
        self.changed.send_modify(|v| *v = v.wrapping_add(1));
    }

    /// Applies `f` to the live counts; readers are told when it says it
    /// changed something.
    fn update(&self, f: impl FnOnce(&mut Live) -> bool) {
        let changed = {
            let mut live = self.live.lock().unwrap_or_else(|p| p.into_inner());
            let changed = f(&mut live);
            if changed {
                live.version += 1;
                self.position.store(live.position, Ordering::Release);
            }
            changed
        };
        if changed {
            self.changed.send_modify(|v| *v += 1);
        }
    }

    /// Replaces every count (a standby node's poll, or the leaseholder's
    /// start).
    fn replace(&self, position: i64, votes: HashMap<TallyKey, i64>) {
        self.update(|live| {
            let same = live.position == position && live.votes == votes;
            let mut counted_at_ms = std::mem::take(&mut live.counted_at_ms);
            let now = crate::base::clock::now_ms();
            let old = &live.votes;
            let moved = votes
                .iter()
                .filter(|(k, n)| old.get(k) != Some(n))
                .map(|(k, _)| k)
                .chain(old.keys().filter(|k| !votes.contains_key(k)));
            for &(e, d, _, _) in moved {
                counted_at_ms.insert((e, d), now);
            }
            *live = Live {
                position,
                votes,
                version: live.version,
                counted_at_ms,
            };
            !same
        });
    }

    /// Moves the position past events that counted nothing: readers are not
    /// told (no count changed).
    fn advance(&self, position: i64) {
        let mut live = self.live.lock().unwrap_or_else(|p| p.into_inner());
        if position > live.position {
            live.position = position;
            self.position.store(position, Ordering::Release);
        }
    }

    /// Adds one step's deltas, counted up to `position`.
    fn add(&self, position: i64, deltas: &[(TallyKey, i64)]) {
        self.update(|live| {
            for (k, n) in deltas {
                *live.votes.entry(*k).or_insert(0) += n;
            }
            let now = crate::base::clock::now_ms();
            for &((e, d, _, _), _) in deltas {
                live.counted_at_ms.insert((e, d), now);
            }
            live.position = position;
            true
        });
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

pub fn spawn(
    store: Store,
    storage: Arc<VotingStore>,
    tally: Arc<Tally>,
) -> tokio::task::JoinHandle<()> {
    let worker = lease::Worker {
        consumer: CONSUMER,
        name: "voting tally projector",
        lease_ms: LEASE_MS,
        standby: Duration::from_millis(STANDBY_POLL_MS),
    };
    let (log, waiting, standing) = (store.clone(), storage.clone(), tally.clone());
    lease::spawn(
        store,
        worker,
        move |lease, _| {
            let (log, storage, tally) = (log.clone(), storage.clone(), tally.clone());
            async move { project(&log, &storage, &tally, lease).await }
        },
        move || {
            let (storage, tally) = (waiting.clone(), standing.clone());
            async move {
                if let Err(e) = poll(&storage, &tally).await {
                    tracing::warn!(error = %e, "reading the voting tallies failed; retrying");
                }
            }
        },
    )
}

/// A node without the lease: the table as the leaseholder left it.
async fn poll(storage: &VotingStore, tally: &Tally) -> Result<(), crate::store::StoreError> {
    let (position, rows) = storage.read_tallies(CONSUMER).await?;
    tally.replace(position, rows.into_iter().collect());
    Ok(())
}

/// Projects while this node holds the lease; returns when it lost it.
async fn project(store: &Store, storage: &VotingStore, tally: &Tally, lease: Lease) {
    // The table and position as of the claim: only the leaseholder writes.
    let (mut position, votes) = loop {
        match storage.read_tallies(CONSUMER).await {
            Ok((p, rows)) => break (p, rows.into_iter().collect::<HashMap<_, _>>()),
            Err(e) => {
                tracing::warn!(error = %e, "reading the voting tallies failed; retrying");
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
        }
    };
    tally.replace(position, votes);
    loop {
        // The ballot streams' events only: the other services' events in
        // the range are skipped by the store without reading them out.
        let scan = match store
            .events_of_type_after(
                position,
                EVENTS_PER_STEP_MAX,
                BALLOT_STREAM_CATEGORY,
                EVENT_BALLOT_CAST,
            )
            .await
        {
            Ok(s) => s,
            Err(e) => {
                tracing::warn!(error = %e, "the tally projector cannot read the event log; retrying");
                tokio::time::sleep(Duration::from_secs(1)).await;
                continue;
            }
        };
        if scan.scanned > 0 {
            let last = scan.scanned_to;
            let mut deltas: HashMap<TallyKey, i64> = HashMap::new();
            for e in scan.events.iter().filter(|e| is_ballot_stream(&e.stream)) {
                let Ok(b) = serde_json::from_slice::<BallotCast>(&e.payload) else {
                    tracing::error!(
                        position = e.position,
                        "unreadable BallotCast payload; skipped"
                    );
                    continue;
                };
                if e.stream != ballot_stream(b.election_id) {
                    continue;
                }
                *deltas
                    .entry((b.election_id, b.district_id, b.party_id, 0))
                    .or_insert(0) += 1;
                for c in b.candidate_ids {
                    *deltas
                        .entry((b.election_id, b.district_id, b.party_id, c))
                        .or_insert(0) += 1;
                }
            }
            // A range without ballots (other services' events) moves the
            // position in memory only; it is saved with the next ballots,
            // or once `POSITION_SAVE_MS` passed (which renews the lease).
            if deltas.is_empty() && lease.since_renewed() < Duration::from_millis(POSITION_SAVE_MS)
            {
                position = last;
                tally.advance(last);
            } else {
                let mut sorted: Vec<(TallyKey, i64)> = deltas.into_iter().collect();
                sorted.sort_unstable();
                let sorted = Arc::new(sorted);
                match storage
                    .tally_step(
                        CONSUMER,
                        lease.owner().clone(),
                        last,
                        lease.lease_ms(),
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
                if sorted.is_empty() {
                    tally.advance(last);
                } else {
                    tally.add(last, &sorted);
                }
                position = last;
                lease.renewed();
            }
            if scan.scanned < EVENTS_PER_STEP_MAX {
                tokio::time::sleep(Duration::from_millis(STEP_GATHER_MS)).await;
            }
            continue;
        }
        tokio::select! {
            _ = tally.wake.notified() => {}
            _ = tokio::time::sleep(Duration::from_millis(IDLE_POLL_MS)) => {}
        }
        if !lease.keep().await {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn snapshots_are_copied_only_after_a_change() {
        let t = Tally::default();
        let mut changes = t.subscribe();
        t.replace(5, HashMap::from([((1, 1, 1, 0), 2)]));
        assert!(changes.has_changed().unwrap());
        changes.borrow_and_update();
        let a = t.snapshot();
        assert_eq!((a.position, a.votes((1, 1, 1, 0))), (5, 2));
        assert!(Arc::ptr_eq(&a, &t.snapshot()), "no change, no copy");

        t.add(
            9,
            &[((1, 1, 1, 0), 1), ((1, 1, 1, 7), 1), ((1, 2, 3, 0), 4)],
        );
        assert!(changes.has_changed().unwrap());
        changes.borrow_and_update();
        assert_eq!(t.position(), 9);
        let b = t.snapshot();
        assert!(!Arc::ptr_eq(&a, &b));
        assert_eq!(
            (b.position, b.votes((1, 1, 1, 0)), b.votes((1, 1, 1, 7))),
            (9, 3, 1)
        );
        assert_eq!(b.party_totals[&(1, 1)], 3);
        assert_eq!(b.ballots[&(1, 2)], 4);
        assert_eq!(a.votes((1, 1, 1, 0)), 2, "an old snapshot stays as it was");

        // The same table again: nothing to tell.
        changes.borrow_and_update();
        let votes = b.votes.clone();
        t.replace(9, votes);
        assert!(!changes.has_changed().unwrap());
    }
}
