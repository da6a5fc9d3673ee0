//! Invitations shown and answers per site, day and page
//! (`invites_daily`): gathered in each node's memory (`sites::Seen`) and
//! added every flush, read whole for a range of days.

use crate::store::{Columns, Sql, Store, StoreError};

/// A day's counts for one page: shown, yes, no, closed.
pub type DayCounts = [i64; 4];

/// Counts gathered in memory: (site, day, page, counts).
pub type DailyDeltas = Vec<(i64, i32, String, DayCounts)>;

/// Rows a results read returns at most (days x pages).
pub const RESULT_ROWS_MAX: i64 = 20_000;

static ADD_DAILY: Sql = Sql::new(
    "INSERT INTO invites_daily (site_id, day, page, shard, shown, yes, no, closed)
     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)
     ON CONFLICT (site_id, day, page, shard) DO UPDATE SET
        shown = invites_daily.shown + excluded.shown, yes = invites_daily.yes + excluded.yes,
        no = invites_daily.no + excluded.no, closed = invites_daily.closed + excluded.closed",
);
/// SUM of BIGINT is NUMERIC in PostgreSQL: cast back.
static DAILY_ROWS: Sql = Sql::new(
    "SELECT day, page, CAST(SUM(shown) AS BIGINT), CAST(SUM(yes) AS BIGINT),
        CAST(SUM(no) AS BIGINT), CAST(SUM(closed) AS BIGINT)
     FROM invites_daily WHERE site_id = ?1 AND day BETWEEN ?2 AND ?3
     GROUP BY day, page ORDER BY day, page LIMIT ?4",
);

/// One row of a site's results.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DailyRow {
    pub day: i32,
    pub page: String,
    pub counts: DayCounts,
}

/// Adds counts gathered in memory, in one write.
pub async fn add_daily(store: &Store, shard: i32, deltas: DailyDeltas) -> Result<(), StoreError> {
    store
        .write(move |tx| {
            let deltas = deltas.clone();
            Box::pin(async move {
                for (site, day, page, [shown, yes, no, closed]) in &deltas {
                    let day = *day as i64;
                    tx.execute(
                        &ADD_DAILY,
                        &[site, &day, page, &shard, shown, yes, no, closed],
                    )
                    .await?;
                }
                Ok(())
            })
        })
        .await
}

/// A site's rows from day `from` to `to` (inclusive), by day and page, at
/// most `RESULT_ROWS_MAX` (and whether more were left out).
pub async fn daily_rows(
    store: &Store,
    site_id: i64,
    from: i32,
    to: i32,
) -> Result<(Vec<DailyRow>, bool), StoreError> {
    let (from, to, limit) = (from as i64, to as i64, RESULT_ROWS_MAX + 1);
    let mut rows = store
        .read(move |c| {
            Box::pin(async move {
                c.query(&DAILY_ROWS, &[&site_id, &from, &to, &limit], |r| {
                    Ok(DailyRow {
                        day: r.int(0)? as i32,
                        page: r.text(1)?,
                        counts: [r.int(2)?, r.int(3)?, r.int(4)?, r.int(5)?],
                    })
                })
                .await
            })
        })
        .await?;
    let more = rows.len() as i64 > RESULT_ROWS_MAX;
    rows.truncate(RESULT_ROWS_MAX as usize);
    // By day, then page byte by byte, whatever the database's collation.
    rows.sort_by(|a, b| (a.day, a.page.as_bytes()).cmp(&(b.day, b.page.as_bytes())));
    Ok((rows, more))
}
