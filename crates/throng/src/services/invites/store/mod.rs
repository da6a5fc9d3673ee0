//! Invites storage: the operations the service needs ([`InvitesStore`]),
//! implemented once per dialect (`sqlite.rs`, `postgres.rs`) and chosen
//! once, from the [`Store`], by [`open`]. Handlers and workers hold an
//! `Arc<dyn InvitesStore>` and never ask which store it is: what differs
//! between stores (standings kept in memory, visitor numbers, counts
//! shards) is a method here.
//!
//! SQL that is the same in both dialects is written once below, with
//! SQLite's placeholders (`?1`, turned into `$1` for PostgreSQL by
//! [`crate::store::pg_placeholders`]); rows of one shape are mapped once
//! ([`Columns`]). An answer on SQLite is decided in the single writer by
//! `model::apply_answer`; on PostgreSQL by one upsert whose `CASE`s state
//! the same rules (see `postgres.rs`).

pub mod postgres;
pub mod sqlite;

use std::sync::Arc;

use futures::future::BoxFuture;
use indicatif::ProgressBar;

use super::index::StandingIndex;
use super::model::{AnswerState, Outcome, Site, Standing};
use super::seed::SeedInvitesArgs;
use super::visitor_ids::IdCipher;
use crate::store::{Columns, Store, StoreError};

/// Visitors purged per statement by the retention job.
pub const PURGE_CHUNK_ROWS: i64 = 1000;

/// The invites service's storage. Every method is one operation of the
/// service; a write is one command of the store's group commit unless said
/// otherwise. `index` (the in-memory standings, where kept) is updated by
/// the writes that change a standing, inside the writer.
pub trait InvitesStore: Send + Sync {
    /// Every site, in id order.
    fn load_sites(&self) -> BoxFuture<'_, Result<Vec<SiteRow>, StoreError>>;

    /// Creates a site; its id is the next after the highest. `None` when the
    /// store already holds `sites_max` sites.
    fn create_site(
        &self,
        site: &Site,
        now_ms: i64,
        sites_max: i64,
    ) -> BoxFuture<'_, Result<Option<i64>, StoreError>>;

    /// Replaces a site's settings; false when there is no such site.
    fn update_site(
        &self,
        site_id: i64,
        site: &Site,
        now_ms: i64,
    ) -> BoxFuture<'_, Result<bool, StoreError>>;

    /// A visitor's standing with a site, from the table (the default when
    /// it never answered).
    fn standing(
        &self,
        site_id: i64,
        visitor_id: i64,
    ) -> BoxFuture<'_, Result<Standing, StoreError>>;

    /// Records an answer with the site's counts, in one transaction.
    fn answer(
        &self,
        cmd: AnswerCmd,
        index: Option<Arc<StandingIndex>>,
    ) -> BoxFuture<'_, Result<(Standing, Outcome), StoreError>>;

    /// Records an answer as [`InvitesStore::answer`] does, but in a
    /// transaction of its own committed alone, outside the writer (the
    /// bench's baseline).
    fn answer_alone(
        &self,
        cmd: AnswerCmd,
    ) -> BoxFuture<'_, Result<(Standing, Outcome), StoreError>>;

    /// Deletes every answer of a visitor (all sites); the rows deleted.
    fn forget_visitor(
        &self,
        visitor_id: i64,
        index: Option<Arc<StandingIndex>>,
    ) -> BoxFuture<'_, Result<u64, StoreError>>;

    /// The end of the dense keys (visitor numbers handed out) the purge
    /// reads in small steps; 0 where visitors are keyed by random id.
    fn purge_dense_end(&self) -> BoxFuture<'_, Result<i64, StoreError>>;

    /// Visitors of `site_id` in `lo..=hi` whose answers are older than
    /// `before_ms`.
    fn stale_visitors(
        &self,
        site_id: i64,
        before_ms: i64,
        range: (i64, i64),
    ) -> BoxFuture<'_, Result<Vec<i64>, StoreError>>;

    /// Deletes the answers of `ids` for `site_id` still older than
    /// `before_ms`, in one write; the rows deleted.
    fn delete_stale(
        &self,
        site_id: i64,
        before_ms: i64,
        ids: Vec<i64>,
        index: Option<Arc<StandingIndex>>,
    ) -> BoxFuture<'_, Result<u64, StoreError>>;

    /// Adds counts gathered in memory (first visits, invited, displays).
    fn add_seen(&self, shard: i32, deltas: SeenDeltas) -> BoxFuture<'_, Result<(), StoreError>>;

    /// A site's counts, summed over its shards.
    fn counts(&self, site_id: i64) -> BoxFuture<'_, Result<Counts, StoreError>>;

    /// The `invites_counts` row this node adds to.
    fn counts_shard(&self) -> i32;

    /// Whether this node sees every write of the store (one writer in one
    /// process), so it can keep the visitors' standings in memory
    /// (`index.rs`) and mint numbered visitors.
    fn keeps_standings_in_memory(&self) -> bool;

    /// Loads `index` from the table inside one writer command (see
    /// `index.rs`); the visitors held.
    fn load_standings(&self, index: Arc<StandingIndex>) -> BoxFuture<'_, Result<u64, StoreError>>;

    /// Rekeys rows stored under visitor ids by their numbers under
    /// `cipher`, once per store; the rows rekeyed (see `index.rs`).
    fn rekey_by_number(&self, cipher: IdCipher) -> BoxFuture<'_, Result<usize, StoreError>>;

    /// Reserves `count` visitor numbers durably: the first of them; `None`
    /// where visitors are not numbered (random ids).
    fn reserve_visitor_numbers(&self, count: u64)
        -> BoxFuture<'_, Result<Option<u64>, StoreError>>;

    /// Replaces the sites and every answer with `sites` and the answers of
    /// `args.visitors` seeded visitors, in bulk (`seed.rs`).
    fn seed_answers<'a>(
        &'a self,
        args: &'a SeedInvitesArgs,
        sites: &'a [Site],
        bar: &'a ProgressBar,
        cipher: &'a IdCipher,
    ) -> BoxFuture<'a, anyhow::Result<()>>;
}

/// The invites storage of `store`.
pub fn open(store: &Store) -> Arc<dyn InvitesStore> {
    store.choose(
        |s| Arc::new(sqlite::SqliteInvites::new(s.clone())) as Arc<dyn InvitesStore>,
        |p| Arc::new(postgres::PgInvites::new(p.clone())) as Arc<dyn InvitesStore>,
    )
}

/// A site as stored.
#[derive(Clone, Debug)]
pub struct SiteRow {
    pub site_id: i64,
    pub site: Site,
    pub created_at_ms: i64,
    pub updated_at_ms: i64,
}

/// One answer to record.
#[derive(Clone, Copy, Debug)]
pub struct AnswerCmd {
    pub site_id: i64,
    /// The visitor's key in `invites_answers` (`InvitesState::visitor_key`:
    /// its number where standings are kept in memory, else its id).
    pub visitor_id: i64,
    pub display: i64,
    pub answer: super::model::Answer,
    pub closes_max: i64,
    pub now_ms: i64,
    /// The counts row this node adds to (`invites_counts.shard`).
    pub shard: i32,
}

/// Counts kept in memory between flushes: (site, visitors, invited, displays).
pub type SeenDeltas = Vec<(i64, i64, i64, i64)>;

/// A site's counts: visitors, invited, displays, yes, no, closes, closed out.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counts {
    pub visitors: i64,
    pub invited: i64,
    pub displays: i64,
    pub yes: i64,
    pub no: i64,
    pub closes: i64,
    pub closed_out: i64,
}

/// SQL the same in both dialects.
mod sql {
    pub const LOAD_SITES: &str =
        "SELECT site_id, config, created_at_ms, updated_at_ms FROM invites_sites ORDER BY site_id";
    pub const COUNT_SITES: &str = "SELECT COUNT(*) FROM invites_sites";
    pub const UPDATE_SITE: &str =
        "UPDATE invites_sites SET config = ?2, retention_days = ?3, updated_at_ms = ?4 WHERE site_id = ?1";
    pub const STANDING: &str =
        "SELECT state, closes FROM invites_answers WHERE visitor_id = ?1 AND site_id = ?2";
    pub const ADD_COUNTS: &str =
        "INSERT INTO invites_counts (site_id, shard, yes, no, closes, closed_out)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6)
         ON CONFLICT (site_id, shard) DO UPDATE SET yes = invites_counts.yes + excluded.yes,
            no = invites_counts.no + excluded.no, closes = invites_counts.closes + excluded.closes,
            closed_out = invites_counts.closed_out + excluded.closed_out";
    pub const FORGET_VISITOR: &str = "DELETE FROM invites_answers WHERE visitor_id = ?1";
    pub const STALE_VISITORS: &str = "SELECT visitor_id FROM invites_answers
         WHERE visitor_id BETWEEN ?3 AND ?4 AND site_id = ?1 AND updated_at_ms < ?2";
    pub const ADD_SEEN: &str =
        "INSERT INTO invites_counts (site_id, shard, visitors, invited, displays) VALUES (?1, ?2, ?3, ?4, ?5)
         ON CONFLICT (site_id, shard) DO UPDATE SET visitors = invites_counts.visitors + excluded.visitors,
            invited = invites_counts.invited + excluded.invited,
            displays = invites_counts.displays + excluded.displays";
    /// SUM of BIGINT is NUMERIC in PostgreSQL: cast back.
    pub const COUNTS: &str = "SELECT CAST(COALESCE(SUM(visitors),0) AS BIGINT),
        CAST(COALESCE(SUM(invited),0) AS BIGINT), CAST(COALESCE(SUM(displays),0) AS BIGINT),
        CAST(COALESCE(SUM(yes),0) AS BIGINT), CAST(COALESCE(SUM(no),0) AS BIGINT),
        CAST(COALESCE(SUM(closes),0) AS BIGINT), CAST(COALESCE(SUM(closed_out),0) AS BIGINT)
        FROM invites_counts WHERE site_id = ?1";
}

/// A row of [`sql::LOAD_SITES`].
fn site_row(r: &impl Columns) -> Result<SiteRow, StoreError> {
    let site_id = r.int(0)?;
    Ok(SiteRow {
        site_id,
        site: parse_config(site_id, &r.text(1)?)?,
        created_at_ms: r.int(2)?,
        updated_at_ms: r.int(3)?,
    })
}

/// A row of (state, closes).
fn standing_row(r: &impl Columns) -> Result<Standing, StoreError> {
    standing_from(r.int(0)?, r.int(1)?)
}

/// A row of [`sql::COUNTS`].
fn counts_row(r: &impl Columns) -> Result<Counts, StoreError> {
    Ok(Counts {
        visitors: r.int(0)?,
        invited: r.int(1)?,
        displays: r.int(2)?,
        yes: r.int(3)?,
        no: r.int(4)?,
        closes: r.int(5)?,
        closed_out: r.int(6)?,
    })
}

fn parse_config(site_id: i64, text: &str) -> Result<Site, StoreError> {
    serde_json::from_str(text)
        .map_err(|e| StoreError::Internal(format!("invites_sites {site_id}: config: {e}")))
}

fn config_json(site: &Site) -> String {
    serde_json::to_string(site).expect("a site serializes")
}

fn standing_from(state: i64, closes: i64) -> Result<Standing, StoreError> {
    Ok(Standing {
        state: AnswerState::from_i64(state)
            .ok_or_else(|| StoreError::Internal(format!("invites_answers.state {state}")))?,
        closes,
    })
}

/// What the answer changed in the site's counts.
fn count_deltas(before: Standing, after: Standing, outcome: Outcome) -> [i64; 4] {
    if outcome != Outcome::Counted {
        return [0; 4];
    }
    [
        (after.state == AnswerState::Yes) as i64,
        (after.state == AnswerState::No) as i64,
        after.closes - before.closes,
        (after.state == AnswerState::ClosedOut) as i64,
    ]
}

/// Key ranges the retention purge scans one at a time over random keys
/// (ids): a read covers 2^63 / 4096 of them (~1,500 rows of 6M), so no read
/// holds a connection (or an async worker, on SQLite) for long.
pub const PURGE_RANGES: i64 = 4096;
/// Keys per purge read over the dense keys (visitor numbers, SQLite).
pub const PURGE_DENSE_KEYS: i64 = 4096;

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

/// Deletes `site_id`'s answers older than `before_ms`, range by range and
/// at most `PURGE_CHUNK_ROWS` per write (the writer is never held for
/// long); the rows deleted.
pub async fn purge_before(
    storage: &dyn InvitesStore,
    site_id: i64,
    before_ms: i64,
    index: Option<Arc<StandingIndex>>,
) -> Result<u64, StoreError> {
    let dense_end = storage.purge_dense_end().await?;
    let mut deleted = 0u64;
    for range in purge_ranges(dense_end) {
        let ids = storage.stale_visitors(site_id, before_ms, range).await?;
        for chunk in ids.chunks(PURGE_CHUNK_ROWS as usize) {
            deleted += storage
                .delete_stale(site_id, before_ms, chunk.to_vec(), index.clone())
                .await?;
        }
    }
    Ok(deleted)
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

    #[test]
    fn shared_sql_takes_postgres_placeholders() {
        assert_eq!(
            crate::store::pg_placeholders(sql::STALE_VISITORS),
            "SELECT visitor_id FROM invites_answers
         WHERE visitor_id BETWEEN $3 AND $4 AND site_id = $1 AND updated_at_ms < $2"
        );
        assert_eq!(
            crate::store::pg_placeholders("a ? b ?x ?12"),
            "a ? b ?x $12"
        );
    }
}
