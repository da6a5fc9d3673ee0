//! The event log read and written as an event store: streams with versions,
//! appends with an expected version, idempotent by event id, tombstones.
//!
//! Every event of the log is in a stream (`events.stream`) at a version
//! (`events.stream_version`, 0 for the first); services' own appends get the
//! next version of their stream too (`eventlog::sqlite_append`,
//! `postgres::append_events`). A conditional append ([`StreamAppend`]) is
//! decided where positions are taken: in SQLite's single writer, and in
//! PostgreSQL under the `event_head` row lock at the end of the batch, so
//! two appends racing on one expected version (in one batch, or on two
//! nodes) never both win; the unique index on (stream, stream_version)
//! holds the rule even if that ever failed.

use std::collections::HashMap;

use rusqlite::{Connection, OptionalExtension};

use super::eventlog::{event_row, NewEvent, StoredEvent, TOMBSTONE_TYPE};
use super::seam::{run_ready, Conn, Param, Sql};
use super::{Columns, StoreError};

/// What an append expects of its stream.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Expected {
    Any,
    /// The stream has no event yet.
    NoStream,
    /// The stream has at least one event.
    Exists,
    /// The stream's last event has this version.
    Version(i64),
}

/// Events to append to one stream, all or none.
#[derive(Clone, Debug)]
pub struct StreamAppend {
    pub stream: String,
    pub expected: Expected,
    /// Each with an `event_id`.
    pub events: Vec<NewEvent>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AppendOutcome {
    /// Appended at consecutive positions; `version` is the stream's last.
    Appended {
        first_position: i64,
        last_position: i64,
        version: i64,
    },
    /// Every event id was appended before, to this stream, in this order:
    /// the first append's answer, nothing written.
    AlreadyAppended {
        first_position: i64,
        last_position: i64,
        version: i64,
    },
    /// `current`: the stream's version, `None` when it has no event.
    WrongExpectedVersion {
        current: Option<i64>,
    },
    StreamDeleted,
    /// Some of the ids were appended before, but not as this append.
    EventIdsInUse,
}

/// A stream's last event: its version and whether it is a tombstone.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StreamHead {
    pub version: i64,
    pub deleted: bool,
}

/// Checks `expected` against the stream's head; the next version or the
/// refusal.
pub fn decide(head: Option<StreamHead>, expected: Expected) -> Result<i64, AppendOutcome> {
    if head.is_some_and(|h| h.deleted) {
        return Err(AppendOutcome::StreamDeleted);
    }
    let current = head.map(|h| h.version);
    let ok = match expected {
        Expected::Any => true,
        Expected::NoStream => current.is_none(),
        Expected::Exists => current.is_some(),
        Expected::Version(v) => current == Some(v),
    };
    if ok {
        Ok(current.map_or(0, |v| v + 1))
    } else {
        Err(AppendOutcome::WrongExpectedVersion { current })
    }
}

/// An event id already in the log: where it is.
#[derive(Clone, Debug)]
pub struct IdAt {
    pub position: i64,
    pub stream: String,
    pub version: i64,
}

/// The answer to appending `append` again, given where its ids already are
/// (`found[i]` for `append.events[i]`): `None` when none of them is in the
/// log (append normally).
pub fn replay(append: &StreamAppend, found: &[Option<IdAt>]) -> Option<AppendOutcome> {
    if found.iter().all(|f| f.is_none()) {
        return None;
    }
    let all: Option<Vec<&IdAt>> = found.iter().map(|f| f.as_ref()).collect();
    let Some(all) = all else {
        return Some(AppendOutcome::EventIdsInUse);
    };
    let consecutive = all
        .windows(2)
        .all(|w| w[1].position == w[0].position + 1 && w[1].version == w[0].version + 1);
    if !consecutive || all.iter().any(|a| a.stream != append.stream) {
        return Some(AppendOutcome::EventIdsInUse);
    }
    Some(AppendOutcome::AlreadyAppended {
        first_position: all[0].position,
        last_position: all[all.len() - 1].position,
        version: all[all.len() - 1].version,
    })
}

static HEAD: Sql = Sql::new(
    "SELECT stream_version, event_type FROM events WHERE stream = ?1
     ORDER BY stream_version DESC LIMIT 1",
);

/// A stream's last event (`None`: no such stream).
pub async fn stream_head(c: &Conn<'_>, stream: &str) -> Result<Option<StreamHead>, StoreError> {
    c.query_opt(&HEAD, &[&stream], |r| {
        Ok(StreamHead {
            version: r.int(0)?,
            deleted: r.text(1)? == TOMBSTONE_TYPE,
        })
    })
    .await
}

// ------------------------------------------------------------------ SQLite

fn sqlite_find_id(conn: &Connection, id: &[u8; 16]) -> Result<Option<IdAt>, StoreError> {
    Ok(conn
        .prepare_cached("SELECT position, stream, stream_version FROM events WHERE event_id = ?1")?
        .query_row([&id[..]], |r| {
            Ok(IdAt {
                position: r.get(0)?,
                stream: r.get(1)?,
                version: r.get(2)?,
            })
        })
        .optional()?)
}

/// Appends `append` if its stream is as expected; runs in the single
/// writer, so the check and the insert are one step.
pub fn sqlite_append_stream(
    conn: &Connection,
    append: &StreamAppend,
) -> Result<AppendOutcome, StoreError> {
    let mut found = Vec::with_capacity(append.events.len());
    for e in &append.events {
        found.push(match &e.event_id {
            Some(id) => sqlite_find_id(conn, id)?,
            None => None,
        });
    }
    if let Some(answer) = replay(append, &found) {
        return Ok(answer);
    }
    let head = run_ready(stream_head(&Conn::sqlite(conn), &append.stream))?;
    let mut version = match decide(head, append.expected) {
        Ok(v) => v,
        Err(refused) => return Ok(refused),
    };
    let now = crate::base::clock::now_ms();
    let mut stmt = conn.prepare_cached(
        "INSERT INTO events (stream, event_type, payload, created_at_ms, stream_version,
                             event_id, metadata, payload_format)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
    )?;
    let mut first = 0;
    for (i, e) in append.events.iter().enumerate() {
        stmt.execute(rusqlite::params![
            append.stream,
            e.event_type,
            e.payload,
            now,
            version,
            e.event_id.as_ref().map(|id| &id[..]),
            e.metadata,
            e.format,
        ])?;
        if i == 0 {
            first = conn.last_insert_rowid();
        }
        version += 1;
    }
    Ok(AppendOutcome::Appended {
        first_position: first,
        last_position: conn.last_insert_rowid(),
        version: version - 1,
    })
}

static READ_FORWARD: Sql = Sql::new(concat!(
    "SELECT ",
    columns!(),
    " FROM events WHERE stream = ?1 AND stream_version >= ?2 ORDER BY stream_version LIMIT ?3"
));
static READ_BACKWARD: Sql = Sql::new(concat!(
    "SELECT ",
    columns!(),
    " FROM events WHERE stream = ?1 AND stream_version <= ?2 ORDER BY stream_version DESC LIMIT ?3"
));

/// A stream's events from `version` on, forward or backward, at most `limit`.
pub async fn read_stream(
    c: &Conn<'_>,
    stream: &str,
    version: i64,
    forward: bool,
    limit: i64,
) -> Result<Vec<StoredEvent>, StoreError> {
    let sql = if forward {
        &READ_FORWARD
    } else {
        &READ_BACKWARD
    };
    c.query(sql, &[&stream, &version, &limit], |r| event_row(r))
        .await
}

/// What a read of the global order keeps (all `None`: every event).
#[derive(Clone, Debug, Default)]
pub struct Filter {
    /// The event type, exactly.
    pub event_type: Option<String>,
    /// The event type starts with this.
    pub type_prefix: Option<String>,
    /// Streams of this category: named `{category}-...`, or `{category}`.
    pub category: Option<String>,
}

impl Filter {
    pub fn is_empty(&self) -> bool {
        self.event_type.is_none() && self.type_prefix.is_none() && self.category.is_none()
    }
}

/// A page of the global order.
#[derive(Debug, Default)]
pub struct Page {
    pub events: Vec<StoredEvent>,
    /// Where the next page starts (the position to ask `from`).
    pub next: i64,
    /// The last committed position when the page was read.
    pub head: i64,
}

/// The statement of a filtered scan: positions are parameters 1 (from) and
/// 2 (to, exclusive), then the filter's values in order. PostgreSQL is told
/// the filter's values are text (`length(?)` alone would not say).
fn scan_sql(filter: &Filter, pg: bool) -> String {
    let p = |n: usize| {
        if pg {
            format!("${n}::text")
        } else {
            format!("?{n}")
        }
    };
    let int = |n: usize| if pg { format!("${n}") } else { format!("?{n}") };
    let mut sql = format!(
        concat!(
            "SELECT ",
            columns!(),
            " FROM events WHERE position >= {} AND position < {}"
        ),
        int(1),
        int(2)
    );
    let mut n = 3;
    if filter.event_type.is_some() {
        sql.push_str(&format!(" AND event_type = {}", p(n)));
        n += 1;
    }
    // substr(x, 1, length(prefix)) = prefix: portable, and a prefix holding
    // LIKE's wildcards means itself.
    if filter.type_prefix.is_some() {
        sql.push_str(&format!(
            " AND substr(event_type, 1, length({0})) = {0}",
            p(n)
        ));
        n += 1;
    }
    if filter.category.is_some() {
        sql.push_str(&format!(
            " AND (stream = {0} OR substr(stream, 1, length({0}) + 1) = {0} || '-')",
            p(n)
        ));
        n += 1;
    }
    sql.push_str(&format!(" ORDER BY position LIMIT {}", int(n)));
    sql
}

/// The next page's start. Every position up to the head read before the
/// range is final (SQLite: one writer, positions commit in order; PostgreSQL:
/// the head is the horizon and the range stops there), so the range's read
/// holds all of them: the page covers up to the head (or the scan's end)
/// and at least its last event.
fn page_end(from: i64, limit: i64, scan_max: i64, head: i64, events: &[StoredEvent]) -> i64 {
    let scanned_to = from.saturating_add(scan_max).min(head + 1).max(from);
    match events.last() {
        Some(last) if events.len() as i64 >= limit => last.position + 1,
        Some(last) => scanned_to.max(last.position + 1),
        None => scanned_to,
    }
}

/// The scan statement of each filter shape (which of the three filters are
/// set), built once.
static SCANS: std::sync::LazyLock<Vec<Sql>> = std::sync::LazyLock::new(|| {
    (0..8)
        .map(|shape: u8| {
            let f = Filter {
                event_type: (shape & 1 != 0).then(String::new),
                type_prefix: (shape & 2 != 0).then(String::new),
                category: (shape & 4 != 0).then(String::new),
            };
            Sql::owned_per_dialect(scan_sql(&f, false), scan_sql(&f, true))
        })
        .collect()
});

/// Events from position `from` on in the global order that pass `filter`:
/// at most `limit`, found among at most `scan_max` positions (a sparse
/// filter returns fewer, and `next` moves past what was scanned).
pub async fn scan(
    c: &Conn<'_>,
    from: i64,
    limit: i64,
    scan_max: i64,
    filter: &Filter,
) -> Result<Page, StoreError> {
    // The log's end first: every position up to it is final, so the range
    // read after it (and never past it) sees all of them.
    let head = c.log_end().await?;
    let to = if filter.is_empty() {
        i64::MAX
    } else {
        from.saturating_add(scan_max)
    }
    .min(head.saturating_add(1));
    let shape = usize::from(filter.event_type.is_some())
        | usize::from(filter.type_prefix.is_some()) << 1
        | usize::from(filter.category.is_some()) << 2;
    let mut params: Vec<&dyn Param> = vec![&from, &to];
    for v in [&filter.event_type, &filter.type_prefix, &filter.category]
        .into_iter()
        .flatten()
    {
        params.push(v);
    }
    params.push(&limit);
    let events = c.query(&SCANS[shape], &params, |r| event_row(r)).await?;
    let scanned = if filter.is_empty() {
        i64::MAX
    } else {
        scan_max
    };
    Ok(Page {
        next: page_end(from, limit, scanned, head, &events),
        head,
        events,
    })
}

/// What [`decide_batch`] decided: the rows to insert (event, stream
/// version) and each conditional append's outcome (with whether its
/// positions count from the batch's first row).
pub type Decided = (Vec<(NewEvent, i64)>, Vec<(AppendOutcome, bool)>);

/// Decides a PostgreSQL batch's appends under the `event_head` row lock:
/// `heads` holds the current head of every stream the batch touches and
/// `ids` where each of its event ids already is. Plain events take their
/// stream's next version; each conditional append is checked against the
/// heads as the batch's earlier appends left them. Returns the rows to
/// insert (event, version) in position order and each conditional
/// append's outcome; positions in an outcome marked `true` count from the
/// batch's first row (0), the caller adds the first position.
pub fn decide_batch(
    plain: &[NewEvent],
    conditional: &[&StreamAppend],
    mut heads: HashMap<String, StreamHead>,
    ids: &HashMap<[u8; 16], IdAt>,
) -> Decided {
    fn next_version(heads: &mut HashMap<String, StreamHead>, e: &NewEvent) -> i64 {
        let v = heads.get(&e.stream).map_or(0, |h| h.version + 1);
        heads.insert(
            e.stream.clone(),
            StreamHead {
                version: v,
                deleted: e.event_type == TOMBSTONE_TYPE,
            },
        );
        v
    }
    let mut rows: Vec<(NewEvent, i64)> = Vec::with_capacity(plain.len());
    for e in plain {
        let v = next_version(&mut heads, e);
        rows.push((e.clone(), v));
    }
    // Ids appended by this batch, at positions relative to its first row.
    let mut batch_ids: HashMap<[u8; 16], IdAt> = HashMap::new();
    let mut outcomes = Vec::with_capacity(conditional.len());
    for a in conditional {
        let lookup = |map: &HashMap<[u8; 16], IdAt>| -> Vec<Option<IdAt>> {
            a.events
                .iter()
                .map(|e| e.event_id.and_then(|id| map.get(&id).cloned()))
                .collect()
        };
        if let Some(answer) = replay(a, &lookup(&batch_ids)) {
            outcomes.push((answer, true));
            continue;
        }
        if let Some(answer) = replay(a, &lookup(ids)) {
            outcomes.push((answer, false));
            continue;
        }
        match decide(heads.get(&a.stream).copied(), a.expected) {
            Err(refused) => outcomes.push((refused, false)),
            Ok(_) => {
                let first = rows.len() as i64;
                let mut version = 0;
                for e in &a.events {
                    let mut e = e.clone();
                    e.stream.clone_from(&a.stream);
                    version = next_version(&mut heads, &e);
                    if let Some(id) = e.event_id {
                        batch_ids.insert(
                            id,
                            IdAt {
                                position: rows.len() as i64,
                                stream: a.stream.clone(),
                                version,
                            },
                        );
                    }
                    rows.push((e, version));
                }
                outcomes.push((
                    AppendOutcome::Appended {
                        first_position: first,
                        last_position: rows.len() as i64 - 1,
                        version,
                    },
                    true,
                ));
            }
        }
    }
    (rows, outcomes)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ev(stream: &str, id: u8) -> NewEvent {
        NewEvent {
            event_id: Some([id; 16]),
            ..NewEvent::json_bytes(stream, "T", b"{}".to_vec())
        }
    }

    #[test]
    fn expected_versions() {
        let at = |v| {
            Some(StreamHead {
                version: v,
                deleted: false,
            })
        };
        assert_eq!(decide(None, Expected::Any), Ok(0));
        assert_eq!(decide(None, Expected::NoStream), Ok(0));
        assert_eq!(
            decide(None, Expected::Exists),
            Err(AppendOutcome::WrongExpectedVersion { current: None })
        );
        assert_eq!(
            decide(None, Expected::Version(0)),
            Err(AppendOutcome::WrongExpectedVersion { current: None })
        );
        assert_eq!(decide(at(3), Expected::Version(3)), Ok(4));
        assert_eq!(decide(at(3), Expected::Exists), Ok(4));
        assert_eq!(
            decide(at(3), Expected::NoStream),
            Err(AppendOutcome::WrongExpectedVersion { current: Some(3) })
        );
        assert_eq!(
            decide(
                Some(StreamHead {
                    version: 4,
                    deleted: true
                }),
                Expected::Any
            ),
            Err(AppendOutcome::StreamDeleted)
        );
    }

    #[test]
    fn a_batch_decides_racing_appends_in_order() {
        let a = StreamAppend {
            stream: "s-1".into(),
            expected: Expected::NoStream,
            events: vec![ev("s-1", 1), ev("s-1", 2)],
        };
        let b = StreamAppend {
            stream: "s-1".into(),
            expected: Expected::NoStream,
            events: vec![ev("s-1", 3)],
        };
        let (rows, outcomes) = decide_batch(
            &[NewEvent::json_bytes("other", "X", b"{}".to_vec())],
            &[&a, &b, &a],
            HashMap::new(),
            &HashMap::new(),
        );
        assert_eq!(rows.len(), 3);
        assert_eq!(
            outcomes[0].0,
            AppendOutcome::Appended {
                first_position: 1,
                last_position: 2,
                version: 1
            }
        );
        assert_eq!(
            outcomes[1].0,
            AppendOutcome::WrongExpectedVersion { current: Some(1) }
        );
        // The same ids again in one batch: the first's answer.
        assert_eq!(
            outcomes[2],
            (
                AppendOutcome::AlreadyAppended {
                    first_position: 1,
                    last_position: 2,
                    version: 1
                },
                true
            )
        );
    }
}
