//! A site's counts: answers counted in the answer's transaction (see
//! `answers.rs`), first visits, invitations and displays gathered in
//! memory and flushed (`sites::flush`).

use crate::store::{Columns, Sql, Store, StoreError, Writers};

/// Rows of `invites_counts` per site where writers are shared: each node
/// adds to one, so nodes do not queue on one row's lock.
const COUNT_SHARDS: u32 = 64;

/// The `invites_counts` row a node adds to: one of `COUNT_SHARDS` at
/// random where writers are shared; 0 where one writer makes every write
/// (nothing to queue on).
pub fn shard_for(writers: Writers) -> i32 {
    match writers {
        Writers::OneProcess => 0,
        Writers::Shared => (rand::random::<u32>() % COUNT_SHARDS) as i32,
    }
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

/// An answer's counts: (site, shard, yes, no, closes, closed out).
pub(super) static ADD_COUNTS: Sql = Sql::new(
    "INSERT INTO invites_counts (site_id, shard, yes, no, closes, closed_out)
     VALUES (?1, ?2, ?3, ?4, ?5, ?6)
     ON CONFLICT (site_id, shard) DO UPDATE SET yes = invites_counts.yes + excluded.yes,
        no = invites_counts.no + excluded.no, closes = invites_counts.closes + excluded.closes,
        closed_out = invites_counts.closed_out + excluded.closed_out",
);
static ADD_SEEN: Sql = Sql::new(
    "INSERT INTO invites_counts (site_id, shard, visitors, invited, displays) VALUES (?1, ?2, ?3, ?4, ?5)
     ON CONFLICT (site_id, shard) DO UPDATE SET visitors = invites_counts.visitors + excluded.visitors,
        invited = invites_counts.invited + excluded.invited,
        displays = invites_counts.displays + excluded.displays",
);
/// SUM of BIGINT is NUMERIC in PostgreSQL: cast back.
static COUNTS: Sql = Sql::new(
    "SELECT CAST(COALESCE(SUM(visitors),0) AS BIGINT),
        CAST(COALESCE(SUM(invited),0) AS BIGINT), CAST(COALESCE(SUM(displays),0) AS BIGINT),
        CAST(COALESCE(SUM(yes),0) AS BIGINT), CAST(COALESCE(SUM(no),0) AS BIGINT),
        CAST(COALESCE(SUM(closes),0) AS BIGINT), CAST(COALESCE(SUM(closed_out),0) AS BIGINT)
        FROM invites_counts WHERE site_id = ?1",
);

/// A row of [`COUNTS`].
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

/// Adds counts gathered in memory (first visits, invited, displays), in
/// one write.
pub async fn add_seen(store: &Store, shard: i32, deltas: SeenDeltas) -> Result<(), StoreError> {
    store
        .write(move |tx| {
            let deltas = deltas.clone();
            Box::pin(async move {
                for (site, v, i, d) in &deltas {
                    tx.execute(&ADD_SEEN, &[site, &shard, v, i, d]).await?;
                }
                Ok(())
            })
        })
        .await
}

/// A site's counts, summed over its shards.
pub async fn counts(store: &Store, site_id: i64) -> Result<Counts, StoreError> {
    store
        .read(move |c| {
            Box::pin(async move { c.query_one(&COUNTS, &[&site_id], |r| counts_row(r)).await })
        })
        .await
}
