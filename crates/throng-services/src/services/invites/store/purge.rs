//! The retention purge: a site's answers older than its retention, read
//! in small key ranges and deleted in small writes, so neither a read
//! connection nor the writer is held for long.

use super::{InvitesStore, Standings, Touching};
use crate::services::invites::visitor_ids::reserved_end;
use crate::store::{Columns, Sql, StoreError};

/// Visitors purged per write.
pub const PURGE_CHUNK_ROWS: i64 = 1000;

/// Key ranges the purge scans one at a time over random keys (ids): a read
/// covers 2^63 / 4096 of them (~1,500 rows of 6M), so no read holds a
/// connection (or an async worker, on SQLite) for long.
pub const PURGE_RANGES: i64 = 4096;
/// Keys per purge read over the dense keys (visitor numbers).
pub const PURGE_DENSE_KEYS: i64 = 4096;

static STALE_VISITORS: Sql = Sql::new(
    "SELECT visitor_id FROM invites_answers
     WHERE visitor_id BETWEEN ?3 AND ?4 AND site_id = ?1 AND updated_at_ms < ?2",
);
/// One visitor's stale answer, where each deleted row clears its byte in
/// memory.
static DELETE_STALE_ONE: Sql = Sql::new(
    "DELETE FROM invites_answers WHERE visitor_id = ?1 AND site_id = ?2 AND updated_at_ms < ?3",
);
/// A chunk's stale answers in one statement, PostgreSQL's (an array).
static DELETE_STALE_SET: Sql = Sql::new(
    "DELETE FROM invites_answers
     WHERE visitor_id = ANY(?1) AND site_id = ?2 AND updated_at_ms < ?3",
);

/// The key ranges a purge reads: the dense keys `1..dense_end` (visitor
/// numbers handed out) in steps of `PURGE_DENSE_KEYS`, then the rest of
/// the key space in `PURGE_RANGES` equal parts (random keys).
pub fn purge_ranges(dense_end: i64) -> Vec<(i64, i64)> {
    let mut ranges = Vec::new();
    let mut lo = 1;
    while lo < dense_end {
        let hi = (lo + PURGE_DENSE_KEYS - 1).min(dense_end - 1);
        ranges.push((lo, hi));
        lo = hi + 1;
    }
    let width = i64::MAX / PURGE_RANGES + 1;
    for r in 0..PURGE_RANGES {
        let lo = (r * width).max(dense_end.max(0));
        let hi = (r * width).saturating_add(width - 1);
        if lo <= hi {
            ranges.push((lo, hi));
        }
    }
    ranges
}

impl InvitesStore {
    /// Deletes `site_id`'s answers older than `before_ms`, range by range
    /// and at most `PURGE_CHUNK_ROWS` per write; the rows deleted.
    pub async fn purge_before(&self, site_id: i64, before_ms: i64) -> Result<u64, StoreError> {
        let dense_end = match &self.standings {
            Standings::InMemory(_) => reserved_end(&self.store).await? as i64,
            // Visitors keyed by random id: no dense keys.
            Standings::InTable => 0,
        };
        let mut deleted = 0u64;
        for range in purge_ranges(dense_end) {
            let ids = self.stale_visitors(site_id, before_ms, range).await?;
            for chunk in ids.chunks(PURGE_CHUNK_ROWS as usize) {
                deleted += self
                    .delete_stale(site_id, before_ms, chunk.to_vec())
                    .await?;
            }
        }
        Ok(deleted)
    }

    /// Visitors of `site_id` in `lo..=hi` whose answers are older than
    /// `before_ms`.
    async fn stale_visitors(
        &self,
        site_id: i64,
        before_ms: i64,
        (lo, hi): (i64, i64),
    ) -> Result<Vec<i64>, StoreError> {
        // Paged, not mapped: a purge reads every row once (see
        // `Store::read_paged`).
        self.store
            .read_paged(move |c| {
                Box::pin(async move {
                    c.query(&STALE_VISITORS, &[&site_id, &before_ms, &lo, &hi], |r| {
                        r.int(0)
                    })
                    .await
                })
            })
            .await
    }

    /// Deletes the answers of `ids` for `site_id` still older than
    /// `before_ms`, in one erasing write (`Store::write_erasing`: on SQLite
    /// no file of the store holds them when it answers); the rows deleted. Where standings are
    /// kept in memory, row by row, each deleted row clearing its byte; else
    /// in one statement.
    async fn delete_stale(
        &self,
        site_id: i64,
        before_ms: i64,
        ids: Vec<i64>,
    ) -> Result<u64, StoreError> {
        match &self.standings {
            Standings::InMemory(m) => {
                let touching = Touching::new(Some(&m.index));
                let touch = touching.in_writer();
                let r = self
                    .store
                    .write_erasing(move |tx| {
                        let (touch, ids) = (touch.clone(), ids.clone());
                        Box::pin(async move {
                            let mut deleted = 0u64;
                            for id in &ids {
                                let gone = tx
                                    .execute(&DELETE_STALE_ONE, &[id, &site_id, &before_ms])
                                    .await?;
                                if gone == 1 {
                                    if let Some(index) = touch.index() {
                                        index.record(*id, None);
                                    }
                                }
                                deleted += gone;
                            }
                            Ok(deleted)
                        })
                    })
                    .await;
                touching.settle(r)
            }
            Standings::InTable => {
                self.store
                    .write_erasing(move |tx| {
                        let ids = ids.clone();
                        Box::pin(async move {
                            tx.execute(&DELETE_STALE_SET, &[&ids, &site_id, &before_ms])
                                .await
                        })
                    })
                    .await
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn purge_ranges_cover_every_key_once() {
        for dense_end in [0i64, 1, 2, 4097, 6_000_001] {
            let ranges = purge_ranges(dense_end);
            let first = if dense_end > 1 { 1 } else { 0.max(dense_end) };
            assert_eq!(ranges[0].0, first, "dense_end {dense_end}");
            for w in ranges.windows(2) {
                assert_eq!(w[0].1 + 1, w[1].0, "dense_end {dense_end}: {w:?}");
            }
            assert_eq!(ranges.last().unwrap().1, i64::MAX);
            let dense = ranges.iter().filter(|r| r.1 < dense_end).count() as i64;
            assert_eq!(
                dense,
                ((dense_end - 1).max(0) + PURGE_DENSE_KEYS - 1) / PURGE_DENSE_KEYS
            );
            assert!(ranges
                .iter()
                .filter(|r| r.1 < dense_end)
                .all(|r| r.1 - r.0 < PURGE_DENSE_KEYS));
        }
    }
}
