//! The event log (outbox): every state change appends its event in the same
//! transaction; side effects follow the log by position, at least once.
//!
//! Positions are gapless and commit in order in both dialects (SQLite has one
//! writer; PostgreSQL takes them under one row lock at commit, see
//! `postgres.rs`), so a reader that asks for "after N" never skips an event.

use rusqlite::Connection;

use super::{postgres::PgStore, StoreError};

/// An event to append. Payloads never hold personal data.
#[derive(Clone, Debug)]
pub struct NewEvent {
    pub stream: String,
    pub event_type: String,
    pub payload: Vec<u8>,
}

impl NewEvent {
    pub fn json(
        stream: impl Into<String>,
        event_type: &str,
        payload: &impl serde::Serialize,
    ) -> NewEvent {
        NewEvent {
            stream: stream.into(),
            event_type: event_type.to_string(),
            payload: serde_json::to_vec(payload).expect("a JSON value serializes"),
        }
    }
}

#[derive(Clone, Debug)]
pub struct StoredEvent {
    pub position: i64,
    pub stream: String,
    pub event_type: String,
    pub payload: Vec<u8>,
    pub created_at_ms: i64,
}

/// Appends an event inside a SQLite write command.
pub fn sqlite_append(conn: &Connection, event: &NewEvent) -> Result<i64, StoreError> {
    conn.prepare_cached(
        // `position` is the rowid: the single writer makes it max + 1.
        "INSERT INTO events (stream, event_type, payload, created_at_ms) VALUES (?1, ?2, ?3, ?4)",
    )?
    .execute(rusqlite::params![
        event.stream,
        event.event_type,
        event.payload,
        crate::base::clock::now_ms()
    ])?;
    Ok(conn.last_insert_rowid())
}

pub fn sqlite_events_after(
    conn: &Connection,
    position: i64,
    limit: i64,
) -> Result<Vec<StoredEvent>, StoreError> {
    let mut stmt = conn.prepare_cached(
        "SELECT position, stream, event_type, payload, created_at_ms FROM events
         WHERE position > ?1 ORDER BY position LIMIT ?2",
    )?;
    let rows = stmt.query_map([position, limit], |r| {
        Ok(StoredEvent {
            position: r.get(0)?,
            stream: r.get(1)?,
            event_type: r.get(2)?,
            payload: r.get(3)?,
            created_at_ms: r.get(4)?,
        })
    })?;
    Ok(rows.collect::<Result<Vec<_>, _>>()?)
}

pub async fn pg_events_after(
    store: &PgStore,
    position: i64,
    limit: i64,
) -> Result<Vec<StoredEvent>, StoreError> {
    let client = store.client().await?;
    let stmt = client
        .prepare_cached(
            "SELECT position, stream, event_type, payload, created_at_ms FROM events
             WHERE position > $1 ORDER BY position LIMIT $2",
        )
        .await?;
    let rows = client.query(&stmt, &[&position, &limit]).await?;
    Ok(rows
        .into_iter()
        .map(|r| StoredEvent {
            position: r.get(0),
            stream: r.get(1),
            event_type: r.get(2),
            payload: r.get(3),
            created_at_ms: r.get(4),
        })
        .collect())
}
