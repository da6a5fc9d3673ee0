//! Invites on a shared PostgreSQL: other nodes write too, so standings are
//! read from the table, visitors get random ids, and each node adds its
//! counts to a shard of its own.
//!
//! An answer is one upsert whose `CASE`s state `model::apply_answer`'s
//! rules: commands of one batch are pipelined on one connection, so a
//! read-then-write of two commands could interleave; one statement cannot.
//! Nodes racing on one visitor meet at the row's lock.

use std::sync::{Arc, LazyLock};

use futures::future::BoxFuture;
use indicatif::ProgressBar;

use super::super::index::StandingIndex;
use super::super::model::{apply_answer, Answer, AnswerState, Outcome, Site, Standing};
use super::super::seed::SeedInvitesArgs;
use super::super::visitor_ids::IdCipher;
use super::{
    config_json, count_deltas, counts_row, site_row, sql, standing_row, AnswerCmd, Counts,
    InvitesStore, SeenDeltas, SiteRow,
};
use crate::store::postgres::PgStore;
use crate::store::{pg_placeholders, StoreError};

/// Rows of `invites_counts` per site: each node adds to one, so nodes do
/// not queue on one row's lock.
const COUNT_SHARDS: i32 = 64;

static UPDATE_SITE: LazyLock<String> = LazyLock::new(|| pg_placeholders(sql::UPDATE_SITE));
static STANDING: LazyLock<String> = LazyLock::new(|| pg_placeholders(sql::STANDING));
static ADD_COUNTS: LazyLock<String> = LazyLock::new(|| pg_placeholders(sql::ADD_COUNTS));
static FORGET_VISITOR: LazyLock<String> = LazyLock::new(|| pg_placeholders(sql::FORGET_VISITOR));
static STALE_VISITORS: LazyLock<String> = LazyLock::new(|| pg_placeholders(sql::STALE_VISITORS));
static ADD_SEEN: LazyLock<String> = LazyLock::new(|| pg_placeholders(sql::ADD_SEEN));
static COUNTS: LazyLock<String> = LazyLock::new(|| pg_placeholders(sql::COUNTS));

/// The PostgreSQL form of `model::apply_answer`: $5 the display, $7 the
/// answer (0 close, 1 yes, 2 no), $8 closesMax; `last_outcome` reports 0
/// counted, 1 repeated display, 2 final already.
const ANSWER: &str = "INSERT INTO invites_answers AS a
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

pub struct PgInvites {
    db: Arc<PgStore>,
    shard: i32,
}

impl PgInvites {
    pub fn new(db: Arc<PgStore>) -> PgInvites {
        PgInvites {
            db,
            shard: (rand::random::<u32>() % COUNT_SHARDS as u32) as i32,
        }
    }
}

/// An answer inside `tx` (the writer's batch, or a transaction of its own).
async fn pg_answer(
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
    let answer_stmt = tx.prepare_cached(ANSWER).await?;
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
    let after = standing_row(&row)?;
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
        let add_counts = tx.prepare_cached(&ADD_COUNTS).await?;
        tx.execute(
            &add_counts,
            &[&cmd.site_id, &cmd.shard, &yes, &no, &closes, &closed_out],
        )
        .await?;
    }
    Ok((after, outcome))
}

impl InvitesStore for PgInvites {
    fn load_sites(&self) -> BoxFuture<'_, Result<Vec<SiteRow>, StoreError>> {
        Box::pin(async move {
            self.db
                .client()
                .await?
                .query(sql::LOAD_SITES, &[])
                .await?
                .iter()
                .map(site_row)
                .collect()
        })
    }

    fn create_site(
        &self,
        site: &Site,
        now_ms: i64,
        sites_max: i64,
    ) -> BoxFuture<'_, Result<Option<i64>, StoreError>> {
        let (config, retention) = (config_json(site), site.retention_days as i32);
        Box::pin(async move {
            // Two nodes may take the same next id: the loser's insert does
            // nothing and it tries the next.
            for _ in 0..16 {
                let config = config.clone();
                let made = self
                    .db
                    .write(move |tx| {
                        let config = config.clone();
                        Box::pin(async move {
                            let n: i64 = tx.tx.query_one(sql::COUNT_SITES, &[]).await?.get(0);
                            if n >= sites_max {
                                return Ok(Err(()));
                            }
                            let row = tx
                                .tx
                                .query_opt(
                                    "INSERT INTO invites_sites (site_id, config, retention_days, created_at_ms, updated_at_ms)
                                     SELECT COALESCE(MAX(site_id), 0) + 1, $1, $2, $3, $3 FROM invites_sites
                                     ON CONFLICT (site_id) DO NOTHING RETURNING site_id",
                                    &[&config, &retention, &now_ms],
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
        })
    }

    fn update_site(
        &self,
        site_id: i64,
        site: &Site,
        now_ms: i64,
    ) -> BoxFuture<'_, Result<bool, StoreError>> {
        let (config, retention) = (config_json(site), site.retention_days as i32);
        Box::pin(self.db.write(move |tx| {
            let config = config.clone();
            Box::pin(async move {
                Ok(tx
                    .tx
                    .execute(
                        UPDATE_SITE.as_str(),
                        &[&site_id, &config, &retention, &now_ms],
                    )
                    .await?
                    == 1)
            })
        }))
    }

    fn standing(
        &self,
        site_id: i64,
        visitor_id: i64,
    ) -> BoxFuture<'_, Result<Standing, StoreError>> {
        Box::pin(async move {
            let client = self.db.client().await?;
            let stmt = client.prepare_cached(&STANDING).await?;
            match client.query_opt(&stmt, &[&visitor_id, &site_id]).await? {
                Some(r) => standing_row(&r),
                None => Ok(Standing::default()),
            }
        })
    }

    fn answer(
        &self,
        cmd: AnswerCmd,
        _index: Option<Arc<StandingIndex>>,
    ) -> BoxFuture<'_, Result<(Standing, Outcome), StoreError>> {
        Box::pin(
            self.db
                .write(move |tx| Box::pin(async move { pg_answer(tx.tx, &cmd).await })),
        )
    }

    fn answer_alone(
        &self,
        cmd: AnswerCmd,
    ) -> BoxFuture<'_, Result<(Standing, Outcome), StoreError>> {
        Box::pin(async move {
            let mut client = self.db.client().await?;
            let tx = client.transaction().await.map_err(StoreError::from)?;
            let outcome = pg_answer(&tx, &cmd).await?;
            tx.commit().await.map_err(StoreError::from)?;
            Ok(outcome)
        })
    }

    fn forget_visitor(
        &self,
        visitor_id: i64,
        _index: Option<Arc<StandingIndex>>,
    ) -> BoxFuture<'_, Result<u64, StoreError>> {
        Box::pin(self.db.write(move |tx| {
            Box::pin(async move {
                Ok(tx
                    .tx
                    .execute(FORGET_VISITOR.as_str(), &[&visitor_id])
                    .await?)
            })
        }))
    }

    fn purge_dense_end(&self) -> BoxFuture<'_, Result<i64, StoreError>> {
        Box::pin(async { Ok(0) })
    }

    fn stale_visitors(
        &self,
        site_id: i64,
        before_ms: i64,
        (lo, hi): (i64, i64),
    ) -> BoxFuture<'_, Result<Vec<i64>, StoreError>> {
        Box::pin(async move {
            Ok(self
                .db
                .client()
                .await?
                .query(STALE_VISITORS.as_str(), &[&site_id, &before_ms, &lo, &hi])
                .await?
                .iter()
                .map(|r| r.get(0))
                .collect())
        })
    }

    fn delete_stale(
        &self,
        site_id: i64,
        before_ms: i64,
        ids: Vec<i64>,
        _index: Option<Arc<StandingIndex>>,
    ) -> BoxFuture<'_, Result<u64, StoreError>> {
        Box::pin(self.db.write(move |tx| {
            let ids = ids.clone();
            Box::pin(async move {
                Ok(tx
                    .tx
                    .execute(
                        "DELETE FROM invites_answers
                         WHERE visitor_id = ANY($1) AND site_id = $2 AND updated_at_ms < $3",
                        &[&ids, &site_id, &before_ms],
                    )
                    .await?)
            })
        }))
    }

    fn add_seen(&self, shard: i32, deltas: SeenDeltas) -> BoxFuture<'_, Result<(), StoreError>> {
        Box::pin(self.db.write(move |tx| {
            let deltas = deltas.clone();
            Box::pin(async move {
                for (site, v, i, d) in &deltas {
                    tx.tx
                        .execute(ADD_SEEN.as_str(), &[site, &shard, v, i, d])
                        .await?;
                }
                Ok(())
            })
        }))
    }

    fn counts(&self, site_id: i64) -> BoxFuture<'_, Result<Counts, StoreError>> {
        Box::pin(async move {
            let row = self
                .db
                .client()
                .await?
                .query_one(COUNTS.as_str(), &[&site_id])
                .await?;
            counts_row(&row)
        })
    }

    fn counts_shard(&self) -> i32 {
        self.shard
    }

    fn keeps_standings_in_memory(&self) -> bool {
        false
    }

    fn load_standings(&self, _index: Arc<StandingIndex>) -> BoxFuture<'_, Result<u64, StoreError>> {
        Box::pin(async {
            Err(StoreError::Internal(
                "the in-memory standings are for the embedded store".into(),
            ))
        })
    }

    fn rekey_by_number(&self, _cipher: IdCipher) -> BoxFuture<'_, Result<usize, StoreError>> {
        Box::pin(async { Ok(0) })
    }

    fn reserve_visitor_numbers(
        &self,
        _count: u64,
    ) -> BoxFuture<'_, Result<Option<u64>, StoreError>> {
        Box::pin(async { Ok(None) })
    }

    fn seed_answers<'a>(
        &'a self,
        args: &'a SeedInvitesArgs,
        sites: &'a [Site],
        bar: &'a ProgressBar,
        cipher: &'a IdCipher,
    ) -> BoxFuture<'a, anyhow::Result<()>> {
        Box::pin(super::super::seed::seed_pg(
            &self.db, args, sites, bar, cipher,
        ))
    }
}
