//! Visitor numbers and the standings kept in memory ([`Standings::InMemory`]):
//! numbers reserved durably in blocks, rows stored under ids rekeyed by
//! number once per store, and the in-memory standings loaded inside one
//! writer command (`index.rs`).

use std::sync::Arc;

use super::Standings;
use crate::services::invites::index::{StandingIndex, KEYS_META, KEYS_NUMBERS};
use crate::services::invites::visitor_ids::{parse_next, IdCipher, NEXT_META};
use crate::store::{Columns, Sql, Store, StoreError};

static META_VALUE: Sql = Sql::new("SELECT value FROM meta WHERE key = ?1");
/// Records that the table's rows are keyed by visitor number (the seed
/// writes them so; [`rekey_by_number`] makes them so).
static MARK_KEYS_NUMBERED: Sql = Sql::new(
    "INSERT INTO meta (key, value) VALUES (?1, ?2) ON CONFLICT (key) DO UPDATE SET value = excluded.value",
);
/// Moves the counter on by ?2; the counter after.
static RESERVE_NUMBERS: Sql = Sql::new(
    "INSERT INTO meta (key, value) VALUES (?1, CAST(1 + ?2 AS TEXT))
     ON CONFLICT (key) DO UPDATE SET value = CAST(CAST(value AS INTEGER) + ?2 AS TEXT)
     RETURNING CAST(value AS INTEGER)",
);
static ALL_STANDINGS: Sql =
    Sql::new("SELECT visitor_id, state, closes, updated_at_ms FROM invites_answers");
static NEGATE_KEYS: Sql =
    Sql::new("UPDATE invites_answers SET visitor_id = -visitor_id WHERE visitor_id > 0");
static NEGATED_ROWS: Sql =
    Sql::new("SELECT visitor_id, site_id FROM invites_answers WHERE visitor_id < 0 LIMIT ?1");
static SET_NUMBER: Sql =
    Sql::new("UPDATE invites_answers SET visitor_id = ?3 WHERE visitor_id = ?1 AND site_id = ?2");

/// Rows a rekey reads and rewrites per step.
const REKEY_STEP_ROWS: i64 = 4096;

/// Reserves `count` visitor numbers durably; the first of them.
pub async fn reserve(store: &Store, count: u64) -> Result<u64, StoreError> {
    let count = count as i64;
    let next = store
        .write(move |tx| {
            Box::pin(async move {
                tx.query_one(&RESERVE_NUMBERS, &[&NEXT_META, &count], |r| r.int(0))
                    .await
            })
        })
        .await?;
    Ok((next - count) as u64)
}

/// Reserves `count` visitor numbers where the store's nodes number their
/// visitors: the first of them; `None` where visitors get random ids.
pub async fn reserve_visitor_numbers(store: &Store, count: u64) -> Result<Option<u64>, StoreError> {
    if !Standings::in_memory(store.writers()) {
        return Ok(None);
    }
    reserve(store, count).await.map(Some)
}

/// Rekeys rows stored under visitor ids (before visitor numbers) by their
/// numbers under `cipher`, once per store (`meta.invites_answers_keys`), in
/// one writer command; the rows rekeyed. Two passes, so no intermediate key
/// meets another row's: all keys negated first (ids are positive), then
/// each set to its number (distinct, as the cipher is a permutation).
pub async fn rekey_by_number(store: &Store, cipher: IdCipher) -> Result<usize, StoreError> {
    store
        .write(move |tx| {
            let cipher = cipher.clone();
            Box::pin(async move {
                let keys = tx
                    .query_opt(&META_VALUE, &[&KEYS_META], |r| r.text(0))
                    .await?;
                if keys.as_deref() == Some(KEYS_NUMBERS) {
                    return Ok(0);
                }
                tx.execute(&NEGATE_KEYS, &[]).await?;
                let mut rekeyed = 0usize;
                loop {
                    let rows = tx
                        .query(&NEGATED_ROWS, &[&REKEY_STEP_ROWS], |r| {
                            Ok((r.int(0)?, r.int(1)?))
                        })
                        .await?;
                    if rows.is_empty() {
                        break;
                    }
                    for (negated, site_id) in rows {
                        let number = cipher.number_of(-negated) as i64;
                        rekeyed += tx
                            .execute(&SET_NUMBER, &[&negated, &site_id, &number])
                            .await? as usize;
                    }
                }
                tx.execute(&MARK_KEYS_NUMBERED, &[&KEYS_META, &KEYS_NUMBERS])
                    .await?;
                Ok(rekeyed)
            })
        })
        .await
}

/// Loads `index` from the table inside one writer command, so no write can
/// slip between the scan and the swap (see `index.rs`); the visitors held.
/// Checks read the table until it is loaded.
pub async fn load_standings(store: &Store, index: &Arc<StandingIndex>) -> Result<u64, StoreError> {
    index.suspend();
    let index = index.clone();
    store
        .write(move |tx| {
            let index = index.clone();
            Box::pin(async move {
                let end = parse_next(
                    tx.query_opt(&META_VALUE, &[&NEXT_META], |r| r.text(0))
                        .await?,
                );
                let mut fresh = index.fresh(end);
                tx.query(&ALL_STANDINGS, &[], |r| {
                    fresh.hold(r.int(0)?, r.int(1)?, r.int(2)?, r.int(3)?);
                    Ok(())
                })
                .await?;
                Ok(index.install(fresh))
            })
        })
        .await
}
