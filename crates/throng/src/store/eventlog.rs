//! The event log (outbox): every state change appends its event in the same
//! transaction; side effects follow the log by position, at least once.
//!
//! A reader that asks for "after N" never skips an event: SQLite's one
//! writer makes positions gapless and commit in order; PostgreSQL's commit
//! out of order (from a sequence, see `postgres.rs`) and are read only up
//! to the horizon, below which none can still appear (`horizon.rs`).

use rusqlite::Connection;

use super::{postgres::PgStore, StoreError};

/// How a payload (and metadata) is encoded, the `payload_format` column.
pub const FORMAT_JSON: i16 = 0;
/// MessagePack, a map with field names; whole, or an LZ4 block wrapped in
/// MessagePack ext type 99 (the store only keeps the bytes; the events
/// service encodes and decodes them).
pub const FORMAT_MSGPACK: i16 = 1;

/// The type of the event that deletes a stream (a tombstone): the stream's
/// last event, after which it takes no appends and reads answer "deleted".
/// Names starting with `$` are the store's own.
pub const TOMBSTONE_TYPE: &str = "$streamDeleted";

/// An event to append. Payloads never hold personal data.
#[derive(Clone, Debug)]
pub struct NewEvent {
    pub stream: String,
    pub event_type: String,
    pub payload: Vec<u8>,
    /// The client's id (16 bytes of a UUID): appending it again is answered
    /// with the first append's outcome. Services' own events have none.
    pub event_id: Option<[u8; 16]>,
    /// Encoded as `format` says.
    pub metadata: Option<Vec<u8>>,
    pub format: i16,
}

impl NewEvent {
    pub fn json(
        stream: impl Into<String>,
        event_type: &str,
        payload: &impl serde::Serialize,
    ) -> NewEvent {
        NewEvent::json_bytes(
            stream,
            event_type,
            serde_json::to_vec(payload).expect("a JSON value serializes"),
        )
    }

    /// An event whose payload is already JSON text.
    pub fn json_bytes(stream: impl Into<String>, event_type: &str, payload: Vec<u8>) -> NewEvent {
        NewEvent {
            stream: stream.into(),
            event_type: event_type.to_string(),
            payload,
            event_id: None,
            metadata: None,
            format: FORMAT_JSON,
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
    /// Its version in its stream (0 for the first event).
    pub version: i64,
    pub event_id: Option<Vec<u8>>,
    pub metadata: Option<Vec<u8>>,
    pub format: i16,
}

/// The columns every read selects, in [`sqlite_event`]'s order (a macro,
/// so statements are `concat!`ed literals).
macro_rules! columns {
    () => {
        "position, stream, event_type, payload, created_at_ms, stream_version, event_id, \
         metadata, payload_format"
    };
}

/// A row of `SELECT {COLUMNS}`.
pub(crate) fn sqlite_event(r: &rusqlite::Row<'_>) -> rusqlite::Result<StoredEvent> {
    Ok(StoredEvent {
        position: r.get(0)?,
        stream: r.get(1)?,
        event_type: r.get(2)?,
        payload: r.get(3)?,
        created_at_ms: r.get(4)?,
        version: r.get(5)?,
        event_id: r.get(6)?,
        metadata: r.get(7)?,
        format: r.get(8)?,
    })
}

/// The same row from PostgreSQL.
pub(crate) fn pg_event(r: &tokio_postgres::Row) -> StoredEvent {
    StoredEvent {
        position: r.get(0),
        stream: r.get(1),
        event_type: r.get(2),
        payload: r.get(3),
        created_at_ms: r.get(4),
        version: r.get(5),
        event_id: r.get(6),
        metadata: r.get(7),
        format: r.get(8),
    }
}

/// Appends an event inside a SQLite write command.
pub fn sqlite_append(conn: &Connection, event: &NewEvent) -> Result<i64, StoreError> {
    conn.prepare_cached(
        // `position` is the rowid: the single writer makes it max + 1, and
        // the stream's next version is read in the same statement.
        "INSERT INTO events (stream, event_type, payload, created_at_ms, stream_version,
                             event_id, metadata, payload_format)
         VALUES (?1, ?2, ?3, ?4,
                 (SELECT COALESCE(MAX(stream_version) + 1, 0) FROM events WHERE stream = ?1),
                 ?5, ?6, ?7)",
    )?
    .execute(rusqlite::params![
        event.stream,
        event.event_type,
        event.payload,
        crate::base::clock::now_ms(),
        event.event_id.as_ref().map(|id| &id[..]),
        event.metadata,
        event.format,
    ])?;
    Ok(conn.last_insert_rowid())
}

pub fn sqlite_events_after(
    conn: &Connection,
    position: i64,
    limit: i64,
) -> Result<Vec<StoredEvent>, StoreError> {
    let mut stmt = conn.prepare_cached(concat!(
        "SELECT ",
        columns!(),
        " FROM events WHERE position > ?1 ORDER BY position LIMIT ?2"
    ))?;
    let rows = stmt.query_map([position, limit], sqlite_event)?;
    Ok(rows.collect::<Result<Vec<_>, _>>()?)
}

/// What a consumer of one event type read: its events in position order,
/// and how far the log was scanned (it resumes after `scanned_to`).
#[derive(Debug, Default)]
pub struct TypeScan {
    pub events: Vec<StoredEvent>,
    /// Events of any type scanned, at most the asked limit.
    pub scanned: i64,
    /// The last position scanned (the asked position when none was).
    pub scanned_to: i64,
}

/// The scanned range: at most `limit` events after `position`.
const SCAN_RANGE_SQLITE: &str = "SELECT COUNT(*), COALESCE(MAX(position), ?1) FROM
       (SELECT position FROM events WHERE position > ?1 ORDER BY position LIMIT ?2)";
const SCAN_RANGE_PG: &str = "SELECT COUNT(*), COALESCE(MAX(position), $1) FROM
       (SELECT position FROM events WHERE position > $1 AND position <= $3
        ORDER BY position LIMIT $2) AS scanned";

/// The events of `event_type` in the streams of `category` (`{category}-...`
/// and the stream named `category`) among the next `limit` events after
/// `position`: an event of that type in another stream (a client's, through
/// the events API) is never returned. The range read first holds every event the second statement
/// can find in it (SQLite: positions commit in order; PostgreSQL: the range
/// stops at the horizon), and the other types' payloads are never read out.
pub fn sqlite_events_of_type_after(
    conn: &Connection,
    position: i64,
    limit: i64,
    category: &str,
    event_type: &str,
) -> Result<TypeScan, StoreError> {
    let (scanned, scanned_to): (i64, i64) = conn
        .prepare_cached(SCAN_RANGE_SQLITE)?
        .query_row([position, limit], |r| Ok((r.get(0)?, r.get(1)?)))?;
    let mut stmt = conn.prepare_cached(concat!(
        "SELECT ",
        columns!(),
        " FROM events WHERE position > ?1 AND position <= ?2 AND event_type = ?3 \
          AND (stream = ?4 OR substr(stream, 1, length(?4) + 1) = ?4 || '-') ORDER BY position"
    ))?;
    let events = stmt
        .query_map(
            rusqlite::params![position, scanned_to, event_type, category],
            sqlite_event,
        )?
        .collect::<Result<Vec<_>, _>>()?;
    Ok(TypeScan {
        events,
        scanned,
        scanned_to,
    })
}

pub async fn pg_events_of_type_after(
    store: &PgStore,
    position: i64,
    limit: i64,
    category: &str,
    event_type: &str,
) -> Result<TypeScan, StoreError> {
    let client = store.client().await?;
    let horizon = store.horizon(&client).await?;
    if horizon <= position {
        return Ok(TypeScan {
            scanned_to: position,
            ..TypeScan::default()
        });
    }
    let range = client.prepare_cached(SCAN_RANGE_PG).await?;
    let row = client
        .query_one(&range, &[&position, &limit, &horizon])
        .await?;
    let (scanned, scanned_to): (i64, i64) = (row.get(0), row.get(1));
    let stmt = client
        .prepare_cached(concat!(
            "SELECT ",
            columns!(),
            " FROM events WHERE position > $1 AND position <= $2 AND event_type = $3 \
                  AND (stream = $4 OR left(stream, length($4) + 1) = $4 || '-') ORDER BY position"
        ))
        .await?;
    let rows = client
        .query(&stmt, &[&position, &scanned_to, &event_type, &category])
        .await?;
    Ok(TypeScan {
        events: rows.into_iter().map(|r| pg_event(&r)).collect(),
        scanned,
        scanned_to,
    })
}

pub async fn pg_events_after(
    store: &PgStore,
    position: i64,
    limit: i64,
) -> Result<Vec<StoredEvent>, StoreError> {
    let client = store.client().await?;
    let horizon = store.horizon(&client).await?;
    if horizon <= position {
        return Ok(Vec::new());
    }
    let stmt = client
        .prepare_cached(concat!(
            "SELECT ",
            columns!(),
            " FROM events WHERE position > $1 AND position <= $3 ORDER BY position LIMIT $2"
        ))
        .await?;
    let rows = client.query(&stmt, &[&position, &limit, &horizon]).await?;
    Ok(rows.into_iter().map(|r| pg_event(&r)).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn log() -> Connection {
        let c = Connection::open_in_memory().unwrap();
        c.execute_batch(
            "CREATE TABLE events (position INTEGER PRIMARY KEY, stream TEXT NOT NULL,
             event_type TEXT NOT NULL, payload BLOB NOT NULL, created_at_ms INTEGER NOT NULL,
             stream_version INTEGER NOT NULL DEFAULT 0, event_id BLOB, metadata BLOB,
             payload_format INTEGER NOT NULL DEFAULT 0)",
        )
        .unwrap();
        for i in 1..=10 {
            let t = if i % 3 == 0 { "Wanted" } else { "Other" };
            // The 9th is of the wanted type in another category's stream.
            let stream = if i == 9 {
                "S-9".to_string()
            } else {
                format!("s-{i}")
            };
            sqlite_append(&c, &NewEvent::json_bytes(stream, t, vec![i as u8])).unwrap();
        }
        c
    }

    #[test]
    fn a_type_scan_returns_that_type_and_how_far_it_read() {
        let c = log();
        let s = sqlite_events_of_type_after(&c, 0, 4, "s", "Wanted").unwrap();
        assert_eq!((s.scanned, s.scanned_to), (4, 4));
        assert_eq!(s.events.iter().map(|e| e.position).collect::<Vec<_>>(), [3]);
        let s = sqlite_events_of_type_after(&c, 4, 100, "s", "Wanted").unwrap();
        assert_eq!((s.scanned, s.scanned_to), (6, 10));
        // 9 is of the type, but in the stream `S-9`, not of category `s`.
        assert_eq!(s.events.iter().map(|e| e.position).collect::<Vec<_>>(), [6]);
        assert_eq!(s.events[0].payload, [6]);
        let s = sqlite_events_of_type_after(&c, 10, 100, "s", "Wanted").unwrap();
        assert_eq!((s.scanned, s.scanned_to, s.events.len()), (0, 10, 0));
        let s = sqlite_events_of_type_after(&c, 0, 2, "s", "Wanted").unwrap();
        assert_eq!((s.scanned, s.scanned_to, s.events.len()), (2, 2, 0));
    }
}
