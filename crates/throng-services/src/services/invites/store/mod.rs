//! Invites storage, each operation written once against the store's seam
//! (`crate::store::seam`) and organised by topic: sites (`sites.rs`),
//! answers and standings (`answers.rs`), the retention purge
//! (`purge.rs`), counts (`counts.rs`), visitor numbers and the in-memory
//! standings' load (`numbers.rs`). The seed loads through the store's bulk
//! loader (`seed.rs`).
//!
//! What differs by how the store's writes are made is two named
//! strategies, chosen once from [`Store::writers`] when [`InvitesStore::open`]
//! builds the service's storage:
//! - [`Standings`]: where a known visitor's standing is found and how
//!   visitors are keyed (in memory and numbered where one process makes
//!   every write; in the table under random ids where writers are shared);
//! - [`Decider`]: how an answer is decided (read, `model::apply_answer`,
//!   write in the single writer; one upsert stating the same rules where a
//!   batch's commands are pipelined).
//!
//! Sites and counts are the same on every store: plain functions over the
//! [`Store`] (`load_sites`, `add_seen`, ...), which the seeds use too.

pub mod answers;
pub mod counts;
pub mod daily;
pub mod numbers;
pub mod purge;
pub mod sites;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

pub use answers::Decider;
pub use counts::{add_seen, counts, Counts, SeenDeltas};
pub use daily::{add_daily, daily_rows, DailyDeltas, DailyRow, DayCounts};
pub use numbers::reserve_visitor_numbers;
pub use purge::{purge_ranges, PURGE_CHUNK_ROWS, PURGE_DENSE_KEYS, PURGE_RANGES};
pub use sites::{create_site, load_sites, update_site, SiteRow};

use super::index::{Memory, StandingIndex};
use super::model::{AnswerState, Standing};
use crate::store::{Columns, Store, StoreError, Writers};

/// The invites storage of one store, its strategies chosen once: cheap to
/// clone.
#[derive(Clone)]
pub struct InvitesStore {
    store: Store,
    standings: Standings,
    decider: Decider,
    /// The `invites_counts` row this node adds to.
    counts_shard: i32,
}

/// Where a known visitor's standing is found, and how visitors are keyed.
#[derive(Clone)]
pub enum Standings {
    /// One process makes every write (SQLite), so every visitor's standing
    /// is kept in memory, a byte each, changed inside the writer's
    /// commands in commit order (`index.rs`: 6 MB for 6M visitors; a check
    /// reads one byte where the write-up's 4,300 point queries/s on 6M rows
    /// were its limit). Visitors are numbered under the store's cipher and
    /// `invites_answers` is keyed by number, so a new visitor's answer
    /// appends instead of dirtying a random page (answers 0.30 -> ~0.45 of
    /// `/health`).
    InMemory(Arc<Memory>),
    /// Other nodes write too (PostgreSQL), and their answers would not reach
    /// this node's memory: visitors get random ids, rows are keyed by id,
    /// and checks read the table.
    InTable,
}

impl Standings {
    /// Whether a store whose writes are made so keeps standings in memory
    /// (and numbers its visitors): the one place this is decided.
    pub fn in_memory(writers: Writers) -> bool {
        writers == Writers::OneProcess
    }
}

impl InvitesStore {
    /// The invites storage of `store`: its strategies chosen from
    /// [`Store::writers`]. Where standings are kept in memory, rows stored
    /// under visitor ids are rekeyed by number (once per store) and the
    /// standings loaded, holding at most `memory_visitors_max` visitors.
    pub async fn open(store: &Store, memory_visitors_max: u64) -> Result<InvitesStore, StoreError> {
        let writers = store.writers();
        let standings = if Standings::in_memory(writers) {
            let cipher = super::visitor_ids::load_cipher(store).await?;
            let index = Arc::new(StandingIndex::new(cipher.clone(), memory_visitors_max));
            let started = std::time::Instant::now();
            let rekeyed = numbers::rekey_by_number(store, cipher).await?;
            if rekeyed > 0 {
                tracing::info!(rows = rekeyed, "rekeyed stored answers by visitor number");
            }
            let held = numbers::load_standings(store, &index).await?;
            tracing::info!(
                visitors = held,
                bytes = index.bytes(),
                took_ms = started.elapsed().as_millis() as u64,
                "loaded the visitors' standings into memory"
            );
            Standings::InMemory(Arc::new(Memory::new(index)))
        } else {
            Standings::InTable
        };
        Ok(InvitesStore {
            store: store.clone(),
            standings,
            decider: Decider::for_writers(writers),
            counts_shard: counts::shard_for(writers),
        })
    }

    pub fn store(&self) -> &Store {
        &self.store
    }

    /// The visitors numbered and their standings in memory, where kept.
    pub fn memory(&self) -> Option<&Arc<Memory>> {
        match &self.standings {
            Standings::InMemory(m) => Some(m),
            Standings::InTable => None,
        }
    }

    /// The in-memory standings, where kept.
    pub fn index(&self) -> Option<&Arc<StandingIndex>> {
        self.memory().map(|m| &m.index)
    }

    /// How this store's answers are decided.
    pub fn decider(&self) -> Decider {
        self.decider
    }

    /// The `invites_counts` row this node adds to.
    pub fn counts_shard(&self) -> i32 {
        self.counts_shard
    }

    /// A visitor's key in `invites_answers`: its number where standings are
    /// kept in memory (so a new visitor's answer appends to the table), else
    /// its id.
    pub fn visitor_key(&self, id: i64) -> i64 {
        match &self.standings {
            Standings::InMemory(m) => m.index.key_of(id),
            Standings::InTable => id,
        }
    }

    /// A new visitor's id: the next number under the cipher where
    /// standings are kept in memory, else random.
    pub async fn mint_visitor(&self) -> i64 {
        match &self.standings {
            Standings::InMemory(m) => m.minter.mint(&self.store, &m.index).await,
            Standings::InTable => super::signed::Signer::new_visitor_id(),
        }
    }
}

/// The in-memory standings a writer command may change, and whether it
/// changed any: a write that fails after that (its batch did not commit)
/// takes them out of use until reloaded. A write refused before its
/// command ran (a full queue under overload) changed nothing and costs no
/// reload.
struct Touching {
    index: Option<Arc<StandingIndex>>,
    touched: Arc<AtomicBool>,
}

/// What a writer command holds of [`Touching`].
#[derive(Clone)]
struct Touch {
    index: Option<Arc<StandingIndex>>,
    touched: Arc<AtomicBool>,
}

impl Touching {
    fn new(index: Option<&Arc<StandingIndex>>) -> Touching {
        Touching {
            index: index.cloned(),
            touched: Arc::default(),
        }
    }

    /// For the writer command.
    fn in_writer(&self) -> Touch {
        Touch {
            index: self.index.clone(),
            touched: self.touched.clone(),
        }
    }

    fn settle<T>(&self, r: Result<T, StoreError>) -> Result<T, StoreError> {
        if r.is_err() && self.touched.load(Ordering::Acquire) {
            if let Some(index) = &self.index {
                index.invalidate();
            }
        }
        r
    }
}

impl Touch {
    /// Inside the writer command: the index, marked as touched.
    fn index(&self) -> Option<&StandingIndex> {
        self.touched.store(true, Ordering::Release);
        self.index.as_deref()
    }
}

/// A row of (state, closes, updated_at_ms).
fn standing_row(r: &impl Columns) -> Result<Standing, StoreError> {
    standing_from(r.int(0)?, r.int(1)?, r.int(2)?)
}

fn standing_from(state: i64, closes: i64, updated_at_ms: i64) -> Result<Standing, StoreError> {
    Ok(Standing {
        state: AnswerState::from_i64(state)
            .ok_or_else(|| StoreError::Internal(format!("invites_answers.state {state}")))?,
        closes,
        day: crate::base::clock::day_of(updated_at_ms),
    })
}
