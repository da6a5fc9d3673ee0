//! Every visitor's standing in memory, one byte each (and the day of its
//! last answer, two more), on the embedded store.
//!
//! A visitor minted here is a dense number under a cipher
//! (`visitor_ids.rs`), and the embedded store keys `invites_answers` by that
//! number (`key_of`): a new visitor's answer appends to the table's B-tree
//! instead of dirtying a random page of it, and the standings of visitors
//! `1..n` fit in arrays of `n` bytes and `n` days: 6,000,000 visitors in 18 MB, where
//! the table is ~170 MB. A known visitor's check reads one byte instead of a
//! B-tree (the write-up's 4,300 point queries/s on 6M rows were its limit).
//! Rows a store kept under visitor ids (before numbers) are rekeyed once,
//! at start (`store::numbers::rekey_by_number`).
//!
//! The table stays the truth; the array follows it exactly because it
//! changes only inside the single writer's commands, in commit order: an
//! answer's command sets its visitor's byte after its upsert, forgetting a
//! visitor and the retention purge clear them, and a (re)load scans the
//! table inside a writer command too, so no write can slip between the scan
//! and the swap. A byte is set before its batch's fsync: a check may see an
//! answer a few milliseconds before it is acknowledged. A batch that fails
//! to commit makes its answers fail, and the failure of a command that had
//! changed a byte takes the array out of use until it is loaded again
//! (`invalidate`, via the storage's `Touching`), so it never keeps a write the
//! table does not have; a write refused before its command ran costs no
//! reload. A seed into a live server does the same
//! through `ANSWERS_GENERATION_KEY`.
//!
//! Not on PostgreSQL: there other nodes write too, and their answers would
//! not reach this node's array; nodes mint random ids, rows are keyed by
//! id, and checks read the table.
//!
//! A byte: 0 no answers; 0xFF ask the table (a visitor with answers for two
//! sites, or one answered through the bench's baseline routes, outside the
//! writer); else `0x80 | state << 4 | closes`. Numbers past the array
//! (visitors minted after `--invites-memory-visitors-max`, random ids from
//! before the cipher) read the table.

use std::sync::atomic::{AtomicBool, AtomicU16, AtomicU8, Ordering};
use std::sync::Arc;

use arc_swap::ArcSwap;

use super::model::{AnswerState, Standing};
use super::store::numbers;
use super::visitor_ids::IdCipher;
use crate::store::Store;

/// The `meta` key a seed changes when it replaced the answers: the servers
/// on the store load their standings again.
pub const ANSWERS_GENERATION_KEY: &str = "invites_answers_generation";

/// The `meta` key saying how the embedded store keys `invites_answers`:
/// `numbers` once its rows are keyed by visitor number.
pub const KEYS_META: &str = "invites_answers_keys";
pub const KEYS_NUMBERS: &str = "numbers";

/// Visitor numbers per chunk of the array (and per block reserved).
pub const CHUNK: u64 = 1 << 16;
const NO_ROW: u8 = 0;
const ASK_TABLE: u8 = 0xFF;
const SET: u8 = 0x80;

/// A chunk's standings, a byte each, and the day of each one's last
/// answer (days since the Unix epoch, 2 bytes: until 2149), which the
/// rules asking again after "No" or closes read.
struct Chunk {
    bytes: Box<[AtomicU8]>,
    days: Box<[AtomicU16]>,
}

impl std::ops::Index<usize> for Chunk {
    type Output = AtomicU8;
    fn index(&self, i: usize) -> &AtomicU8 {
        &self.bytes[i]
    }
}

fn new_chunk() -> Chunk {
    Chunk {
        bytes: (0..CHUNK).map(|_| AtomicU8::new(NO_ROW)).collect(),
        days: (0..CHUNK).map(|_| AtomicU16::new(0)).collect(),
    }
}

/// A day as the array keeps it (days before 1970 or after 2149 clamp).
fn day_u16(day: i32) -> u16 {
    day.clamp(0, u16::MAX as i32) as u16
}

fn encode(s: Standing) -> u8 {
    // closes <= CLOSES_MAX_LIMIT (10) fits in 4 bits; 0xFF never results
    // (state 3 with 15 closes is out of bounds).
    debug_assert!((0..16).contains(&s.closes));
    SET | (s.state as u8) << 4 | (s.closes.clamp(0, 15) as u8)
}

/// `decode`'s standing with its day.
fn decode_at(b: u8, day: u16) -> Option<Standing> {
    decode(b).map(|s| Standing {
        day: if b == NO_ROW { 0 } else { day as i32 },
        ..s
    })
}

fn decode(b: u8) -> Option<Standing> {
    match b {
        NO_ROW => Some(Standing::default()),
        ASK_TABLE => None,
        _ => Some(Standing {
            state: AnswerState::from_i64(((b >> 4) & 0x3) as i64)?,
            closes: (b & 0x0F) as i64,
            day: 0,
        }),
    }
}

pub struct StandingIndex {
    cipher: IdCipher,
    /// Chunk `k` holds numbers `k * CHUNK .. (k + 1) * CHUNK`.
    chunks: ArcSwap<Vec<Arc<Chunk>>>,
    ready: AtomicBool,
    /// Numbers the array may hold at most (its bytes).
    numbers_max: u64,
    /// Wakes the loader after `invalidate`.
    pub reload: tokio::sync::Notify,
}

impl StandingIndex {
    pub fn new(cipher: IdCipher, numbers_max: u64) -> StandingIndex {
        StandingIndex {
            cipher,
            chunks: ArcSwap::from_pointee(Vec::new()),
            ready: AtomicBool::new(false),
            numbers_max,
            reload: tokio::sync::Notify::new(),
        }
    }

    /// A visitor's key in the embedded store's table: its number.
    pub fn key_of(&self, id: i64) -> i64 {
        self.cipher.number_of(id) as i64
    }

    fn slot<R>(&self, key: i64, f: impl FnOnce(&AtomicU8) -> R) -> Option<R> {
        self.slot_day(key, |b, _| f(b))
    }

    fn slot_day<R>(&self, key: i64, f: impl FnOnce(&AtomicU8, &AtomicU16) -> R) -> Option<R> {
        if key < 1 {
            return None;
        }
        let n = key as u64;
        let chunks = self.chunks.load();
        let chunk = chunks.get((n / CHUNK) as usize)?;
        let i = (n % CHUNK) as usize;
        Some(f(&chunk.bytes[i], &chunk.days[i]))
    }

    /// The standing of the visitor with this key from memory; `None`: read
    /// the table.
    pub fn get(&self, key: i64) -> Option<Standing> {
        if !self.ready.load(Ordering::Acquire) {
            return None;
        }
        self.slot_day(key, |b, d| {
            // The day is stored before the byte (Release), so a byte read
            // with Acquire sees its day.
            let b = b.load(Ordering::Acquire);
            (b, d.load(Ordering::Relaxed))
        })
        .and_then(|(b, d)| decode_at(b, d))
    }

    /// Inside a writer command: the visitor's standing is now `s` (`None`:
    /// no answers with its site). A visitor whose checks read the table
    /// (answers with two sites) keeps doing so until the next load.
    pub fn record(&self, key: i64, s: Option<Standing>) {
        let new = s.map_or(NO_ROW, encode);
        let day = s.map_or(0, |s| day_u16(s.day));
        self.slot_day(key, |slot, d| {
            d.store(day, Ordering::Relaxed);
            let _ = slot.fetch_update(Ordering::AcqRel, Ordering::Acquire, |b| {
                (b != ASK_TABLE).then_some(new)
            });
        });
    }

    /// Inside a writer command: every answer of the visitor was deleted.
    pub fn forget(&self, key: i64) {
        self.slot(key, |slot| slot.store(NO_ROW, Ordering::Release));
    }

    /// The visitor was written outside the writer: its checks read the
    /// table from now on.
    pub fn ask_table(&self, key: i64) {
        self.slot(key, |slot| slot.store(ASK_TABLE, Ordering::Release));
    }

    /// A write may have failed after its byte was set: checks read the
    /// table until the array is loaded again.
    pub fn invalidate(&self) {
        if self.ready.swap(false, Ordering::AcqRel) {
            tracing::warn!("a write failed: visitors' checks read the table until the in-memory standings are loaded again");
        }
        self.reload.notify_one();
    }

    /// Grows the array to hold numbers below `end` (within the bound);
    /// new chunks start empty: numbers not minted yet have no answers.
    pub fn cover(&self, end: u64) {
        let want = end.min(self.numbers_max).div_ceil(CHUNK) as usize;
        self.chunks.rcu(|cur| {
            let mut next: Vec<Arc<Chunk>> = cur.as_ref().clone();
            while next.len() < want {
                next.push(Arc::new(new_chunk()));
            }
            next
        });
    }

    /// Bytes the array holds (a standing's byte and its day's two).
    pub fn bytes(&self) -> u64 {
        self.chunks.load().len() as u64 * CHUNK * 3
    }

    /// Takes the array out of use until [`StandingIndex::install`]: a
    /// load is about to scan the table.
    pub fn suspend(&self) {
        self.ready.store(false, Ordering::Release);
    }

    /// An empty array for numbers below `end` (within the bound), to fill
    /// from the table's rows.
    pub fn fresh(&self, end: u64) -> Fresh {
        let chunks_n = end.min(self.numbers_max).div_ceil(CHUNK) as usize;
        Fresh {
            chunks: (0..chunks_n).map(|_| new_chunk()).collect(),
            held: 0,
        }
    }

    /// Puts a filled array in use; the visitors it holds.
    pub fn install(&self, fresh: Fresh) -> u64 {
        self.chunks
            .store(Arc::new(fresh.chunks.into_iter().map(Arc::new).collect()));
        self.ready.store(true, Ordering::Release);
        fresh.held
    }
}

/// An array being filled from the table (see [`StandingIndex::fresh`]).
pub struct Fresh {
    chunks: Vec<Chunk>,
    held: u64,
}

impl Fresh {
    /// A row of the table: (visitor key, state, closes, its time).
    pub fn hold(&mut self, key: i64, state: i64, closes: i64, updated_at_ms: i64) {
        if key < 1 {
            return;
        }
        let n = key as u64;
        let Some(chunk) = self.chunks.get((n / CHUNK) as usize) else {
            return;
        };
        let slot = &chunk[(n % CHUNK) as usize];
        chunk.days[(n % CHUNK) as usize].store(
            day_u16(crate::base::clock::day_of(updated_at_ms)),
            Ordering::Relaxed,
        );
        // A second row of one visitor (another site's) is not one byte:
        // its checks read the table.
        let b = match AnswerState::from_i64(state) {
            _ if slot.load(Ordering::Relaxed) != NO_ROW => ASK_TABLE,
            Some(state) if (0..16).contains(&closes) => encode(Standing {
                state,
                closes,
                day: 0,
            }),
            _ => ASK_TABLE,
        };
        slot.store(b, Ordering::Relaxed);
        self.held += 1;
    }
}

/// Visitors numbered under a cipher and their standings in memory.
pub struct Memory {
    pub index: Arc<StandingIndex>,
    pub minter: Minter,
}

impl Memory {
    pub fn new(index: Arc<StandingIndex>) -> Memory {
        Memory {
            index,
            minter: Minter::default(),
        }
    }
}

/// Hands out visitor numbers from blocks reserved durably, and their ids.
pub struct Minter {
    /// The current block: (next, end).
    block: std::sync::Mutex<(u64, u64)>,
    refill: tokio::sync::Mutex<()>,
}

impl Default for Minter {
    fn default() -> Self {
        Minter {
            block: std::sync::Mutex::new((0, 0)),
            refill: tokio::sync::Mutex::new(()),
        }
    }
}

impl Minter {
    /// A new visitor's id. Once per `CHUNK` visitors this waits for a block
    /// of numbers to be reserved (a durable write); if that fails the
    /// visitor gets a random id, whose checks read the table.
    pub async fn mint(&self, store: &Store, index: &StandingIndex) -> i64 {
        loop {
            {
                let mut b = self.block.lock().unwrap();
                if b.0 < b.1 {
                    b.0 += 1;
                    return index.cipher.id_of(b.0 - 1);
                }
            }
            let _refilling = self.refill.lock().await;
            {
                let b = self.block.lock().unwrap();
                if b.0 < b.1 {
                    continue;
                }
            }
            match numbers::reserve(store, CHUNK).await {
                Ok(start) => {
                    index.cover(start + CHUNK);
                    *self.block.lock().unwrap() = (start, start + CHUNK);
                }
                Err(e) => {
                    tracing::warn!(error = %e, "cannot reserve visitor numbers; this visitor gets a random id");
                    return super::signed::Signer::new_visitor_id();
                }
            }
        }
    }

    /// Drops the rest of the current block (after a seed replaced the
    /// answers and moved the counter past its visitors).
    pub fn drop_block(&self) {
        *self.block.lock().unwrap() = (0, 0);
    }
}

/// Loads the array again whenever it was taken out of use, retrying every
/// second while the store fails.
pub fn spawn_loader(index: Arc<StandingIndex>, store: Store) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        loop {
            index.reload.notified().await;
            loop {
                match numbers::load_standings(&store, &index).await {
                    Ok(n) => {
                        tracing::info!(
                            visitors = n,
                            "visitors' standings loaded into memory again"
                        );
                        break;
                    }
                    Err(e) => {
                        tracing::warn!(error = %e, "loading the visitors' standings failed; retrying");
                        tokio::time::sleep(std::time::Duration::from_secs(1)).await;
                    }
                }
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_standing_survives_its_byte() {
        for state in 0..4 {
            for closes in 0..=super::super::model::CLOSES_MAX_LIMIT {
                let s = Standing {
                    state: AnswerState::from_i64(state).unwrap(),
                    closes,
                    day: 0,
                };
                let b = encode(s);
                assert!(b != NO_ROW && b != ASK_TABLE);
                assert_eq!(decode(b), Some(s));
            }
        }
        assert_eq!(decode(NO_ROW), Some(Standing::default()));
        assert_eq!(decode(ASK_TABLE), None);
    }

    #[test]
    fn only_covered_numbers_are_answered_from_memory() {
        let cipher = IdCipher::new([3; 16]);
        let index = StandingIndex::new(cipher.clone(), 2 * CHUNK);
        index.cover(10);
        let (inside, outside) = (
            index.key_of(cipher.id_of(5)),
            index.key_of(cipher.id_of(CHUNK + 5)),
        );
        assert_eq!((inside, outside), (5, CHUNK as i64 + 5));
        // Not loaded yet: nothing from memory.
        assert_eq!(index.get(inside), None);
        index.ready.store(true, Ordering::Release);
        assert_eq!(index.get(inside), Some(Standing::default()));
        assert_eq!(index.get(outside), None);
        let s = Standing {
            state: AnswerState::No,
            closes: 2,
            day: 20_000,
        };
        index.record(inside, Some(s));
        assert_eq!(index.get(inside), Some(s));
        index.ask_table(inside);
        assert_eq!(index.get(inside), None);
        // Growth stops at the bound.
        index.cover(100 * CHUNK);
        assert_eq!(index.bytes(), 2 * CHUNK * 3);
        assert_eq!(index.get(outside), Some(Standing::default()));
        index.invalidate();
        assert_eq!(index.get(outside), None);
    }
}
