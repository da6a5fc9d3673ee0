//! Storage: one handle over the embedded SQLite store or a shared PostgreSQL.
//!
//! Both dialects keep the same contract, which every service relies on:
//! - writes go through one writer per process that applies a whole batch of
//!   commands in one transaction and commits once (group commit); a caller is
//!   answered only after the commit, so a 2xx means durable;
//! - a write command reports expected outcomes (slot taken, not found) as
//!   values, and returns `Err` only when the database itself failed;
//! - events appended by a command commit in the same transaction (the outbox),
//!   at positions that readers can follow without ever skipping one.
//!
//! Services write their SQL per dialect next to their own code and call
//! [`sqlite::SqliteStore::write`] / [`postgres::PgStore::write`].

pub mod bulk;
pub mod columns;
#[macro_use]
pub mod eventlog;
pub mod horizon;
pub mod invalidate;
pub mod migrate;
pub mod postgres;
pub mod sqlite;
pub mod streams;

use std::sync::Arc;

pub use columns::Columns;
pub use eventlog::{NewEvent, StoredEvent};
pub use migrate::MigrationSet;

/// The store's own tables, which every store has rows in once opened or
/// served (migrations applied, the PII key's fingerprint, consumer
/// positions): not data.
pub const STORE_BOOKKEEPING_TABLES: [&str; 3] = ["schema_versions", "meta", "consumer_positions"];

/// `sql` with SQLite's numbered placeholders (`?1`) as PostgreSQL's (`$1`),
/// for statements whose text is otherwise the same in both dialects.
pub fn pg_placeholders(sql: &str) -> String {
    let mut out = String::with_capacity(sql.len());
    let mut chars = sql.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '?' && chars.peek().is_some_and(|d| d.is_ascii_digit()) {
            out.push('$');
        } else {
            out.push(c);
        }
    }
    out
}

/// A store handle, cheap to clone.
#[derive(Clone)]
pub enum Store {
    Sqlite(Arc<sqlite::SqliteStore>),
    Postgres(Arc<postgres::PgStore>),
}

/// Where the data lives, parsed from `--store`.
#[derive(Clone, Debug, PartialEq)]
pub enum StoreUrl {
    Sqlite(std::path::PathBuf),
    Postgres(String),
}

impl std::str::FromStr for StoreUrl {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        if let Some(path) = s.strip_prefix("sqlite:") {
            if path.is_empty() {
                return Err(
                    "sqlite store needs a path, e.g. sqlite:./throng-data/throng.db".into(),
                );
            }
            Ok(StoreUrl::Sqlite(path.into()))
        } else if s.starts_with("postgres://") || s.starts_with("postgresql://") {
            Ok(StoreUrl::Postgres(s.to_string()))
        } else {
            Err(format!(
                "unknown store '{s}': accepted are sqlite:PATH and postgres://user@host:port/db"
            ))
        }
    }
}

impl std::fmt::Display for StoreUrl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StoreUrl::Sqlite(p) => write!(f, "sqlite:{}", p.display()),
            // Never print a password that may be in the URL.
            StoreUrl::Postgres(url) => match tokio_postgres::Config::from_str_lossy(url) {
                Some(desc) => write!(f, "postgres://{desc}"),
                None => write!(f, "postgres://(unparsable url)"),
            },
        }
    }
}

trait ConfigDescribe {
    fn from_str_lossy(url: &str) -> Option<String>;
}
impl ConfigDescribe for tokio_postgres::Config {
    fn from_str_lossy(url: &str) -> Option<String> {
        let cfg: tokio_postgres::Config = url.parse().ok()?;
        let host = cfg
            .get_hosts()
            .first()
            .map(|h| match h {
                tokio_postgres::config::Host::Tcp(h) => h.clone(),
                #[cfg(unix)]
                tokio_postgres::config::Host::Unix(p) => p.display().to_string(),
            })
            .unwrap_or_default();
        let port = cfg.get_ports().first().copied().unwrap_or(5432);
        Some(format!(
            "{}@{host}:{port}/{}",
            cfg.get_user().unwrap_or(""),
            cfg.get_dbname().unwrap_or("")
        ))
    }
}

/// Limits of the store, all explicit.
#[derive(Clone, Debug)]
pub struct StoreLimits {
    /// Commands applied in one transaction at most.
    pub batch_commands_max: usize,
    /// Write commands waiting for the writer at most; senders wait past it.
    pub write_queue_max: usize,
    /// Read connections (SQLite) or pooled connections (PostgreSQL).
    pub read_connections: usize,
    /// SQLite page cache of the writer's connection, in KiB (each reader
    /// gets a quarter, at least 512 KiB; readers read through a memory map,
    /// so theirs stays nearly empty).
    pub sqlite_cache_kib: i64,
    /// How long a request waits for a PostgreSQL connection before 503.
    pub pg_wait_ms: u64,
    /// PostgreSQL writer tasks per node, each with its own connection and
    /// batch (SQLite has one writer).
    pub pg_writers: usize,
    /// Under load (the previous batch had at least `COMMIT_DELAY_BATCH_MIN`
    /// commands), the SQLite writer waits this long for more commands before
    /// committing, so more of them share one fsync (as PostgreSQL's
    /// `commit_delay`). 0 turns it off.
    pub commit_delay_us: u64,
}

impl Default for StoreLimits {
    fn default() -> Self {
        StoreLimits {
            batch_commands_max: 512,
            write_queue_max: 8192,
            read_connections: 4,
            // 4 MiB, was 16: the writer's cache fills with every page it
            // touches and keeps them, and the voting writer only appends, so
            // at 16 MiB it was 17 MiB of a 5M-voter server's resident memory
            // with no hit to show for it. Booking's try-register and the
            // comments POST (random pages) measured no slower at 4 or 2 MiB
            // than at 16: misses are `pread`s from the OS page cache.
            sqlite_cache_kib: 4 * 1024,
            pg_wait_ms: 3000,
            // 2, was 4: every node's writers share one PostgreSQL, and more
            // writers than its cores make smaller batches that wait on each
            // other's row locks and commits. Booking try-register on 2
            // cores (BENCHMARKS.md, "Writers per node"): one node the same
            // with 2 or 4; 2 and 3 nodes slower than one with 4 writers
            // each, not with 2.
            pg_writers: 2,
            commit_delay_us: 0,
        }
    }
}

/// Why a store operation failed. Expected domain outcomes are never errors.
#[derive(Debug, Clone, thiserror::Error)]
pub enum StoreError {
    /// The database cannot be reached or refused the work: answer 503.
    #[error("store unavailable: {0}")]
    Unavailable(String),
    /// A bug or corrupted state: answer 500 and log it.
    #[error("store error: {0}")]
    Internal(String),
}

impl From<rusqlite::Error> for StoreError {
    fn from(e: rusqlite::Error) -> Self {
        match &e {
            rusqlite::Error::SqliteFailure(f, _)
                if matches!(
                    f.code,
                    rusqlite::ErrorCode::DatabaseBusy
                        | rusqlite::ErrorCode::DatabaseLocked
                        | rusqlite::ErrorCode::DiskFull
                        | rusqlite::ErrorCode::CannotOpen
                        | rusqlite::ErrorCode::SystemIoFailure
                        | rusqlite::ErrorCode::ReadOnly
                ) =>
            {
                StoreError::Unavailable(e.to_string())
            }
            _ => StoreError::Internal(e.to_string()),
        }
    }
}

impl From<tokio_postgres::Error> for StoreError {
    fn from(e: tokio_postgres::Error) -> Self {
        // A closed connection or a server-side error of the "connection" or
        // "operator intervention" classes means the database went away.
        // A deadlock victim or a serialization failure (class 40) is work
        // the database refused this time: 503 with Retry-After, not 500.
        let unavailable = e.is_closed()
            || e.code().is_none()
            || e.code().map(|c| {
                let code = c.code();
                code.starts_with("08")
                    || code.starts_with("57")
                    || code.starts_with("53")
                    || code.starts_with("40")
            }) == Some(true);
        if unavailable {
            StoreError::Unavailable(e.to_string())
        } else {
            StoreError::Internal(format!(
                "{e}: {}",
                e.as_db_error().map(|d| d.message()).unwrap_or("")
            ))
        }
    }
}

impl From<deadpool_postgres::PoolError> for StoreError {
    fn from(e: deadpool_postgres::PoolError) -> Self {
        StoreError::Unavailable(e.to_string())
    }
}

impl Store {
    /// Opens the store with its own tables only (the event log, consumer
    /// positions, `meta`) and starts the writer.
    pub async fn open(url: &StoreUrl, limits: StoreLimits) -> anyhow::Result<Store> {
        Store::open_with(url, limits, &[]).await
    }

    /// Opens the store, applies its own migrations and `services`' (the app
    /// passes every service's set) and starts the writer.
    pub async fn open_with(
        url: &StoreUrl,
        limits: StoreLimits,
        services: &[&'static migrate::MigrationSet],
    ) -> anyhow::Result<Store> {
        Ok(match url {
            StoreUrl::Sqlite(path) => {
                Store::Sqlite(sqlite::SqliteStore::open(path, &limits, services)?)
            }
            StoreUrl::Postgres(url) => {
                Store::Postgres(postgres::PgStore::open(url, &limits, services).await?)
            }
        })
    }

    /// `sqlite` applied to the SQLite handle or `postgres` to the
    /// PostgreSQL one, whichever this store is: how a service chooses its
    /// storage implementation, once.
    pub fn choose<T>(
        &self,
        sqlite: impl FnOnce(&Arc<sqlite::SqliteStore>) -> T,
        postgres: impl FnOnce(&Arc<postgres::PgStore>) -> T,
    ) -> T {
        match self {
            Store::Sqlite(s) => sqlite(s),
            Store::Postgres(p) => postgres(p),
        }
    }

    pub fn dialect(&self) -> &'static str {
        match self {
            Store::Sqlite(_) => "sqlite",
            Store::Postgres(_) => "postgres",
        }
    }

    /// Cheap round trip to the database (for `/ready`).
    pub async fn ping(&self) -> Result<(), StoreError> {
        match self {
            Store::Sqlite(s) => {
                s.read(|c| Ok(c.query_row("SELECT 1", [], |_| Ok(()))?))
                    .await
            }
            Store::Postgres(p) => {
                let client = p.client().await?;
                client.simple_query("SELECT 1").await?;
                Ok(())
            }
        }
    }

    /// The events of one type in the streams of one category (`{category}-...`)
    /// among the next `limit` events after `position`, and how far that scan
    /// reached: a service's worker (booking's notifier) reads its own
    /// streams only, never another stream's event of a matching type nor the
    /// other services' payloads.
    pub async fn events_of_type_after(
        &self,
        position: i64,
        limit: i64,
        category: &'static str,
        event_type: &'static str,
    ) -> Result<eventlog::TypeScan, StoreError> {
        match self {
            Store::Sqlite(s) => {
                s.read(move |c| {
                    eventlog::sqlite_events_of_type_after(c, position, limit, category, event_type)
                })
                .await
            }
            Store::Postgres(p) => {
                eventlog::pg_events_of_type_after(p, position, limit, category, event_type).await
            }
        }
    }

    /// Events after `position`, in position order, at most `limit`.
    pub async fn events_after(
        &self,
        position: i64,
        limit: i64,
    ) -> Result<Vec<StoredEvent>, StoreError> {
        match self {
            Store::Sqlite(s) => {
                s.read(move |c| eventlog::sqlite_events_after(c, position, limit))
                    .await
            }
            Store::Postgres(p) => eventlog::pg_events_after(p, position, limit).await,
        }
    }

    /// Appends to a stream if it is as `append.expected` says (decided in
    /// the writer's batch, see `streams`).
    pub async fn append_to_stream(
        &self,
        append: streams::StreamAppend,
    ) -> Result<streams::AppendOutcome, StoreError> {
        match self {
            Store::Sqlite(s) => {
                s.write(move |c| streams::sqlite_append_stream(c, &append))
                    .await
            }
            Store::Postgres(p) => {
                let slot = p
                    .write(move |tx| {
                        let slot = tx.append_to_stream(append.clone());
                        Box::pin(async move { Ok(slot) })
                    })
                    .await?;
                let outcome = slot.lock().unwrap().take();
                outcome.ok_or_else(|| StoreError::Internal("an append was not decided".into()))
            }
        }
    }

    /// A stream's last event (`None`: no such stream).
    pub async fn stream_head(
        &self,
        stream: &str,
    ) -> Result<Option<streams::StreamHead>, StoreError> {
        let stream = stream.to_string();
        match self {
            Store::Sqlite(s) => {
                s.read(move |c| streams::sqlite_stream_head(c, &stream))
                    .await
            }
            Store::Postgres(p) => streams::pg_stream_head(&p.client().await?, &stream).await,
        }
    }

    /// A stream's events from `version` on (forward) or down from it
    /// (backward), at most `limit`.
    pub async fn read_stream(
        &self,
        stream: &str,
        version: i64,
        forward: bool,
        limit: i64,
    ) -> Result<Vec<StoredEvent>, StoreError> {
        let stream = stream.to_string();
        match self {
            Store::Sqlite(s) => {
                s.read_blocking(move |c| {
                    streams::sqlite_read_stream(c, &stream, version, forward, limit)
                })
                .await
            }
            Store::Postgres(p) => {
                streams::pg_read_stream(&p.client().await?, &stream, version, forward, limit).await
            }
        }
    }

    /// A page of the global order from position `from` on (see
    /// `streams::sqlite_scan`).
    pub async fn scan_events(
        &self,
        from: i64,
        limit: i64,
        scan_max: i64,
        filter: streams::Filter,
    ) -> Result<streams::Page, StoreError> {
        match self {
            Store::Sqlite(s) => {
                s.read_blocking(move |c| streams::sqlite_scan(c, from, limit, scan_max, &filter))
                    .await
            }
            Store::Postgres(p) => {
                streams::pg_scan(p, &p.client().await?, from, limit, scan_max, &filter).await
            }
        }
    }

    /// The last committed position (0 when the log is empty).
    pub async fn head_position(&self) -> Result<i64, StoreError> {
        match self {
            Store::Sqlite(s) => s.read(streams::sqlite_head_position).await,
            Store::Postgres(p) => streams::pg_head_position(p, &p.client().await?).await,
        }
    }

    /// The durable position of a log consumer (0 when it never saved one).
    pub async fn consumer_position(&self, consumer: &str) -> Result<i64, StoreError> {
        let consumer = consumer.to_string();
        match self {
            Store::Sqlite(s) => {
                s.read(move |c| {
                    use rusqlite::OptionalExtension;
                    Ok(c.query_row(
                        "SELECT position FROM consumer_positions WHERE consumer = ?1",
                        [&consumer],
                        |r| r.get(0),
                    )
                    .optional()?
                    .unwrap_or(0))
                })
                .await
            }
            Store::Postgres(p) => {
                let client = p.client().await?;
                let row = client
                    .query_opt(
                        "SELECT position FROM consumer_positions WHERE consumer = $1",
                        &[&consumer],
                    )
                    .await?;
                Ok(row.map(|r| r.get(0)).unwrap_or(0))
            }
        }
    }

    /// Appends one event on its own (a write with no other state change, such
    /// as the summary of a bulk load).
    pub async fn append_event(&self, event: NewEvent) -> Result<(), StoreError> {
        match self {
            Store::Sqlite(s) => {
                s.write(move |c| eventlog::sqlite_append(c, &event).map(|_| ()))
                    .await
            }
            Store::Postgres(p) => {
                p.write(move |tx| {
                    tx.append(event.clone());
                    Box::pin(async { Ok(()) })
                })
                .await
            }
        }
    }

    /// Whether a worker that holds `lease_ms` on a consumer, last written
    /// `since`, renews it now while it idles (nothing to save).
    ///
    /// PostgreSQL: at a third of the lease, so a live node keeps it and a
    /// dead node's lapses for another to take. SQLite: never; one process
    /// serves the store (`sqlite::lock_for_serving`) and a service's own
    /// consumers are not leased through the API, so nobody else can take a
    /// lapsed lease while the owner lives, and the claim after a restart
    /// finds it lapsed. An idle SQLite server thus commits nothing.
    pub fn idle_lease_renewal_due(&self, since: std::time::Instant, lease_ms: i64) -> bool {
        match self {
            Store::Sqlite(_) => false,
            Store::Postgres(_) => {
                since.elapsed() >= std::time::Duration::from_millis(lease_ms.max(0) as u64 / 3)
            }
        }
    }

    /// Takes or renews `owner`'s lease on a log consumer; returns the
    /// consumer's durable position when `owner` holds the lease, `None` when
    /// another owner's lease is still running.
    pub async fn claim_consumer(
        &self,
        consumer: &str,
        owner: &str,
        lease_ms: i64,
    ) -> Result<Option<i64>, StoreError> {
        let (consumer, owner) = (consumer.to_string(), owner.to_string());
        let now = crate::base::clock::now_ms();
        let until = now + lease_ms;
        match self {
            Store::Sqlite(s) => {
                s.write(move |c| {
                    use rusqlite::OptionalExtension;
                    c.prepare_cached(
                        "INSERT INTO consumer_positions (consumer, position) VALUES (?1, 0)
                         ON CONFLICT (consumer) DO NOTHING",
                    )?
                    .execute([&consumer])?;
                    Ok(c.prepare_cached(
                        "UPDATE consumer_positions SET lease_owner = ?2, lease_until_ms = ?3
                         WHERE consumer = ?1 AND (lease_owner = ?2 OR lease_owner IS NULL OR lease_until_ms < ?4)
                         RETURNING position",
                    )?
                    .query_row(rusqlite::params![consumer, owner, until, now], |r| r.get(0))
                    .optional()?)
                })
                .await
            }
            Store::Postgres(p) => {
                p.write(move |tx| {
                    let (consumer, owner) = (consumer.clone(), owner.clone());
                    Box::pin(async move {
                        tx.tx
                            .execute(
                                "INSERT INTO consumer_positions (consumer, position) VALUES ($1, 0)
                                 ON CONFLICT (consumer) DO NOTHING",
                                &[&consumer],
                            )
                            .await?;
                        let row = tx
                            .tx
                            .query_opt(
                                "UPDATE consumer_positions SET lease_owner = $2, lease_until_ms = $3
                                 WHERE consumer = $1 AND (lease_owner = $2 OR lease_owner IS NULL OR lease_until_ms < $4)
                                 RETURNING position",
                                &[&consumer, &owner, &until, &now],
                            )
                            .await?;
                        Ok(row.map(|r| r.get(0)))
                    })
                })
                .await
            }
        }
    }

    /// Renews the lease `owner` holds on a log consumer (even one that
    /// lapsed, while no other owner took it); returns the consumer's durable
    /// position, `None` when `owner` does not hold it.
    pub async fn renew_consumer(
        &self,
        consumer: &str,
        owner: &str,
        lease_ms: i64,
    ) -> Result<Option<i64>, StoreError> {
        let (consumer, owner) = (consumer.to_string(), owner.to_string());
        let until = crate::base::clock::now_ms() + lease_ms;
        match self {
            Store::Sqlite(s) => {
                s.write(move |c| {
                    use rusqlite::OptionalExtension;
                    Ok(c.prepare_cached(
                        "UPDATE consumer_positions SET lease_until_ms = ?3
                         WHERE consumer = ?1 AND lease_owner = ?2 RETURNING position",
                    )?
                    .query_row(rusqlite::params![consumer, owner, until], |r| r.get(0))
                    .optional()?)
                })
                .await
            }
            Store::Postgres(p) => {
                p.write(move |tx| {
                    let (consumer, owner) = (consumer.clone(), owner.clone());
                    Box::pin(async move {
                        let row = tx
                            .tx
                            .query_opt(
                                "UPDATE consumer_positions SET lease_until_ms = $3
                                 WHERE consumer = $1 AND lease_owner = $2 RETURNING position",
                                &[&consumer, &owner, &until],
                            )
                            .await?;
                        Ok(row.map(|r| r.get(0)))
                    })
                })
                .await
            }
        }
    }

    /// Ends `owner`'s lease on a log consumer at once; `false` when `owner`
    /// does not hold it.
    pub async fn release_consumer(&self, consumer: &str, owner: &str) -> Result<bool, StoreError> {
        let (consumer, owner) = (consumer.to_string(), owner.to_string());
        match self {
            Store::Sqlite(s) => {
                s.write(move |c| {
                    Ok(c.prepare_cached(
                        "UPDATE consumer_positions SET lease_owner = NULL, lease_until_ms = 0
                         WHERE consumer = ?1 AND lease_owner = ?2",
                    )?
                    .execute(rusqlite::params![consumer, owner])?
                        == 1)
                })
                .await
            }
            Store::Postgres(p) => {
                p.write(move |tx| {
                    let (consumer, owner) = (consumer.clone(), owner.clone());
                    Box::pin(async move {
                        Ok(tx
                            .tx
                            .execute(
                                "UPDATE consumer_positions SET lease_owner = NULL, lease_until_ms = 0
                                 WHERE consumer = $1 AND lease_owner = $2",
                                &[&consumer, &owner],
                            )
                            .await?
                            == 1)
                    })
                })
                .await
            }
        }
    }

    /// Saves a consumer's position and renews the lease, only while `owner`
    /// holds it; `false` means the lease was lost to another owner.
    pub async fn save_leased_position(
        &self,
        consumer: &str,
        owner: &str,
        position: i64,
        lease_ms: i64,
    ) -> Result<bool, StoreError> {
        let (consumer, owner) = (consumer.to_string(), owner.to_string());
        let until = crate::base::clock::now_ms() + lease_ms;
        match self {
            Store::Sqlite(s) => {
                s.write(move |c| {
                    Ok(c.prepare_cached(
                        "UPDATE consumer_positions SET position = ?3, lease_until_ms = ?4
                         WHERE consumer = ?1 AND lease_owner = ?2",
                    )?
                    .execute(rusqlite::params![consumer, owner, position, until])?
                        == 1)
                })
                .await
            }
            Store::Postgres(p) => {
                p.write(move |tx| {
                    let (consumer, owner) = (consumer.clone(), owner.clone());
                    Box::pin(async move {
                        Ok(tx
                            .tx
                            .execute(
                                "UPDATE consumer_positions SET position = $3, lease_until_ms = $4
                                 WHERE consumer = $1 AND lease_owner = $2",
                                &[&consumer, &owner, &position, &until],
                            )
                            .await?
                            == 1)
                    })
                })
                .await
            }
        }
    }

    /// A value from the `meta` table.
    /// Tables that hold at least one row, besides the store's own
    /// bookkeeping (`STORE_BOOKKEEPING_TABLES`): whether the store holds
    /// data, whoever wrote it. One `EXISTS` per table.
    pub async fn tables_with_rows(&self) -> Result<Vec<String>, StoreError> {
        const SKIP: &[&str] = &STORE_BOOKKEEPING_TABLES;
        match self {
            Store::Sqlite(s) => {
                s.read(|c| {
                    let names: Vec<String> = c
                        .prepare(
                            "SELECT name FROM sqlite_master WHERE type = 'table' \
                             AND name NOT LIKE 'sqlite\\_%' ESCAPE '\\' ORDER BY name",
                        )?
                        .query_map([], |r| r.get(0))?
                        .collect::<Result<_, _>>()?;
                    let mut with_rows = Vec::new();
                    for name in names.into_iter().filter(|n| !SKIP.contains(&n.as_str())) {
                        let sql = format!(
                            "SELECT EXISTS (SELECT 1 FROM \"{}\")",
                            name.replace('"', "\"\"")
                        );
                        if c.query_row(&sql, [], |r| r.get::<_, bool>(0))? {
                            with_rows.push(name);
                        }
                    }
                    Ok(with_rows)
                })
                .await
            }
            Store::Postgres(p) => {
                let client = p.client().await?;
                let rows = client
                    .query(
                        "SELECT table_name::text FROM information_schema.tables \
                         WHERE table_schema = current_schema() AND table_type = 'BASE TABLE' \
                         ORDER BY 1",
                        &[],
                    )
                    .await?;
                let mut with_rows = Vec::new();
                for row in rows {
                    let name: String = row.get(0);
                    if SKIP.contains(&name.as_str()) {
                        continue;
                    }
                    let sql = format!(
                        "SELECT EXISTS (SELECT 1 FROM \"{}\")",
                        name.replace('"', "\"\"")
                    );
                    if client.query_one(&sql, &[]).await?.get::<_, bool>(0) {
                        with_rows.push(name);
                    }
                }
                Ok(with_rows)
            }
        }
    }

    pub async fn meta_get(&self, key: &str) -> Result<Option<String>, StoreError> {
        let key = key.to_string();
        match self {
            Store::Sqlite(s) => {
                s.read(move |c| {
                    use rusqlite::OptionalExtension;
                    Ok(
                        c.query_row("SELECT value FROM meta WHERE key = ?1", [&key], |r| {
                            r.get(0)
                        })
                        .optional()?,
                    )
                })
                .await
            }
            Store::Postgres(p) => {
                let client = p.client().await?;
                let row = client
                    .query_opt("SELECT value FROM meta WHERE key = $1", &[&key])
                    .await?;
                Ok(row.map(|r| r.get(0)))
            }
        }
    }

    /// Sets `key` to `value`, replacing any value.
    pub async fn meta_set(&self, key: &str, value: &str) -> Result<(), StoreError> {
        let (key, value) = (key.to_string(), value.to_string());
        const UPSERT_SQLITE: &str = "INSERT INTO meta (key, value) VALUES (?1, ?2)
             ON CONFLICT (key) DO UPDATE SET value = excluded.value";
        const UPSERT_PG: &str = "INSERT INTO meta (key, value) VALUES ($1, $2)
             ON CONFLICT (key) DO UPDATE SET value = excluded.value";
        match self {
            Store::Sqlite(s) => {
                s.write(move |c| Ok(c.execute(UPSERT_SQLITE, [&key, &value]).map(|_| ())?))
                    .await
            }
            Store::Postgres(p) => {
                p.write(move |tx| {
                    let (key, value) = (key.clone(), value.clone());
                    Box::pin(async move {
                        Ok(tx
                            .tx
                            .execute(UPSERT_PG, &[&key, &value])
                            .await
                            .map(|_| ())?)
                    })
                })
                .await
            }
        }
    }

    /// Sets `key` only if it has no value yet; returns the value now stored.
    pub async fn meta_set_once(&self, key: &str, value: &str) -> Result<String, StoreError> {
        let (key, value) = (key.to_string(), value.to_string());
        match self {
            Store::Sqlite(s) => {
                s.write(move |c| {
                    c.execute(
                        "INSERT INTO meta (key, value) VALUES (?1, ?2) ON CONFLICT (key) DO NOTHING",
                        [&key, &value],
                    )?;
                    Ok(c.query_row("SELECT value FROM meta WHERE key = ?1", [&key], |r| r.get(0))?)
                })
                .await
            }
            Store::Postgres(p) => {
                p.write(move |tx| {
                    let (key, value) = (key.clone(), value.clone());
                    Box::pin(async move {
                        tx.tx
                            .execute(
                                "INSERT INTO meta (key, value) VALUES ($1, $2) ON CONFLICT (key) DO NOTHING",
                                &[&key, &value],
                            )
                            .await?;
                        let row = tx.tx.query_one("SELECT value FROM meta WHERE key = $1", &[&key]).await?;
                        Ok(row.get(0))
                    })
                })
                .await
            }
        }
    }
}
