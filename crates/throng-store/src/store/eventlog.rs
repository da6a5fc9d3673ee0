//! The event log (outbox): every state change appends its event in the same
//! transaction; side effects follow the log by position, at least once.
//!
//! A reader that asks for "after N" never skips an event: SQLite's one
//! writer makes positions gapless and commit in order; PostgreSQL's commit
//! out of order (from a sequence, see `postgres.rs`) and are read only up
//! to the horizon, below which none can still appear (`horizon.rs`).

use rusqlite::Connection;

use super::seam::{Conn, Sql};
use super::{Columns, StoreError};

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

/// The columns every read selects, in [`event_row`]'s order (a macro,
/// so statements are `concat!`ed literals).
macro_rules! columns {
    () => {
        "position, stream, event_type, payload, created_at_ms, stream_version, event_id, \
         metadata, payload_format"
    };
}

/// A row of `SELECT {COLUMNS}`, from either database.
pub(crate) fn event_row(r: &impl Columns) -> Result<StoredEvent, StoreError> {
    Ok(StoredEvent {
        position: r.int(0)?,
        stream: r.text(1)?,
        event_type: r.text(2)?,
        payload: r.bytes(3)?,
        created_at_ms: r.int(4)?,
        version: r.int(5)?,
        event_id: r.opt_bytes(6)?,
        metadata: r.opt_bytes(7)?,
        format: r.int(8)? as i16,
    })
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

static EVENTS_AFTER: Sql = Sql::new(concat!(
    "SELECT ",
    columns!(),
    " FROM events WHERE position > ?1 AND position <= ?3 ORDER BY position LIMIT ?2"
));

/// Events after `position`, in position order, at most `limit`, up to the
/// log's end as `c` reads it (`Conn::log_end`).
pub async fn events_after(
    c: &Conn<'_>,
    position: i64,
    limit: i64,
) -> Result<Vec<StoredEvent>, StoreError> {
    let end = c.log_end().await?;
    if end <= position {
        return Ok(Vec::new());
    }
    c.query(&EVENTS_AFTER, &[&position, &limit, &end], |r| event_row(r))
        .await
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

/// The scanned range: at most `limit` events after `position`, up to ?3.
static SCAN_RANGE: Sql = Sql::new(
    "SELECT COUNT(*), COALESCE(MAX(position), ?1) FROM
       (SELECT position FROM events WHERE position > ?1 AND position <= ?3
        ORDER BY position LIMIT ?2) AS scanned",
);

static OF_TYPE: Sql = Sql::new(concat!(
    "SELECT ",
    columns!(),
    " FROM events WHERE position > ?1 AND position <= ?2 AND event_type = ?3 \
      AND (stream = ?4 OR substr(stream, 1, length(?4) + 1) = ?4 || '-') ORDER BY position"
));

/// The events of `event_type` in the streams of `category` (`{category}-...`
/// and the stream named `category`) among the next `limit` events after
/// `position`: an event of that type in another stream (a client's, through
/// the events API) is never returned. The range read first holds every
/// event the second statement can find in it (it stops at the log's end),
/// and the other types' payloads are never read out.
pub async fn events_of_type_after(
    c: &Conn<'_>,
    position: i64,
    limit: i64,
    category: &str,
    event_type: &str,
) -> Result<TypeScan, StoreError> {
    let end = c.log_end().await?;
    if end <= position {
        return Ok(TypeScan {
            scanned_to: position,
            ..TypeScan::default()
        });
    }
    let (scanned, scanned_to) = c
        .query_one(&SCAN_RANGE, &[&position, &limit, &end], |r| {
            Ok((r.int(0)?, r.int(1)?))
        })
        .await?;
    let events = c
        .query(
            &OF_TYPE,
            &[&position, &scanned_to, &event_type, &category],
            |r| event_row(r),
        )
        .await?;
    Ok(TypeScan {
        events,
        scanned,
        scanned_to,
    })
}

/// Like [`events_of_type_after`], for several types (at most
/// [`EVENT_TYPES_MAX`]): a worker that follows a few of its service's
/// event types reads them in one scan.
pub async fn events_of_types_after(
    c: &Conn<'_>,
    position: i64,
    limit: i64,
    category: &str,
    event_types: &[&str],
) -> Result<TypeScan, StoreError> {
    if event_types.is_empty() || event_types.len() > EVENT_TYPES_MAX {
        return Err(StoreError::Internal(format!(
            "a scan follows 1 to {EVENT_TYPES_MAX} event types"
        )));
    }
    let end = c.log_end().await?;
    if end <= position {
        return Ok(TypeScan {
            scanned_to: position,
            ..TypeScan::default()
        });
    }
    let (scanned, scanned_to) = c
        .query_one(&SCAN_RANGE, &[&position, &limit, &end], |r| {
            Ok((r.int(0)?, r.int(1)?))
        })
        .await?;
    let sql = &OF_TYPES[event_types.len() - 1];
    let mut params: Vec<&dyn super::Param> = vec![&position, &scanned_to, &category];
    for t in event_types {
        params.push(t);
    }
    let events = c.query(sql, &params, |r| event_row(r)).await?;
    Ok(TypeScan {
        events,
        scanned,
        scanned_to,
    })
}

/// Event types one scan follows at most.
pub const EVENT_TYPES_MAX: usize = 8;

/// [`events_of_types_after`]'s statements, by the number of types.
static OF_TYPES: std::sync::LazyLock<Vec<Sql>> = std::sync::LazyLock::new(|| {
    (1..=EVENT_TYPES_MAX)
        .map(|n| {
            let types: Vec<String> = (0..n).map(|i| format!("?{}", i + 4)).collect();
            Sql::owned(format!(
                concat!(
                    "SELECT ",
                    columns!(),
                    " FROM events WHERE position > ?1 AND position <= ?2 AND event_type IN ({}) \
                      AND (stream = ?3 OR substr(stream, 1, length(?3) + 1) = ?3 || '-') ORDER BY position"
                ),
                types.join(", ")
            ))
        })
        .collect()
});

/// An event a bulk load appends at a version its caller decided (a seed's
/// new streams): no head is read, no lock taken.
pub struct VersionedEvent {
    pub stream: String,
    pub version: i64,
    pub event_id: [u8; 16],
    pub event_type: &'static str,
    pub payload: Vec<u8>,
    pub format: i16,
}

/// Appends `events` in one transaction of its own, outside the writer (a
/// seed): the named strategy per database for putting many events in the
/// log at once. SQLite: prepared inserts on the connection `conn` (the
/// rowid is the position). PostgreSQL: the positions taken from the log's
/// sequence as every append takes them (after the transaction's id, for
/// the horizon) and one `INSERT ... SELECT FROM UNNEST`.
pub(super) fn sqlite_append_versioned(
    conn: &mut Connection,
    events: &[VersionedEvent],
) -> Result<(), StoreError> {
    let now = crate::base::clock::now_ms();
    let tx = conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
    {
        let mut ins = tx.prepare_cached(
            "INSERT INTO events (stream, event_type, payload, created_at_ms, stream_version,
                                 event_id, metadata, payload_format)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, NULL, ?7)",
        )?;
        for e in events {
            ins.execute(rusqlite::params![
                e.stream,
                e.event_type,
                e.payload,
                now,
                e.version,
                &e.event_id[..],
                e.format
            ])?;
        }
    }
    tx.commit()?;
    Ok(())
}

/// See [`sqlite_append_versioned`].
pub(super) async fn pg_append_versioned(
    client: &mut deadpool_postgres::Object,
    events: &[VersionedEvent],
) -> Result<(), StoreError> {
    let now = crate::base::clock::now_ms();
    let tx = client.transaction().await?;
    let positions = super::postgres::take_positions(&tx, events.len()).await?;
    let streams: Vec<&str> = events.iter().map(|e| e.stream.as_str()).collect();
    let types: Vec<&str> = events.iter().map(|e| e.event_type).collect();
    let versions: Vec<i64> = events.iter().map(|e| e.version).collect();
    let ids: Vec<&[u8]> = events.iter().map(|e| &e.event_id[..]).collect();
    let payloads: Vec<&[u8]> = events.iter().map(|e| e.payload.as_slice()).collect();
    let formats: Vec<i16> = events.iter().map(|e| e.format).collect();
    tx.execute(
        "INSERT INTO events (position, stream, event_type, payload, created_at_ms,
                             stream_version, event_id, payload_format)
         SELECT p, s, t, pl, $4, v, id, f
           FROM UNNEST($1::BIGINT[], $2::TEXT[], $3::TEXT[], $5::BYTEA[], $6::BIGINT[],
                       $7::BYTEA[], $8::SMALLINT[])
             AS u(p, s, t, pl, v, id, f)",
        &[
            &positions, &streams, &types, &now, &payloads, &versions, &ids, &formats,
        ],
    )
    .await?;
    tx.commit().await?;
    Ok(())
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
        let raw = log();
        let c = Conn::sqlite(&raw);
        let sqlite_events_of_type_after = |c: &Conn<'_>, p, l, cat, t| {
            super::super::seam::run_ready(events_of_type_after(c, p, l, cat, t))
        };
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
