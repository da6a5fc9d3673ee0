//! Invites on the embedded SQLite store: one writer in one process, so the
//! visitors' standings are kept in memory (`index.rs`), changed inside the
//! writer's commands, and visitors are numbered (`visitor_ids.rs`).

use std::sync::{Arc, Mutex};

use futures::future::BoxFuture;
use indicatif::ProgressBar;
use rusqlite::{Connection, OptionalExtension};

use super::super::index::{mark_keys_numbered, StandingIndex, KEYS_META, KEYS_NUMBERS};
use super::super::model::{apply_answer, Outcome, Site, Standing};
use super::super::seed::SeedInvitesArgs;
use super::super::visitor_ids::{parse_next, IdCipher, NEXT_META};
use super::{
    config_json, count_deltas, counts_row, site_row, sql, standing_from, standing_row, AnswerCmd,
    Counts, InvitesStore, SeenDeltas, SiteRow,
};
use crate::store::sqlite::SqliteStore;
use crate::store::StoreError;

pub struct SqliteInvites {
    db: Arc<SqliteStore>,
    /// The bench baseline's own connection (opened on first use).
    alone: Arc<Mutex<Option<Connection>>>,
}

impl SqliteInvites {
    pub fn new(db: Arc<SqliteStore>) -> SqliteInvites {
        SqliteInvites {
            db,
            alone: Arc::default(),
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
    touched: Arc<std::sync::atomic::AtomicBool>,
}

impl Touching {
    fn new(index: Option<Arc<StandingIndex>>) -> Touching {
        Touching {
            index,
            touched: Arc::default(),
        }
    }

    /// For the writer command: the index, marked as touched.
    fn in_writer(&self) -> impl Fn() -> Option<Arc<StandingIndex>> + Send + 'static {
        let (index, touched) = (self.index.clone(), self.touched.clone());
        move || {
            touched.store(true, std::sync::atomic::Ordering::Release);
            index.clone()
        }
    }

    fn settle<T>(&self, r: Result<T, StoreError>) -> Result<T, StoreError> {
        if r.is_err() && self.touched.load(std::sync::atomic::Ordering::Acquire) {
            if let Some(index) = &self.index {
                index.invalidate();
            }
        }
        r
    }
}

/// An answer on SQLite, on `c` (the writer's transaction, or the
/// baseline's own).
fn sqlite_answer(c: &Connection, cmd: &AnswerCmd) -> Result<(Standing, Outcome), StoreError> {
    let row: Option<(i64, i64, Vec<u8>)> = c
        .prepare_cached(
            "SELECT state, closes, displays FROM invites_answers WHERE visitor_id = ?1 AND site_id = ?2",
        )?
        .query_row([cmd.visitor_id, cmd.site_id], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
        .optional()?;
    let (before, mut displays) = match row {
        Some((state, closes, displays)) => (standing_from(state, closes)?, displays),
        None => (Standing::default(), Vec::new()),
    };
    let answered: Vec<i64> = displays
        .chunks_exact(8)
        .map(|b| i64::from_be_bytes(b.try_into().expect("8 bytes")))
        .collect();
    let (after, outcome) = apply_answer(before, &answered, cmd.display, cmd.answer, cmd.closes_max);
    if outcome != Outcome::Counted {
        return Ok((after, outcome));
    }
    displays.extend_from_slice(&cmd.display.to_be_bytes());
    c.prepare_cached(
        "INSERT INTO invites_answers (visitor_id, site_id, state, closes, displays, updated_at_ms)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6)
         ON CONFLICT (visitor_id, site_id) DO UPDATE SET state = excluded.state,
            closes = excluded.closes, displays = excluded.displays, updated_at_ms = excluded.updated_at_ms",
    )?
    .execute(rusqlite::params![
        cmd.visitor_id,
        cmd.site_id,
        after.state as i64,
        after.closes,
        displays,
        cmd.now_ms
    ])?;
    let [yes, no, closes, closed_out] = count_deltas(before, after, outcome);
    c.prepare_cached(sql::ADD_COUNTS)?
        .execute(rusqlite::params![
            cmd.site_id,
            cmd.shard,
            yes,
            no,
            closes,
            closed_out
        ])?;
    Ok((after, outcome))
}

impl InvitesStore for SqliteInvites {
    fn load_sites(&self) -> BoxFuture<'_, Result<Vec<SiteRow>, StoreError>> {
        Box::pin(self.db.read(|c| {
            crate::store::sqlite::all(&mut *c.prepare_cached(sql::LOAD_SITES)?, [], |r| {
                site_row(r)
            })
        }))
    }

    fn create_site(
        &self,
        site: &Site,
        now_ms: i64,
        sites_max: i64,
    ) -> BoxFuture<'_, Result<Option<i64>, StoreError>> {
        let (config, retention) = (config_json(site), site.retention_days);
        Box::pin(self.db.write(move |c| {
            let n: i64 = c.query_row(sql::COUNT_SITES, [], |r| r.get(0))?;
            if n >= sites_max {
                return Ok(None);
            }
            Ok(Some(c.query_row(
                "INSERT INTO invites_sites (site_id, config, retention_days, created_at_ms, updated_at_ms)
                 SELECT COALESCE(MAX(site_id), 0) + 1, ?1, ?2, ?3, ?3 FROM invites_sites
                 RETURNING site_id",
                rusqlite::params![config, retention, now_ms],
                |r| r.get(0),
            )?))
        }))
    }

    fn update_site(
        &self,
        site_id: i64,
        site: &Site,
        now_ms: i64,
    ) -> BoxFuture<'_, Result<bool, StoreError>> {
        let (config, retention) = (config_json(site), site.retention_days);
        Box::pin(self.db.write(move |c| {
            Ok(c.execute(
                sql::UPDATE_SITE,
                rusqlite::params![site_id, config, retention, now_ms],
            )? == 1)
        }))
    }

    fn standing(
        &self,
        site_id: i64,
        visitor_id: i64,
    ) -> BoxFuture<'_, Result<Standing, StoreError>> {
        // Not through the memory map: 6M visitors' rows would all end up
        // in the server's resident memory (see `read_paged`).
        Box::pin(self.db.read_paged(move |c| {
            let mut stmt = c.prepare_cached(sql::STANDING)?;
            let mut rows = stmt.query([visitor_id, site_id])?;
            match rows.next()? {
                Some(r) => standing_row(r),
                None => Ok(Standing::default()),
            }
        }))
    }

    fn answer(
        &self,
        cmd: AnswerCmd,
        index: Option<Arc<StandingIndex>>,
    ) -> BoxFuture<'_, Result<(Standing, Outcome), StoreError>> {
        Box::pin(async move {
            let touching = Touching::new(index);
            let index = touching.in_writer();
            let r = self
                .db
                .write(move |c| {
                    let (after, outcome) = sqlite_answer(c, &cmd)?;
                    if let (Some(index), Outcome::Counted) = (index(), outcome) {
                        index.record(cmd.visitor_id, Some(after));
                    }
                    Ok((after, outcome))
                })
                .await;
            touching.settle(r)
        })
    }

    fn answer_alone(
        &self,
        cmd: AnswerCmd,
    ) -> BoxFuture<'_, Result<(Standing, Outcome), StoreError>> {
        let (path, alone) = (self.db.path().to_path_buf(), self.alone.clone());
        Box::pin(async move {
            tokio::task::spawn_blocking(move || {
                let mut guard = alone.lock().unwrap();
                if guard.is_none() {
                    let c = crate::store::sqlite::open_connection(&path, 4 * 1024, false)
                        .map_err(|e| StoreError::Unavailable(e.to_string()))?;
                    *guard = Some(c);
                }
                let c = guard.as_mut().expect("opened above");
                let tx = c.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
                let outcome = sqlite_answer(&tx, &cmd)?;
                tx.commit()?;
                Ok::<_, StoreError>(outcome)
            })
            .await
            .map_err(|e| StoreError::Internal(format!("baseline answer task: {e}")))?
        })
    }

    fn forget_visitor(
        &self,
        visitor_id: i64,
        index: Option<Arc<StandingIndex>>,
    ) -> BoxFuture<'_, Result<u64, StoreError>> {
        Box::pin(async move {
            let touching = Touching::new(index);
            let index = touching.in_writer();
            let r = self
                .db
                .write(move |c| {
                    let n = c.execute(sql::FORGET_VISITOR, [visitor_id])? as u64;
                    if let Some(index) = index() {
                        index.forget(visitor_id);
                    }
                    Ok(n)
                })
                .await;
            touching.settle(r)
        })
    }

    fn purge_dense_end(&self) -> BoxFuture<'_, Result<i64, StoreError>> {
        Box::pin(self.db.read(|c| {
            let next: Option<String> = c
                .query_row("SELECT value FROM meta WHERE key = ?1", [NEXT_META], |r| {
                    r.get(0)
                })
                .optional()?;
            Ok(parse_next(next) as i64)
        }))
    }

    fn stale_visitors(
        &self,
        site_id: i64,
        before_ms: i64,
        (lo, hi): (i64, i64),
    ) -> BoxFuture<'_, Result<Vec<i64>, StoreError>> {
        // Paged, not mapped: a purge reads every row once (see `read_paged`).
        Box::pin(self.db.read_paged(move |c| {
            let mut stmt = c.prepare_cached(sql::STALE_VISITORS)?;
            let ids = stmt
                .query_map(rusqlite::params![site_id, before_ms, lo, hi], |r| r.get(0))?
                .collect::<Result<Vec<i64>, _>>()?;
            Ok(ids)
        }))
    }

    fn delete_stale(
        &self,
        site_id: i64,
        before_ms: i64,
        ids: Vec<i64>,
        index: Option<Arc<StandingIndex>>,
    ) -> BoxFuture<'_, Result<u64, StoreError>> {
        Box::pin(async move {
            let touching = Touching::new(index);
            let index = touching.in_writer();
            let r = self
                .db
                .write(move |c| {
                    let mut stmt = c.prepare_cached(
                        "DELETE FROM invites_answers WHERE visitor_id = ?1 AND site_id = ?2 AND updated_at_ms < ?3",
                    )?;
                    let mut d = 0u64;
                    for id in &ids {
                        let gone = stmt.execute([*id, site_id, before_ms])? as u64;
                        if gone == 1 {
                            if let Some(index) = index() {
                                index.record(*id, None);
                            }
                        }
                        d += gone;
                    }
                    Ok(d)
                })
                .await;
            touching.settle(r)
        })
    }

    fn add_seen(&self, shard: i32, deltas: SeenDeltas) -> BoxFuture<'_, Result<(), StoreError>> {
        Box::pin(self.db.write(move |c| {
            let mut stmt = c.prepare_cached(sql::ADD_SEEN)?;
            for (site, v, i, d) in &deltas {
                stmt.execute(rusqlite::params![site, shard, v, i, d])?;
            }
            Ok(())
        }))
    }

    fn counts(&self, site_id: i64) -> BoxFuture<'_, Result<Counts, StoreError>> {
        Box::pin(self.db.read(move |c| {
            let mut stmt = c.prepare_cached(sql::COUNTS)?;
            let mut rows = stmt.query([site_id])?;
            match rows.next()? {
                Some(r) => counts_row(r),
                None => Err(StoreError::Internal("invites counts: no row".into())),
            }
        }))
    }

    fn counts_shard(&self) -> i32 {
        0
    }

    fn keeps_standings_in_memory(&self) -> bool {
        true
    }

    fn load_standings(&self, index: Arc<StandingIndex>) -> BoxFuture<'_, Result<u64, StoreError>> {
        Box::pin(self.db.write(move |c| index.load_in_writer(c)))
    }

    /// Two passes, so no intermediate key meets another row's: all keys
    /// negated first (ids are positive), then each set to its number
    /// (distinct, as the cipher is a permutation).
    fn rekey_by_number(&self, cipher: IdCipher) -> BoxFuture<'_, Result<usize, StoreError>> {
        Box::pin(self.db.write(move |c| {
            use rusqlite::functions::FunctionFlags;
            let keys: Option<String> = c
                .query_row("SELECT value FROM meta WHERE key = ?1", [KEYS_META], |r| r.get(0))
                .optional()?;
            if keys.as_deref() == Some(KEYS_NUMBERS) {
                return Ok(0);
            }
            c.create_scalar_function(
                "throng_invites_number",
                1,
                FunctionFlags::SQLITE_UTF8 | FunctionFlags::SQLITE_DETERMINISTIC,
                move |ctx| Ok(cipher.number_of(ctx.get::<i64>(0)?) as i64),
            )?;
            let rekeyed = (|| -> Result<usize, StoreError> {
                c.execute("UPDATE invites_answers SET visitor_id = -visitor_id WHERE visitor_id > 0", [])?;
                Ok(c.execute(
                    "UPDATE invites_answers SET visitor_id = throng_invites_number(-visitor_id) WHERE visitor_id < 0",
                    [],
                )?)
            })();
            c.remove_function("throng_invites_number", 1)?;
            let rekeyed = rekeyed?;
            mark_keys_numbered(c)?;
            Ok(rekeyed)
        }))
    }

    fn reserve_visitor_numbers(
        &self,
        count: u64,
    ) -> BoxFuture<'_, Result<Option<u64>, StoreError>> {
        let count = count as i64;
        Box::pin(self.db.write(move |c| {
            let next: i64 = c.query_row(
                "INSERT INTO meta (key, value) VALUES (?1, CAST(1 + ?2 AS TEXT))
                 ON CONFLICT (key) DO UPDATE SET value = CAST(CAST(value AS INTEGER) + ?2 AS TEXT)
                 RETURNING CAST(value AS INTEGER)",
                rusqlite::params![NEXT_META, count],
                |r| r.get(0),
            )?;
            Ok(Some((next - count) as u64))
        }))
    }

    fn seed_answers<'a>(
        &'a self,
        args: &'a SeedInvitesArgs,
        sites: &'a [Site],
        bar: &'a ProgressBar,
        cipher: &'a IdCipher,
    ) -> BoxFuture<'a, anyhow::Result<()>> {
        let path = self.db.path().to_path_buf();
        let (args, sites, bar, cipher) =
            (args.clone(), sites.to_vec(), bar.clone(), cipher.clone());
        Box::pin(async move {
            tokio::task::spawn_blocking(move || {
                super::super::seed::seed_sqlite(&path, &args, &sites, &bar, &cipher)
            })
            .await?
        })
    }
}
