//! Invites SQL for both dialects: sites, a visitor's standing (one point
//! lookup), an answer (one command in the group commit, with the site's
//! counts), forgetting a visitor, the retention purge and the counts.
//!
//! An answer on SQLite is decided in the single writer by
//! `model::apply_answer`; on PostgreSQL by one upsert whose `CASE`s state
//! the same rules (commands of one batch are pipelined on one connection,
//! so a read-then-write of two commands could interleave; one statement
//! cannot). Nodes racing on one visitor meet at the row's lock.

use rusqlite::OptionalExtension;

use std::sync::Arc;

use super::index::StandingIndex;
use super::model::{apply_answer, Answer, AnswerState, Outcome, Site, Standing};
use crate::store::{Store, StoreError};

/// Visitors purged per statement by the retention job.
pub const PURGE_CHUNK_ROWS: i64 = 1000;

/// A site as stored.
#[derive(Clone, Debug)]
pub struct SiteRow {
    pub site_id: i64,
    pub site: Site,
    pub created_at_ms: i64,
    pub updated_at_ms: i64,
}

fn parse_config(site_id: i64, text: &str) -> Result<Site, StoreError> {
    serde_json::from_str(text)
        .map_err(|e| StoreError::Internal(format!("invites_sites {site_id}: config: {e}")))
}

fn config_json(site: &Site) -> String {
    serde_json::to_string(site).expect("a site serializes")
}

pub async fn load_sites(store: &Store) -> Result<Vec<SiteRow>, StoreError> {
    const SQL: &str =
        "SELECT site_id, config, created_at_ms, updated_at_ms FROM invites_sites ORDER BY site_id";
    let raw: Vec<(i64, String, i64, i64)> = match store {
        Store::Sqlite(s) => {
            s.read(|c| {
                let mut stmt = c.prepare_cached(SQL)?;
                let rows = stmt
                    .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)))?
                    .collect::<Result<Vec<_>, _>>()?;
                Ok(rows)
            })
            .await?
        }
        Store::Postgres(p) => p
            .client()
            .await?
            .query(SQL, &[])
            .await?
            .iter()
            .map(|r| (r.get(0), r.get(1), r.get(2), r.get(3)))
            .collect(),
    };
    raw.into_iter()
        .map(|(site_id, config, created_at_ms, updated_at_ms)| {
            Ok(SiteRow {
                site_id,
                site: parse_config(site_id, &config)?,
                created_at_ms,
                updated_at_ms,
            })
        })
        .collect()
}

/// Creates a site; its id is the next after the highest. `None` when the
/// store already holds `sites_max` sites.
pub async fn create_site(
    store: &Store,
    site: &Site,
    now_ms: i64,
    sites_max: i64,
) -> Result<Option<i64>, StoreError> {
    let (config, retention) = (config_json(site), site.retention_days);
    match store {
        Store::Sqlite(s) => {
            s.write(move |c| {
                let n: i64 = c.query_row("SELECT COUNT(*) FROM invites_sites", [], |r| r.get(0))?;
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
            })
            .await
        }
        Store::Postgres(p) => {
            // Two nodes may take the same next id: the loser's insert does
            // nothing and it tries the next.
            for _ in 0..16 {
                let config = config.clone();
                let made = p
                    .write(move |tx| {
                        let config = config.clone();
                        Box::pin(async move {
                            let n: i64 = tx
                                .tx
                                .query_one("SELECT COUNT(*) FROM invites_sites", &[])
                                .await?
                                .get(0);
                            if n >= sites_max {
                                return Ok(Err(()));
                            }
                            let row = tx
                                .tx
                                .query_opt(
                                    "INSERT INTO invites_sites (site_id, config, retention_days, created_at_ms, updated_at_ms)
                                     SELECT COALESCE(MAX(site_id), 0) + 1, $1, $2, $3, $3 FROM invites_sites
                                     ON CONFLICT (site_id) DO NOTHING RETURNING site_id",
                                    &[&config, &(retention as i32), &now_ms],
                                )
                                .await?;
                            Ok(Ok(row.map(|r| r.get::<_, i64>(0))))
                        })
                    })
                    .await?;
                match made {
                    Err(()) => return Ok(None),
                    Ok(Some(id)) => return Ok(Some(id)),
                    Ok(None) => continue,
                }
            }
            Err(StoreError::Unavailable(
                "could not take a site id (too many concurrent creations); retry".into(),
            ))
        }
    }
}

/// Replaces a site's settings; false when there is no such site.
pub async fn update_site(
    store: &Store,
    site_id: i64,
    site: &Site,
    now_ms: i64,
) -> Result<bool, StoreError> {
    let (config, retention) = (config_json(site), site.retention_days);
    match store {
        Store::Sqlite(s) => {
            s.write(move |c| {
                Ok(c.execute(
                    "UPDATE invites_sites SET config = ?2, retention_days = ?3, updated_at_ms = ?4 WHERE site_id = ?1",
                    rusqlite::params![site_id, config, retention, now_ms],
                )? == 1)
            })
            .await
        }
        Store::Postgres(p) => {
            p.write(move |tx| {
                let config = config.clone();
                Box::pin(async move {
                    Ok(tx
                        .tx
                        .execute(
                            "UPDATE invites_sites SET config = $2, retention_days = $3, updated_at_ms = $4 WHERE site_id = $1",
                            &[&site_id, &config, &(retention as i32), &now_ms],
                        )
                        .await?
                        == 1)
                })
            })
            .await
        }
    }
}

fn standing_from(state: i64, closes: i64) -> Result<Standing, StoreError> {
    Ok(Standing {
        state: AnswerState::from_i64(state)
            .ok_or_else(|| StoreError::Internal(format!("invites_answers.state {state}")))?,
        closes,
    })
}

/// A visitor's standing with a site (the default when it never answered).
pub async fn standing(
    store: &Store,
    site_id: i64,
    visitor_id: i64,
) -> Result<Standing, StoreError> {
    let row: Option<(i64, i64)> = match store {
        // Not through the memory map: 6M visitors' rows would all end up
        // in the server's resident memory (see `read_paged`).
        Store::Sqlite(s) => {
            s.read_paged(move |c| {
                Ok(c.prepare_cached(
                    "SELECT state, closes FROM invites_answers WHERE visitor_id = ?1 AND site_id = ?2",
                )?
                .query_row([visitor_id, site_id], |r| Ok((r.get(0)?, r.get(1)?)))
                .optional()?)
            })
            .await?
        }
        Store::Postgres(p) => {
            let client = p.client().await?;
            let stmt = client
                .prepare_cached(
                    "SELECT state, closes FROM invites_answers WHERE visitor_id = $1 AND site_id = $2",
                )
                .await?;
            client
                .query_opt(&stmt, &[&visitor_id, &site_id])
                .await?
                .map(|r| (r.get::<_, i16>(0) as i64, r.get::<_, i16>(1) as i64))
        }
    };
    match row {
        Some((state, closes)) => standing_from(state, closes),
        None => Ok(Standing::default()),
    }
}

/// One answer to record.
#[derive(Clone, Copy, Debug)]
pub struct AnswerCmd {
    pub site_id: i64,
    /// The visitor's key in `invites_answers` (`InvitesState::visitor_key`:
    /// its number on SQLite, its id on PostgreSQL).
    pub visitor_id: i64,
    pub display: i64,
    pub answer: Answer,
    pub closes_max: i64,
    pub now_ms: i64,
    /// The counts row this node adds to (`invites_counts.shard`).
    pub shard: i32,
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

const ADD_COUNTS_SQLITE: &str =
    "INSERT INTO invites_counts (site_id, shard, yes, no, closes, closed_out)
     VALUES (?1, ?2, ?3, ?4, ?5, ?6)
     ON CONFLICT (site_id, shard) DO UPDATE SET yes = yes + excluded.yes, no = no + excluded.no,
        closes = closes + excluded.closes, closed_out = closed_out + excluded.closed_out";
const ADD_COUNTS_PG: &str =
    "INSERT INTO invites_counts (site_id, shard, yes, no, closes, closed_out)
     VALUES ($1, $2, $3, $4, $5, $6)
     ON CONFLICT (site_id, shard) DO UPDATE SET yes = invites_counts.yes + excluded.yes,
        no = invites_counts.no + excluded.no, closes = invites_counts.closes + excluded.closes,
        closed_out = invites_counts.closed_out + excluded.closed_out";

/// The PostgreSQL form of `model::apply_answer`: $5 the display, $7 the
/// answer (0 close, 1 yes, 2 no), $8 closesMax; `last_outcome` reports 0
/// counted, 1 repeated display, 2 final already.
const ANSWER_PG: &str = "INSERT INTO invites_answers AS a
        (visitor_id, site_id, state, closes, displays, updated_at_ms, last_outcome)
     VALUES ($1, $2, $3::SMALLINT, $4::SMALLINT, ARRAY[$5::BIGINT], $6, 0)
     ON CONFLICT (visitor_id, site_id) DO UPDATE SET
        state = CASE WHEN $5 = ANY(a.displays) OR a.state <> 0 THEN a.state
                     WHEN $7::SMALLINT = 0 THEN CASE WHEN a.closes + 1 >= $8::SMALLINT THEN 3 ELSE 0 END
                     ELSE $7::SMALLINT END,
        closes = CASE WHEN $5 = ANY(a.displays) OR a.state <> 0 OR $7 <> 0 THEN a.closes
                      ELSE a.closes + 1 END,
        displays = CASE WHEN $5 = ANY(a.displays) OR a.state <> 0 THEN a.displays
                        ELSE array_append(a.displays, $5) END,
        updated_at_ms = CASE WHEN $5 = ANY(a.displays) OR a.state <> 0 THEN a.updated_at_ms
                             ELSE $6 END,
        last_outcome = CASE WHEN $5 = ANY(a.displays) THEN 1 WHEN a.state <> 0 THEN 2 ELSE 0 END
     RETURNING state, closes, last_outcome";

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

/// Records an answer with the site's counts, in one transaction; on
/// SQLite also the visitor's standing in memory (`index`), in the writer.
pub async fn answer(
    store: &Store,
    cmd: AnswerCmd,
    index: Option<Arc<StandingIndex>>,
) -> Result<(Standing, Outcome), StoreError> {
    match store {
        Store::Sqlite(s) => {
            let touching = Touching::new(index);
            let index = touching.in_writer();
            let r = s
                .write(move |c| {
                    let (after, outcome) = sqlite_answer(c, &cmd)?;
                    if let (Some(index), Outcome::Counted) = (index(), outcome) {
                        index.record(cmd.visitor_id, Some(after));
                    }
                    Ok((after, outcome))
                })
                .await;
            touching.settle(r)
        }
        Store::Postgres(p) => {
            p.write(move |tx| Box::pin(async move { pg_answer(tx.tx, &cmd).await }))
                .await
        }
    }
}

/// An answer on PostgreSQL, inside `tx` (the writer's batch, or the
/// baseline's own transaction).
pub async fn pg_answer(
    tx: &deadpool_postgres::Transaction<'_>,
    cmd: &AnswerCmd,
) -> Result<(Standing, Outcome), StoreError> {
    // A first answer's row, as apply_answer makes it.
    let (first, _) = apply_answer(
        Standing::default(),
        &[],
        cmd.display,
        cmd.answer,
        cmd.closes_max,
    );
    let code: i16 = match cmd.answer {
        Answer::Close => 0,
        Answer::Yes => 1,
        Answer::No => 2,
    };
    // Prepared once per connection: planning the upsert on the partitioned
    // table took longer than running it.
    let answer_stmt = tx.prepare_cached(ANSWER_PG).await?;
    let row = tx
        .query_one(
            &answer_stmt,
            &[
                &cmd.visitor_id,
                &cmd.site_id,
                &(first.state as i16),
                &(first.closes as i16),
                &cmd.display,
                &cmd.now_ms,
                &code,
                &(cmd.closes_max as i16),
            ],
        )
        .await?;
    let after = standing_from(row.get::<_, i16>(0) as i64, row.get::<_, i16>(1) as i64)?;
    let outcome = match row.get::<_, i16>(2) {
        0 => Outcome::Counted,
        1 => Outcome::Repeated,
        _ => Outcome::Final,
    };
    if outcome == Outcome::Counted {
        let before = Standing {
            state: AnswerState::Asking,
            closes: after.closes - (cmd.answer == Answer::Close) as i64,
        };
        let [yes, no, closes, closed_out] = count_deltas(before, after, outcome);
        let add_counts = tx.prepare_cached(ADD_COUNTS_PG).await?;
        tx.execute(
            &add_counts,
            &[&cmd.site_id, &cmd.shard, &yes, &no, &closes, &closed_out],
        )
        .await?;
    }
    Ok((after, outcome))
}

pub fn sqlite_answer(
    c: &rusqlite::Connection,
    cmd: &AnswerCmd,
) -> Result<(Standing, Outcome), StoreError> {
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
    c.prepare_cached(ADD_COUNTS_SQLITE)?
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

/// Deletes every answer of a visitor (all sites); the rows deleted.
pub async fn forget_visitor(
    store: &Store,
    visitor_id: i64,
    index: Option<Arc<StandingIndex>>,
) -> Result<u64, StoreError> {
    match store {
        Store::Sqlite(s) => {
            let touching = Touching::new(index);
            let index = touching.in_writer();
            let r = s
                .write(move |c| {
                    let n = c.execute(
                        "DELETE FROM invites_answers WHERE visitor_id = ?1",
                        [visitor_id],
                    )? as u64;
                    if let Some(index) = index() {
                        index.forget(visitor_id);
                    }
                    Ok(n)
                })
                .await;
            touching.settle(r)
        }
        Store::Postgres(p) => {
            p.write(move |tx| {
                Box::pin(async move {
                    Ok(tx
                        .tx
                        .execute(
                            "DELETE FROM invites_answers WHERE visitor_id = $1",
                            &[&visitor_id],
                        )
                        .await?)
                })
            })
            .await
        }
    }
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

/// Visitors of `site_id` in `lo..=hi` whose answers are older than `before_ms`.
async fn stale_visitors(
    store: &Store,
    site_id: i64,
    before_ms: i64,
    (lo, hi): (i64, i64),
) -> Result<Vec<i64>, StoreError> {
    match store {
        // Paged, not mapped: a purge reads every row once (see `read_paged`).
        Store::Sqlite(s) => {
            s.read_paged(move |c| {
                let mut stmt = c.prepare_cached(
                    "SELECT visitor_id FROM invites_answers
                     WHERE visitor_id BETWEEN ?3 AND ?4 AND site_id = ?1 AND updated_at_ms < ?2",
                )?;
                let ids = stmt
                    .query_map(rusqlite::params![site_id, before_ms, lo, hi], |r| r.get(0))?
                    .collect::<Result<Vec<i64>, _>>()?;
                Ok(ids)
            })
            .await
        }
        Store::Postgres(p) => Ok(p
            .client()
            .await?
            .query(
                "SELECT visitor_id FROM invites_answers
                 WHERE visitor_id BETWEEN $3 AND $4 AND site_id = $1 AND updated_at_ms < $2",
                &[&site_id, &before_ms, &lo, &hi],
            )
            .await?
            .iter()
            .map(|r| r.get(0))
            .collect()),
    }
}

/// Deletes `site_id`'s answers older than `before_ms`, range by range and
/// at most `PURGE_CHUNK_ROWS` per write (the writer is never held for
/// long); the rows deleted.
pub async fn purge_before(
    store: &Store,
    site_id: i64,
    before_ms: i64,
    index: Option<Arc<StandingIndex>>,
) -> Result<u64, StoreError> {
    let dense_end = match store {
        Store::Sqlite(_) => super::visitor_ids::reserved_end(store).await? as i64,
        Store::Postgres(_) => 0,
    };
    let mut deleted = 0u64;
    for (lo, hi) in purge_ranges(dense_end) {
        let ids = stale_visitors(store, site_id, before_ms, (lo, hi)).await?;
        for chunk in ids.chunks(PURGE_CHUNK_ROWS as usize) {
            let chunk = chunk.to_vec();
            deleted += match store {
                Store::Sqlite(s) => {
                    let touching = Touching::new(index.clone());
                    let index = touching.in_writer();
                    let r = s.write(move |c| {
                        let mut stmt = c.prepare_cached(
                            "DELETE FROM invites_answers WHERE visitor_id = ?1 AND site_id = ?2 AND updated_at_ms < ?3",
                        )?;
                        let mut d = 0u64;
                        for id in &chunk {
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
                    touching.settle(r)?
                }
                Store::Postgres(p) => {
                    p.write(move |tx| {
                        let chunk = chunk.clone();
                        Box::pin(async move {
                            Ok(tx
                                .tx
                                .execute(
                                    "DELETE FROM invites_answers
                                     WHERE visitor_id = ANY($1) AND site_id = $2 AND updated_at_ms < $3",
                                    &[&chunk, &site_id, &before_ms],
                                )
                                .await?)
                        })
                    })
                    .await?
                }
            };
        }
    }
    Ok(deleted)
}

/// Counts kept in memory between flushes: (site, visitors, invited, displays).
pub type SeenDeltas = Vec<(i64, i64, i64, i64)>;

/// Adds counts gathered in memory (first visits, invited, displays).
pub async fn add_seen(store: &Store, shard: i32, deltas: SeenDeltas) -> Result<(), StoreError> {
    match store {
        Store::Sqlite(s) => {
            s.write(move |c| {
                let mut stmt = c.prepare_cached(
                    "INSERT INTO invites_counts (site_id, shard, visitors, invited, displays) VALUES (?1, ?2, ?3, ?4, ?5)
                     ON CONFLICT (site_id, shard) DO UPDATE SET visitors = visitors + excluded.visitors,
                        invited = invited + excluded.invited, displays = displays + excluded.displays",
                )?;
                for (site, v, i, d) in &deltas {
                    stmt.execute(rusqlite::params![site, shard, v, i, d])?;
                }
                Ok(())
            })
            .await
        }
        Store::Postgres(p) => {
            p.write(move |tx| {
                let deltas = deltas.clone();
                Box::pin(async move {
                    for (site, v, i, d) in &deltas {
                        tx.tx
                            .execute(
                                "INSERT INTO invites_counts (site_id, shard, visitors, invited, displays) VALUES ($1, $2, $3, $4, $5)
                                 ON CONFLICT (site_id, shard) DO UPDATE SET visitors = invites_counts.visitors + excluded.visitors,
                                    invited = invites_counts.invited + excluded.invited,
                                    displays = invites_counts.displays + excluded.displays",
                                &[site, &shard, v, i, d],
                            )
                            .await?;
                    }
                    Ok(())
                })
            })
            .await
        }
    }
}

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

pub async fn counts(store: &Store, site_id: i64) -> Result<Counts, StoreError> {
    const SQL_LITE: &str = "SELECT COALESCE(SUM(visitors),0), COALESCE(SUM(invited),0), COALESCE(SUM(displays),0),
        COALESCE(SUM(yes),0), COALESCE(SUM(no),0), COALESCE(SUM(closes),0), COALESCE(SUM(closed_out),0)
        FROM invites_counts WHERE site_id = ?1";
    // SUM of BIGINT is NUMERIC in PostgreSQL: cast back.
    const SQL_PG: &str = "SELECT COALESCE(SUM(visitors),0)::BIGINT, COALESCE(SUM(invited),0)::BIGINT,
        COALESCE(SUM(displays),0)::BIGINT, COALESCE(SUM(yes),0)::BIGINT, COALESCE(SUM(no),0)::BIGINT,
        COALESCE(SUM(closes),0)::BIGINT, COALESCE(SUM(closed_out),0)::BIGINT
        FROM invites_counts WHERE site_id = $1";
    let v: [i64; 7] = match store {
        Store::Sqlite(s) => {
            s.read(move |c| {
                Ok(c.query_row(SQL_LITE, [site_id], |r| {
                    Ok([
                        r.get(0)?,
                        r.get(1)?,
                        r.get(2)?,
                        r.get(3)?,
                        r.get(4)?,
                        r.get(5)?,
                        r.get(6)?,
                    ])
                })?)
            })
            .await?
        }
        Store::Postgres(p) => {
            let r = p.client().await?.query_one(SQL_PG, &[&site_id]).await?;
            [
                r.get(0),
                r.get(1),
                r.get(2),
                r.get(3),
                r.get(4),
                r.get(5),
                r.get(6),
            ]
        }
    };
    Ok(Counts {
        visitors: v[0],
        invited: v[1],
        displays: v[2],
        yes: v[3],
        no: v[4],
        closes: v[5],
        closed_out: v[6],
    })
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
