//! What results are rendered from, on every node: turnout from the public
//! board (ballots per district as of its last period) and, once the
//! trustees' results are imported, their counts per unit.
//!
//! Every node reads the board's latest rows when an election's board
//! period changes and the results document when an election becomes
//! tallied ([`spawn`]); a snapshot is rebuilt only then, and results
//! streams are woken through a watch channel.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use arc_swap::ArcSwap;
use tokio::sync::{watch, Notify};

use super::ballot::Digest32;
use super::model::ElectionState;
use super::opening::{ResultsFile, UnitKind};
use super::store::{TallyKey, VotingStore};
use super::Catalog;

/// How often a node looks for a new board period or new results.
const POLL_MS: u64 = 250;

/// A unit of published results that is not a district on its own.
#[derive(Clone, Debug)]
pub struct MergedUnit {
    pub kind: UnitKind,
    pub name: String,
    pub district_ids: Vec<i64>,
    /// The key its counts are under in [`Snapshot::votes`] (negative).
    pub key: i64,
    pub ballots: i64,
}

/// What results are rendered from.
#[derive(Default, Debug)]
pub struct Snapshot {
    /// Bumped on every change.
    pub position: i64,
    /// Votes per (election, district or merged unit key, party, candidate);
    /// candidate 0 is the party's row. Only once results were imported.
    pub votes: HashMap<TallyKey, i64>,
    /// Votes per (election, party) over every unit.
    pub party_totals: HashMap<(i64, i64), i64>,
    /// Ballots on the board per (election, district).
    pub ballots: HashMap<(i64, i64), i64>,
    /// Each district's board digest.
    pub digests: HashMap<(i64, i64), Digest32>,
    /// When each election's board last moved (Unix ms).
    pub board_at_ms: HashMap<i64, i64>,
    /// Districts published inside a larger unit, by (election, district).
    pub merged: HashMap<(i64, i64), Arc<MergedUnit>>,
    /// Spoiled ballots per election, once opened.
    pub spoiled: HashMap<i64, i64>,
}

impl Snapshot {
    pub fn votes(&self, key: TallyKey) -> i64 {
        self.votes.get(&key).copied().unwrap_or(0)
    }

    /// Whether the trustees' results of the election are loaded here (a
    /// node learns of a publication before it has read the results: until
    /// then it shows none rather than zeros).
    pub fn has_results(&self, election_id: i64) -> bool {
        self.spoiled.contains_key(&election_id)
    }

    /// When the board of the election last moved; `None` before its first
    /// period. (A district's figures move only with the board's periods.)
    pub fn updated_at_ms(&self, election_id: i64, _district_id: Option<i64>) -> Option<i64> {
        self.board_at_ms.get(&election_id).copied()
    }
}

/// Per election: what the snapshot was built from.
#[derive(Default, Clone)]
struct Loaded {
    board_period: i64,
    board: Vec<super::store::BoardDistrict>,
    board_at_ms: Option<i64>,
    results: Option<Arc<ResultsFile>>,
}

/// The snapshot every results answer reads, and who waits for changes.
pub struct Tally {
    current: ArcSwap<Snapshot>,
    changed: watch::Sender<u64>,
    /// Wakes the loader at once (after a board period or an import).
    pub wake: Notify,
}

impl Default for Tally {
    fn default() -> Self {
        Tally {
            current: ArcSwap::from_pointee(Snapshot::default()),
            changed: watch::channel(0).0,
            wake: Notify::new(),
        }
    }
}

impl Tally {
    pub fn snapshot(&self) -> Arc<Snapshot> {
        self.current.load_full()
    }

    pub fn subscribe(&self) -> watch::Receiver<u64> {
        self.changed.subscribe()
    }

    /// Tells subscribers to render again (an election's state changed) and
    /// the loader to look.
    pub fn touch(&self) {
        self.wake.notify_one();
        self.changed.send_modify(|v| *v = v.wrapping_add(1));
    }
}

/// Keeps the node's snapshot level with the board and the imported
/// results.
pub fn spawn(
    storage: Arc<VotingStore>,
    catalog: Arc<ArcSwap<Catalog>>,
    tally: Arc<Tally>,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut loaded: HashMap<i64, Loaded> = HashMap::new();
        let mut position = 0i64;
        loop {
            match load(&storage, &catalog, &mut loaded).await {
                Ok(true) => {
                    position += 1;
                    tally
                        .current
                        .store(Arc::new(build(&catalog.load(), &loaded, position)));
                    tally.changed.send_modify(|v| *v = v.wrapping_add(1));
                }
                Ok(false) => {}
                Err(e) => tracing::warn!(error = %e, "reading the board failed; retrying"),
            }
            tokio::select! {
                _ = tally.wake.notified() => {}
                _ = tokio::time::sleep(Duration::from_millis(POLL_MS)) => {}
            }
        }
    })
}

/// Reads what changed; whether anything did.
async fn load(
    storage: &VotingStore,
    catalog: &ArcSwap<Catalog>,
    loaded: &mut HashMap<i64, Loaded>,
) -> anyhow::Result<bool> {
    let mut changed = false;
    for entry in catalog.load().elections.iter() {
        let e = &entry.election;
        let l = loaded.entry(e.id).or_default();
        if e.board_period != l.board_period || (e.board_period > 0 && l.board_at_ms.is_none()) {
            l.board = storage.board(e.id).await?;
            l.board_at_ms = storage.board_at_ms(e.id).await?;
            l.board_period = e.board_period;
            changed = true;
        }
        let has_results = matches!(e.state, ElectionState::Tallied | ElectionState::Published);
        if has_results && l.results.is_none() {
            if let Some(doc) = storage.results_document(e.id).await? {
                let mut r: ResultsFile = serde_json::from_str(&doc)?;
                for u in &mut r.units {
                    u.opened = Vec::new();
                }
                l.results = Some(Arc::new(r));
                changed = true;
            }
        } else if !has_results && l.results.is_some() {
            l.results = None;
            changed = true;
        }
    }
    Ok(changed)
}

fn build(catalog: &Catalog, loaded: &HashMap<i64, Loaded>, position: i64) -> Snapshot {
    let mut s = Snapshot {
        position,
        ..Snapshot::default()
    };
    for (&e, l) in loaded {
        if catalog.election(e).is_none() {
            continue;
        }
        for b in &l.board {
            s.ballots.insert((e, b.district_id), b.ballots);
            s.digests.insert((e, b.district_id), b.digest);
        }
        if let Some(at) = l.board_at_ms {
            s.board_at_ms.insert(e, at);
        }
        let Some(r) = &l.results else { continue };
        let mut spoiled = 0;
        for (i, u) in r.units.iter().enumerate() {
            spoiled += u.spoiled;
            let key = match (u.kind, u.district_ids.as_slice()) {
                (UnitKind::District, [d]) => *d,
                _ => {
                    let unit = Arc::new(MergedUnit {
                        kind: u.kind,
                        name: u.name.clone(),
                        district_ids: u.district_ids.clone(),
                        key: -(i as i64) - 1,
                        ballots: u.ballots,
                    });
                    for d in &u.district_ids {
                        s.merged.insert((e, *d), unit.clone());
                    }
                    unit.key
                }
            };
            for p in &u.parties {
                s.votes.insert((e, key, p.party_id, 0), p.votes);
                *s.party_totals.entry((e, p.party_id)).or_insert(0) += p.votes;
                // A merged unit's candidates each stand in one district:
                // their counts would show that district's choices.
                if key > 0 {
                    for c in &p.candidates {
                        s.votes
                            .insert((e, key, p.party_id, c.candidate_id), c.votes);
                    }
                }
            }
        }
        s.spoiled.insert(e, spoiled);
    }
    s
}
