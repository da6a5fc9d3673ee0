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
//! Code above the store writes each storage operation once, against the
//! seam ([`seam`]: statements, parameters, rows, a transaction handle), and
//! runs it through [`Store::write`] or [`Store::read`]; the drivers
//! (`sqlite.rs`, `postgres.rs`, dispatched in `driver.rs`) run it.

pub mod backup;
pub mod bulk;
pub mod columns;
mod driver;
#[macro_use]
pub mod eventlog;
pub mod horizon;
pub mod invalidate;
pub mod migrate;
pub mod postgres;
pub mod seam;
pub mod sqlite;
pub mod streams;

pub use columns::Columns;
pub use driver::Autocommit;
pub use eventlog::{NewEvent, StoredEvent};
pub use migrate::MigrationSet;
pub use seam::{Conn, Group, Param, Row, Sql, StoreFuture, Tx, Value};

/// The store's own tables, which every store has rows in once opened or
/// served (migrations applied, the PII key's fingerprint, consumer
/// positions): not data.
pub const STORE_BOOKKEEPING_TABLES: [&str; 7] = [
    "schema_versions",
    "meta",
    "consumer_positions",
    "admin_links",
    "admin_sessions",
    "admin_audit",
    "admin_oidc_states",
];

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

/// A store handle, cheap to clone: the one way above the store to reach
/// the database ([`Store::write`], [`Store::read`] and their kin run storage
/// operations written once against [`seam`]). Which database it is, and
/// what differs between them, is the drivers' business (`driver.rs`).
#[derive(Clone)]
pub struct Store {
    driver: driver::Driver,
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
            // 2 MiB, was 16 and then 4: the writer's cache fills with every
            // page it touches and keeps them, and the voting writer only
            // appends, so at 16 MiB it was 17 MiB of a 5M-voter server's
            // resident memory with no hit to show for it, and at 4 MiB its
            // thread's heap held 8.6 MiB under the voting bench (2.4 at
            // 1 MiB). Booking's try-register and the comments POST (random
            // pages) measured no slower at 4 or 2 MiB than at 16: misses are
            // `pread`s from the OS page cache.
            sqlite_cache_kib: 2 * 1024,
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

/// Statements of the store's own operations, written once.
mod sql {
    use super::Sql;

    pub static PING: Sql = Sql::new("SELECT 1");
    pub static CONSUMER_ENSURE: Sql = Sql::new(
        "INSERT INTO consumer_positions (consumer, position) VALUES (?1, 0)
         ON CONFLICT (consumer) DO NOTHING",
    );
    pub static CONSUMER_CLAIM: Sql = Sql::new(
        "UPDATE consumer_positions SET lease_owner = ?2, lease_until_ms = ?3
         WHERE consumer = ?1 AND (lease_owner = ?2 OR lease_owner IS NULL OR lease_until_ms < ?4)
         RETURNING position",
    );
    pub static CONSUMER_RENEW: Sql = Sql::new(
        "UPDATE consumer_positions SET lease_until_ms = ?3
         WHERE consumer = ?1 AND lease_owner = ?2 RETURNING position",
    );
    pub static CONSUMER_RELEASE: Sql = Sql::new(
        "UPDATE consumer_positions SET lease_owner = NULL, lease_until_ms = 0
         WHERE consumer = ?1 AND lease_owner = ?2",
    );
    pub static CONSUMER_SAVE: Sql = Sql::new(
        "UPDATE consumer_positions SET position = ?3, lease_until_ms = ?4
         WHERE consumer = ?1 AND lease_owner = ?2",
    );
    pub static CONSUMER_POSITION: Sql =
        Sql::new("SELECT position FROM consumer_positions WHERE consumer = ?1");
    pub static META_GET: Sql = Sql::new("SELECT value FROM meta WHERE key = ?1");
    pub static META_SET: Sql = Sql::new(
        "INSERT INTO meta (key, value) VALUES (?1, ?2)
         ON CONFLICT (key) DO UPDATE SET value = excluded.value",
    );
    pub static META_SET_ONCE: Sql =
        Sql::new("INSERT INTO meta (key, value) VALUES (?1, ?2) ON CONFLICT (key) DO NOTHING");
    /// The tables of the store, from each database's catalog.
    pub static TABLES: Sql = Sql::per_dialect(
        "SELECT name FROM sqlite_master WHERE type = 'table' \
         AND name NOT LIKE 'sqlite\\_%' ESCAPE '\\' ORDER BY name",
        "SELECT table_name::text FROM information_schema.tables \
         WHERE table_schema = current_schema() AND table_type = 'BASE TABLE' ORDER BY 1",
    );
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
        Ok(Store {
            driver: driver::Driver::open(url, &limits, services).await?,
        })
    }

    /// Runs `f` as one command of the writer's current batch, in the
    /// batch's transaction; answers after the commit. A command that fails
    /// fails alone. `f` may run more than once (on PostgreSQL a failed batch
    /// is retried command by command), always in a fresh transaction, so it
    /// must have no effects outside the database.
    pub async fn write<T, F>(&self, f: F) -> Result<T, StoreError>
    where
        T: Send + 'static,
        F: for<'a> Fn(&'a Tx<'a>) -> StoreFuture<'a, T> + Send + Sync + 'static,
    {
        self.driver.write(f, WriteKind::Guarded).await
    }

    /// Like [`Store::write`], for commands whose statements fail only when
    /// the database does: on SQLite without the command's own SAVEPOINT
    /// (such a failure rolls back its whole batch), which saves the writer
    /// the copy of every page the command touches (~1 us a try-register).
    pub async fn write_unguarded<T, F>(&self, f: F) -> Result<T, StoreError>
    where
        T: Send + 'static,
        F: for<'a> Fn(&'a Tx<'a>) -> StoreFuture<'a, T> + Send + Sync + 'static,
    {
        self.driver.write(f, WriteKind::Unguarded).await
    }

    /// Like [`Store::write`], for a command that erases data (a person
    /// forgotten, answers past their retention), answering once no file of
    /// the store holds a copy of what it deleted. On SQLite every connection
    /// runs `secure_delete`, which zeroes deleted rows (and freed pages) in
    /// the database file; the WAL still holds the page images of earlier
    /// commits, so after committing a batch with such a command the one
    /// writer copies the WAL into the database file and truncates it to
    /// zero bytes (`wal_checkpoint(TRUNCATE)`) before answering. SQLite
    /// answers a truncation busy at once while another checkpoint runs (the
    /// store's checkpointer, a backup tool), so the writer tries again until
    /// it finishes, for up to 10 s. Should readers or other checkpoints hold
    /// the WAL past that, the command still answers (it committed), a
    /// warning is logged and the checkpointer retries the truncation every
    /// [`sqlite::CHECKPOINT_INTERVAL_MS`] until it succeeds. On PostgreSQL a
    /// plain write: deleted tuples stay in their pages until VACUUM and
    /// their page reuse, and in WAL segments until recycled (SECURITY.md
    /// says what the operator configures).
    pub async fn write_erasing<T, F>(&self, f: F) -> Result<T, StoreError>
    where
        T: Send + 'static,
        F: for<'a> Fn(&'a Tx<'a>) -> StoreFuture<'a, T> + Send + Sync + 'static,
    {
        self.driver.write(f, WriteKind::Erasing).await
    }

    /// Runs `f` in a transaction of its own, committed alone outside the
    /// writer's group commit (on SQLite on a connection of its own, with
    /// its own fsync; on PostgreSQL on a pooled connection): the bench's
    /// comparison designs, which show what group commit buys. Nothing is
    /// appended to the event log.
    pub async fn write_alone<T, F>(&self, f: F) -> Result<T, StoreError>
    where
        T: Send + 'static,
        F: for<'a> FnOnce(&'a Conn<'a>) -> StoreFuture<'a, T> + Send + 'static,
    {
        self.driver.write_alone(f).await
    }

    /// Runs `item` with the other commands of group `G` in the writer's
    /// current batch, where writers are shared (see [`Group`]); where one
    /// process writes, as a command of its own. Answers after the commit.
    pub async fn write_grouped<G: Group>(&self, item: G::Item) -> Result<G::Out, StoreError> {
        self.driver.write_grouped::<G>(item).await
    }

    /// Starts a bulk load that empties `tables` and fills them (the seeds;
    /// see [`bulk::BulkLoad`] for each database's way).
    pub async fn bulk_load(
        &self,
        tables: &'static [&'static bulk::BulkTable],
    ) -> anyhow::Result<bulk::BulkLoad> {
        self.driver.bulk_load(tables, bulk::Replaced::All).await
    }

    /// Starts a bulk load that deletes the rows of `tables` whose key
    /// column holds `key`, keeping their other rows, and fills them (a seed
    /// of one election of several; see [`bulk::BulkLoad`]).
    pub async fn bulk_load_replacing(
        &self,
        tables: &'static [bulk::KeyedTable],
        key: i64,
    ) -> anyhow::Result<bulk::BulkLoad> {
        self.driver
            .bulk_load(&[], bulk::Replaced::Key { tables, key })
            .await
    }

    /// Runs `f` on a read connection: a bounded lookup (on SQLite inline on
    /// the calling task's thread).
    pub async fn read<T, F>(&self, f: F) -> Result<T, StoreError>
    where
        T: Send + 'static,
        F: for<'a> FnOnce(&'a Conn<'a>) -> StoreFuture<'a, T> + Send + 'static,
    {
        self.driver.read(f, ReadKind::Inline).await
    }

    /// Runs `f` on a read connection off the async workers: reads that
    /// may scan (reports, exports, loading an index at start).
    pub async fn read_blocking<T, F>(&self, f: F) -> Result<T, StoreError>
    where
        T: Send + 'static,
        F: for<'a> FnOnce(&'a Conn<'a>) -> StoreFuture<'a, T> + Send + 'static,
    {
        self.driver.read(f, ReadKind::Blocking).await
    }

    /// Runs `f` on a read connection that reads pages into its own small
    /// cache instead of through a memory map (SQLite; see
    /// `SqliteStore::read_paged`): point lookups spread over a table far
    /// larger than the server's memory budget.
    pub async fn read_paged<T, F>(&self, f: F) -> Result<T, StoreError>
    where
        T: Send + 'static,
        F: for<'a> FnOnce(&'a Conn<'a>) -> StoreFuture<'a, T> + Send + 'static,
    {
        self.driver.read(f, ReadKind::Paged).await
    }

    /// Runs `f` off the async workers on a read connection for one scan of
    /// a table far larger than the server's memory budget (an index loaded
    /// at start): on SQLite a connection of its own, opened for it with a
    /// small page cache and no memory map and closed after it, so the pages
    /// it read leave the process (through the readers' map they would stay
    /// resident). Stream its rows ([`Conn::for_each`]).
    pub async fn read_scan<T, F>(&self, f: F) -> Result<T, StoreError>
    where
        T: Send + 'static,
        F: for<'a> FnOnce(&'a Conn<'a>) -> StoreFuture<'a, T> + Send + 'static,
    {
        self.driver.read(f, ReadKind::Scan).await
    }

    /// Runs `f` in a transaction of its own, apart from other commands: on
    /// PostgreSQL a pooled connection's transaction (a batch's commands
    /// share one transaction id, every row's `xmin`, which would pair their
    /// rows), committed before this answers; events appended there may be
    /// positioned at once ([`Tx::append_positioned`]). On SQLite, whose
    /// rows carry no transaction id, a command of the one writer as
    /// [`Store::write`]. `f` runs once.
    pub async fn write_apart<T, F>(&self, f: F) -> Result<T, StoreError>
    where
        T: Send + 'static,
        F: for<'a> Fn(&'a Tx<'a>) -> StoreFuture<'a, T> + Send + Sync + 'static,
    {
        self.driver.write_apart(f).await
    }

    /// Which database this is (`sqlite`, `postgres`), for logs, reports and
    /// the names of data directories.
    pub fn dialect(&self) -> &'static str {
        self.driver.dialect()
    }

    /// How this store's writes are made, which decides the designs that
    /// differ by database (see [`Writers`]).
    pub fn writers(&self) -> Writers {
        self.driver.writers()
    }

    /// Cheap round trip to the database (for `/ready`).
    pub async fn ping(&self) -> Result<(), StoreError> {
        self.read(|c| Box::pin(c.query_one(&sql::PING, &[], |_| Ok(()))))
            .await
    }

    /// Whether a worker that holds `lease_ms` on a consumer, last written
    /// `since`, renews it now while it idles (nothing to save).
    ///
    /// Shared writers: at a third of the lease, so a live node keeps it and
    /// a dead node's lapses for another to take. One process: never; it
    /// alone serves the store (`sqlite::lock_for_serving`) and a service's
    /// own consumers are not leased through the API, so nobody else can
    /// take a lapsed lease while the owner lives, and the claim after a
    /// restart finds it lapsed. An idle single-process server thus commits
    /// nothing.
    pub fn idle_lease_renewal_due(&self, since: std::time::Instant, lease_ms: i64) -> bool {
        match self.writers() {
            Writers::OneProcess => false,
            Writers::Shared => {
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
        self.write(move |tx| {
            let (consumer, owner) = (consumer.clone(), owner.clone());
            Box::pin(async move {
                tx.execute(&sql::CONSUMER_ENSURE, &[&consumer]).await?;
                tx.query_opt(
                    &sql::CONSUMER_CLAIM,
                    &[&consumer, &owner, &until, &now],
                    |r| r.int(0),
                )
                .await
            })
        })
        .await
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
        self.write(move |tx| {
            let (consumer, owner) = (consumer.clone(), owner.clone());
            Box::pin(async move {
                tx.query_opt(&sql::CONSUMER_RENEW, &[&consumer, &owner, &until], |r| {
                    r.int(0)
                })
                .await
            })
        })
        .await
    }

    /// Ends `owner`'s lease on a log consumer at once; `false` when `owner`
    /// does not hold it.
    pub async fn release_consumer(&self, consumer: &str, owner: &str) -> Result<bool, StoreError> {
        let (consumer, owner) = (consumer.to_string(), owner.to_string());
        self.write(move |tx| {
            let (consumer, owner) = (consumer.clone(), owner.clone());
            Box::pin(async move {
                Ok(tx
                    .execute(&sql::CONSUMER_RELEASE, &[&consumer, &owner])
                    .await?
                    == 1)
            })
        })
        .await
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
        self.write(move |tx| {
            let (consumer, owner) = (consumer.clone(), owner.clone());
            Box::pin(async move {
                Ok(tx
                    .execute(&sql::CONSUMER_SAVE, &[&consumer, &owner, &position, &until])
                    .await?
                    == 1)
            })
        })
        .await
    }

    /// The durable position of a log consumer (0 when it never saved one).
    pub async fn consumer_position(&self, consumer: &str) -> Result<i64, StoreError> {
        let consumer = consumer.to_string();
        self.read(move |c| {
            Box::pin(async move {
                Ok(
                    c.query_opt(&sql::CONSUMER_POSITION, &[&consumer], |r| r.int(0))
                        .await?
                        .unwrap_or(0),
                )
            })
        })
        .await
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
        self.read(move |c| {
            Box::pin(eventlog::events_of_type_after(
                c, position, limit, category, event_type,
            ))
        })
        .await
    }

    /// Like [`Store::events_of_type_after`], for a few types at once.
    pub async fn events_of_types_after(
        &self,
        position: i64,
        limit: i64,
        category: &'static str,
        event_types: &'static [&'static str],
    ) -> Result<eventlog::TypeScan, StoreError> {
        self.read(move |c| {
            Box::pin(eventlog::events_of_types_after(
                c,
                position,
                limit,
                category,
                event_types,
            ))
        })
        .await
    }

    /// Events after `position`, in position order, at most `limit`.
    pub async fn events_after(
        &self,
        position: i64,
        limit: i64,
    ) -> Result<Vec<StoredEvent>, StoreError> {
        self.read(move |c| Box::pin(eventlog::events_after(c, position, limit)))
            .await
    }

    /// A stream's last event (`None`: no such stream).
    pub async fn stream_head(
        &self,
        stream: &str,
    ) -> Result<Option<streams::StreamHead>, StoreError> {
        let stream = stream.to_string();
        self.read(move |c| Box::pin(async move { streams::stream_head(c, &stream).await }))
            .await
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
        self.read_blocking(move |c| {
            Box::pin(async move { streams::read_stream(c, &stream, version, forward, limit).await })
        })
        .await
    }

    /// A page of the global order from position `from` on (see
    /// `streams::scan`).
    pub async fn scan_events(
        &self,
        from: i64,
        limit: i64,
        scan_max: i64,
        filter: streams::Filter,
    ) -> Result<streams::Page, StoreError> {
        self.read_blocking(move |c| {
            Box::pin(async move { streams::scan(c, from, limit, scan_max, &filter).await })
        })
        .await
    }

    /// The last position readers may read (0 when the log is empty): every
    /// event up to it committed (see `Conn::log_end`).
    pub async fn head_position(&self) -> Result<i64, StoreError> {
        self.read(|c| Box::pin(c.log_end())).await
    }

    /// Tables that hold at least one row, besides the store's own
    /// bookkeeping (`STORE_BOOKKEEPING_TABLES`): whether the store holds
    /// data, whoever wrote it. One `EXISTS` per table.
    pub async fn tables_with_rows(&self) -> Result<Vec<String>, StoreError> {
        self.read_blocking(|c| {
            Box::pin(async move {
                let names = c.query(&sql::TABLES, &[], |r| r.text(0)).await?;
                let mut with_rows = Vec::new();
                for name in names
                    .into_iter()
                    .filter(|n| !STORE_BOOKKEEPING_TABLES.contains(&n.as_str()))
                {
                    let exists = Sql::owned(format!(
                        "SELECT EXISTS (SELECT 1 FROM \"{}\")",
                        name.replace('"', "\"\"")
                    ));
                    if c.query_one(&exists, &[], |r| r.col::<bool>(0)).await? {
                        with_rows.push(name);
                    }
                }
                Ok(with_rows)
            })
        })
        .await
    }

    /// A value from the `meta` table.
    pub async fn meta_get(&self, key: &str) -> Result<Option<String>, StoreError> {
        let key = key.to_string();
        self.read(move |c| {
            Box::pin(async move { c.query_opt(&sql::META_GET, &[&key], |r| r.text(0)).await })
        })
        .await
    }

    /// Sets `key` to `value`, replacing any value.
    pub async fn meta_set(&self, key: &str, value: &str) -> Result<(), StoreError> {
        let (key, value) = (key.to_string(), value.to_string());
        self.write(move |tx| {
            let (key, value) = (key.clone(), value.clone());
            Box::pin(async move {
                tx.execute(&sql::META_SET, &[&key, &value]).await?;
                Ok(())
            })
        })
        .await
    }

    /// Sets `key` only if it has no value yet; returns the value now stored.
    pub async fn meta_set_once(&self, key: &str, value: &str) -> Result<String, StoreError> {
        let (key, value) = (key.to_string(), value.to_string());
        self.write(move |tx| {
            let (key, value) = (key.clone(), value.clone());
            Box::pin(async move {
                tx.execute(&sql::META_SET_ONCE, &[&key, &value]).await?;
                tx.query_one(&sql::META_GET, &[&key], |r| r.text(0)).await
            })
        })
        .await
    }
}

/// How a command of the writer's group commit is run (see [`Store::write`],
/// [`Store::write_unguarded`], [`Store::write_erasing`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum WriteKind {
    /// In a SAVEPOINT of its own on SQLite: it fails alone.
    Guarded,
    /// Without one: its failure fails its batch.
    Unguarded,
    /// Guarded, and the batch's commit leaves no copy of what it deleted
    /// in any file of the store before it answers.
    Erasing,
}

/// How a store's writes are made: what the designs that differ by database
/// turn on (an in-memory decider is sound only where one process makes
/// every write).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Writers {
    /// One process writes through one writer thread, commands in order
    /// (SQLite: `sqlite::lock_for_serving`).
    OneProcess,
    /// Writers of several nodes share the database, commands of a batch
    /// pipelined (PostgreSQL).
    Shared,
}

/// Which read connection a read takes (see [`Store::read`],
/// [`Store::read_blocking`], [`Store::read_paged`], [`Store::read_scan`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ReadKind {
    Inline,
    Blocking,
    Paged,
    Scan,
}
