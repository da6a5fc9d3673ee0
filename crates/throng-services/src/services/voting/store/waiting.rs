//! What waits in SQLite's intake, in memory, for the copy check of a vote
//! ([`Votes::RollDecides`](super::Votes::RollDecides)).
//!
//! The intake is keyed by the writer's batch (rows of a commit together,
//! see `Tx::writer_batch`), so a tracker cannot be looked up by its key.
//! Every tracker waiting there is held here by its first 4 bytes: a vote
//! whose prefix is absent is no copy of a waiting ballot; one whose prefix
//! is present (a copy, or one vote in ~20,000 at 200,000 waiting) is
//! checked against the intake's rows. Nothing here may be missing: a copy
//! let through would meet the box's key when its period moves it.

use std::collections::HashMap;
use std::sync::Mutex;

use super::super::ballot::Tracker;

fn prefix(tracker: &Tracker) -> u32 {
    u32::from_le_bytes([tracker[0], tracker[1], tracker[2], tracker[3]])
}

/// Prefixes added since the last merge, at most; then merged into the
/// sorted ones (a scan of 4 KiB per lookup, a merge every 1,024 votes).
const RECENT_MAX: usize = 1024;

/// A set of prefixes in 4 bytes each: a sorted vector and the few added
/// since it was last merged (a hash set took 10-20 bytes each with its
/// growth: ~3 MiB more at a period of 200,000 votes).
#[derive(Default)]
pub struct Prefixes {
    sorted: Vec<u32>,
    recent: Vec<u32>,
}

impl Prefixes {
    pub fn from_unsorted(mut all: Vec<u32>) -> Prefixes {
        all.sort_unstable();
        Prefixes {
            sorted: all,
            recent: Vec::new(),
        }
    }

    fn len(&self) -> usize {
        self.sorted.len() + self.recent.len()
    }

    fn contains(&self, p: u32) -> bool {
        // Without an early exit per element, so the comparison runs on
        // whole vectors.
        self.recent
            .chunks(16)
            .any(|c| c.iter().fold(false, |hit, &x| hit | (x == p)))
            || self.sorted.binary_search(&p).is_ok()
    }

    fn insert(&mut self, p: u32) {
        self.recent.push(p);
        if self.recent.len() >= RECENT_MAX {
            self.merge();
        }
    }

    /// Merges the recent prefixes into the sorted ones, in place from the
    /// end.
    fn merge(&mut self) {
        self.recent.sort_unstable();
        let (n, m) = (self.sorted.len(), self.recent.len());
        self.sorted.resize(n + m, 0);
        let (mut i, mut j) = (n, m);
        while j > 0 {
            let k = i + j - 1;
            if i > 0 && self.sorted[i - 1] > self.recent[j - 1] {
                self.sorted[k] = self.sorted[i - 1];
                i -= 1;
            } else {
                self.sorted[k] = self.recent[j - 1];
                j -= 1;
            }
        }
        self.recent.clear();
    }

    fn extend(&mut self, other: Prefixes) {
        other
            .sorted
            .into_iter()
            .chain(other.recent)
            .for_each(|p| self.insert(p));
    }
}

/// An election's waiting trackers: those cast since the last period, and
/// those a period is moving into the box until its commit is known.
#[derive(Default)]
struct Waiting {
    current: Prefixes,
    moving: Option<Prefixes>,
}

/// Per election, the prefixes of the trackers in the intake. Changed in the
/// writer (votes, a period's start, a load) and once a period's write
/// answered; a period's trackers are kept until its commit is known, so
/// none is missing at any moment.
#[derive(Default)]
pub struct WaitingTrackers {
    elections: Mutex<HashMap<i64, Waiting>>,
}

impl WaitingTrackers {
    /// Whether a ballot with this tracker may wait in the intake (false:
    /// it does not).
    pub fn may_wait(&self, election_id: i64, tracker: &Tracker) -> bool {
        let p = prefix(tracker);
        let elections = self.elections.lock().unwrap();
        elections.get(&election_id).is_some_and(|w| {
            w.current.contains(p) || w.moving.as_ref().is_some_and(|m| m.contains(p))
        })
    }

    /// A ballot went into the intake (in the writer's transaction).
    pub fn add(&self, election_id: i64, tracker: &Tracker) {
        let mut elections = self.elections.lock().unwrap();
        elections
            .entry(election_id)
            .or_default()
            .current
            .insert(prefix(tracker));
    }

    /// The intake as read in the writer: what waits now.
    pub fn load(&self, election_id: i64, trackers: Prefixes) {
        let mut elections = self.elections.lock().unwrap();
        elections.entry(election_id).or_default().current = trackers;
    }

    /// A period is moving everything waiting into the box (in the writer's
    /// transaction): what waited is kept apart until [`Self::period_done`].
    pub fn period_moves(&self, election_id: i64) {
        let mut elections = self.elections.lock().unwrap();
        let w = elections.entry(election_id).or_default();
        let fresh = Prefixes {
            sorted: Vec::with_capacity(w.current.len()),
            recent: Vec::with_capacity(RECENT_MAX),
        };
        let taken = std::mem::replace(&mut w.current, fresh);
        match &mut w.moving {
            Some(m) => m.extend(taken),
            None => w.moving = Some(taken),
        }
    }

    /// The period's write answered: committed, its trackers are in the box
    /// (which the vote's check reads); rolled back, they wait again.
    pub fn period_done(&self, election_id: i64, committed: bool) {
        let mut elections = self.elections.lock().unwrap();
        let Some(w) = elections.get_mut(&election_id) else {
            return;
        };
        if let Some(moved) = w.moving.take() {
            if !committed {
                w.current.extend(moved);
            }
        }
    }

    /// Prefix of a tracker, as the intake's trackers are loaded.
    pub fn prefix_of(tracker: &[u8]) -> Option<u32> {
        let head: [u8; 4] = tracker.get(..4)?.try_into().ok()?;
        Some(u32::from_le_bytes(head))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(first: u8) -> Tracker {
        let mut t = [7u8; 32];
        t[0] = first;
        t
    }

    #[test]
    fn a_period_keeps_its_trackers_until_its_commit_is_known() {
        let w = WaitingTrackers::default();
        assert!(!w.may_wait(1, &t(1)));
        w.add(1, &t(1));
        assert!(w.may_wait(1, &t(1)));
        assert!(!w.may_wait(2, &t(1)), "per election");
        w.period_moves(1);
        w.add(1, &t(2));
        assert!(w.may_wait(1, &t(1)), "moving, not yet committed");
        w.period_done(1, false);
        assert!(w.may_wait(1, &t(1)), "rolled back: waiting again");
        assert!(w.may_wait(1, &t(2)));
        w.period_moves(1);
        w.period_done(1, true);
        assert!(!w.may_wait(1, &t(1)), "committed: in the box");
        assert!(!w.may_wait(1, &t(2)));
    }

    #[test]
    fn prefixes_find_every_one_added_across_merges() {
        let mut rng = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = || {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            rng as u32
        };
        let added: Vec<u32> = (0..5 * RECENT_MAX + 17).map(|_| next()).collect();
        let mut set = Prefixes::default();
        for (i, p) in added.iter().enumerate() {
            set.insert(*p);
            if i % 997 == 0 {
                assert!(added[..=i].iter().all(|q| set.contains(*q)));
            }
        }
        assert!(added.iter().all(|p| set.contains(*p)));
        assert!(set.sorted.windows(2).all(|w| w[0] <= w[1]));
        let absent = (0..10_000).map(|_| next()).filter(|p| !added.contains(p));
        assert!(absent.take(1000).all(|p| !set.contains(p)));
        let mut other = Prefixes::from_unsorted(vec![3, 1, 2]);
        other.extend(set);
        assert!(added.iter().chain(&[1, 2, 3]).all(|p| other.contains(*p)));
    }

    #[test]
    fn a_load_replaces_what_waits() {
        let w = WaitingTrackers::default();
        w.add(1, &t(1));
        let loaded = Prefixes::from_unsorted(vec![WaitingTrackers::prefix_of(&t(3)).unwrap()]);
        w.load(1, loaded);
        assert!(!w.may_wait(1, &t(1)));
        assert!(w.may_wait(1, &t(3)));
        assert_eq!(WaitingTrackers::prefix_of(&[1, 2, 3]), None);
    }
}
