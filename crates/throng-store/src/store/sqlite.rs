//! The embedded SQLite store: one writer thread with group commit, a small
//! pool of read connections.
//!
//! Why one writer: SQLite allows one writer at a time anyway; funnelling every
//! write through one thread that applies a whole batch in one transaction turns
//! N fsyncs into one (`synchronous=FULL` stays on), which is where the write
//! throughput comes from. Each command runs inside its own SAVEPOINT, so a
//! failing command is undone alone while the rest of its batch commits
//! (except [`SqliteStore::write_unguarded`] commands, which can only fail
//! with the database and roll back their batch).

use std::os::unix::fs::OpenOptionsExt;
use std::panic::AssertUnwindSafe;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use rusqlite::Connection;
use tokio::sync::{mpsc, oneshot, Semaphore};

use super::{migrate, StoreError, StoreLimits};
use crate::base::metrics;
use crate::base::private_fs;

type Responder = Box<dyn FnOnce(Result<(), StoreError>) + Send>;
/// A write command: given the writer's connection (or `None` when the batch
/// could not start or is already doomed), runs and returns how to answer its
/// caller after commit.
type WriteJob = Box<dyn FnOnce(Option<&Connection>) -> Applied + Send>;

/// What applying one command left for the writer.
struct Applied {
    respond: Responder,
    /// Set by a command without its own SAVEPOINT that failed: its partial
    /// writes cannot be undone alone, so the whole batch is rolled back and
    /// every caller in it gets this error.
    dooms_batch: Option<StoreError>,
    /// The command erased data: the batch's commit is followed by a WAL
    /// truncation before anyone is answered (see [`SqliteStore::write_erasing`]).
    erases: bool,
}

pub struct SqliteStore {
    path: PathBuf,
    writer: mpsc::Sender<WriteJob>,
    readers: Arc<Mutex<Vec<Connection>>>,
    reader_permits: Arc<Semaphore>,
    /// Readers without the memory map (see [`SqliteStore::read_paged`]).
    paged_readers: Mutex<Vec<Connection>>,
    paged_permits: Semaphore,
    /// The connection of [`SqliteStore::write_alone`], opened on first use.
    alone: Arc<Mutex<Option<Connection>>>,
}

impl SqliteStore {
    /// Opens (creating) the database, applies the store's migrations and
    /// `services`' (see `migrate`), starts the writer and the readers.
    pub fn open(
        path: &Path,
        limits: &StoreLimits,
        services: &[&'static migrate::MigrationSet],
    ) -> anyhow::Result<Arc<SqliteStore>> {
        if let Some(dir) = path.parent() {
            if !dir.as_os_str().is_empty() {
                private_fs::create_dir(dir).map_err(|e| {
                    anyhow::anyhow!("cannot create the store folder {}: {e}", dir.display())
                })?;
            }
        }
        // Mode 0600 before SQLite creates it 0644 (its WAL and shared-memory
        // files take the database's mode).
        private_fs::create_file(path)
            .map_err(|e| anyhow::anyhow!("cannot create {}: {e}", path.display()))?;
        if let Some(exposed) = private_fs::exposed(path) {
            tracing::warn!("the database holds sealed personal data and its metadata: {exposed}");
        }
        let mut writer_conn = open_connection(path, limits.sqlite_cache_kib, false)?;
        migrate::apply_sqlite(&mut writer_conn, services)?;
        // Checkpoints run on their own thread (see `checkpoint_loop`), not
        // inside a commit on the writer's critical path.
        writer_conn.execute_batch("PRAGMA wal_autocheckpoint = 0;")?;
        let checkpoint_conn = open_connection(path, 1024, false)?;
        let (stop_checkpoints, stop_rx) = std::sync::mpsc::channel::<()>();
        // Set when an erasure's WAL truncation could not finish at once.
        let erase_pending = Arc::new(AtomicBool::new(false));
        let pending = erase_pending.clone();
        std::thread::Builder::new()
            .name("sqlite-checkpoint".into())
            .spawn(move || checkpoint_loop(checkpoint_conn, stop_rx, pending))?;
        let mut readers = Vec::with_capacity(limits.read_connections);
        let mut paged_readers = Vec::with_capacity(limits.read_connections);
        for _ in 0..limits.read_connections.max(1) {
            readers.push(open_connection(path, limits.sqlite_cache_kib / 4, true)?);
            let paged = open_connection(path, limits.sqlite_cache_kib / 4, true)?;
            paged.execute_batch("PRAGMA mmap_size = 0;")?;
            paged_readers.push(paged);
        }
        let (tx, rx) = mpsc::channel::<WriteJob>(limits.write_queue_max.max(1));
        let batch_max = limits.batch_commands_max.max(1);
        let commit_delay = std::time::Duration::from_micros(limits.commit_delay_us);
        std::thread::Builder::new()
            .name("sqlite-writer".into())
            .spawn(move || {
                writer_loop(writer_conn, rx, batch_max, commit_delay, erase_pending);
                drop(stop_checkpoints);
            })?;
        let permits = readers.len();
        Ok(Arc::new(SqliteStore {
            path: path.to_path_buf(),
            writer: tx,
            readers: Arc::new(Mutex::new(readers)),
            reader_permits: Arc::new(Semaphore::new(permits)),
            paged_permits: Semaphore::new(paged_readers.len()),
            paged_readers: Mutex::new(paged_readers),
            alone: Arc::default(),
        }))
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Runs `f` in the writer's current batch, in its own SAVEPOINT; answers
    /// after the commit.
    pub async fn write<T, F>(&self, f: F) -> Result<T, StoreError>
    where
        F: FnOnce(&Connection) -> Result<T, StoreError> + Send + 'static,
        T: Send + 'static,
    {
        self.enqueue(f, true, false).await
    }

    /// Like [`SqliteStore::write`] but without the command's own SAVEPOINT,
    /// for commands whose statements fail only when the database does (I/O
    /// error, disk full), which dooms the batch's commit anyway. If such a
    /// command fails, the whole batch is rolled back and each of its callers
    /// gets the error. What it saves: SQLite copies every page a command
    /// touches into the statement journal under a SAVEPOINT, ~1 us of the
    /// writer per try-register (BENCHMARKS.md).
    pub async fn write_unguarded<T, F>(&self, f: F) -> Result<T, StoreError>
    where
        F: FnOnce(&Connection) -> Result<T, StoreError> + Send + 'static,
        T: Send + 'static,
    {
        self.enqueue(f, false, false).await
    }

    /// Like [`SqliteStore::write`]; once its batch committed, the writer
    /// copies the WAL into the database file and truncates it to zero bytes
    /// before answering, so no earlier page image of what the command
    /// deleted stays in the WAL (`secure_delete` zeroes it in the database
    /// file). The writer tries the truncation again while another checkpoint
    /// runs or readers hold the WAL, for up to 10 s; past that the
    /// checkpointer retries it every round until it finishes.
    pub async fn write_erasing<T, F>(&self, f: F) -> Result<T, StoreError>
    where
        F: FnOnce(&Connection) -> Result<T, StoreError> + Send + 'static,
        T: Send + 'static,
    {
        self.enqueue(f, true, true).await
    }

    /// Runs `f` in a transaction of its own (`BEGIN IMMEDIATE`), committed
    /// alone with its own fsync, outside the writer: on one connection of
    /// its own behind a mutex, in the blocking pool. For the bench's
    /// comparison designs, which show what group commit buys.
    pub async fn write_alone<T, F>(&self, f: F) -> Result<T, StoreError>
    where
        F: FnOnce(&Connection) -> Result<T, StoreError> + Send + 'static,
        T: Send + 'static,
    {
        let (path, alone) = (self.path.clone(), self.alone.clone());
        tokio::task::spawn_blocking(move || {
            let mut guard = alone.lock().unwrap();
            if guard.is_none() {
                let c = open_connection(&path, 4 * 1024, false)
                    .map_err(|e| StoreError::Unavailable(e.to_string()))?;
                *guard = Some(c);
            }
            let c = guard.as_mut().expect("opened above");
            let tx = c.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
            let out = f(&tx)?;
            tx.commit()?;
            Ok(out)
        })
        .await
        .map_err(|e| StoreError::Internal(format!("write task failed: {e}")))?
    }

    /// Hands `f` to the writer and waits for its answer after the commit.
    async fn enqueue<T, F>(&self, f: F, savepoint: bool, erases: bool) -> Result<T, StoreError>
    where
        F: FnOnce(&Connection) -> Result<T, StoreError> + Send + 'static,
        T: Send + 'static,
    {
        let (reply, answer) = oneshot::channel::<Result<T, StoreError>>();
        let job: WriteJob = Box::new(move |conn| {
            let (outcome, dooms_batch) = match conn {
                None => (Err(batch_not_started()), None),
                Some(conn) if savepoint => (run_in_savepoint(conn, f), None),
                Some(conn) => {
                    let outcome = run_caught(conn, f);
                    let dooms = outcome.as_ref().err().cloned();
                    (outcome, dooms)
                }
            };
            Applied {
                respond: Box::new(move |commit| {
                    let _ = reply.send(commit.and(outcome));
                }),
                dooms_batch,
                erases,
            }
        });
        self.writer
            .send(job)
            .await
            .map_err(|_| StoreError::Unavailable("the writer has stopped".into()))?;
        answer
            .await
            .map_err(|_| StoreError::Unavailable("the writer has stopped".into()))?
    }

    /// Runs `f` on a read connection, inline on the calling task's thread.
    ///
    /// Why inline: reads here are bounded point or range lookups (tens of
    /// microseconds); a hop to the blocking pool costs two context switches,
    /// which on a 2-core machine is more than the read itself. Reads that can
    /// take long must use [`SqliteStore::read_blocking`].
    pub async fn read<T, F>(&self, f: F) -> Result<T, StoreError>
    where
        F: FnOnce(&Connection) -> Result<T, StoreError> + Send + 'static,
        T: Send + 'static,
    {
        read_inline(&self.readers, &self.reader_permits, f).await
    }

    /// Like [`SqliteStore::read`], on a connection that reads pages with
    /// `pread` into its own small page cache instead of through the memory
    /// map: for point lookups spread evenly over a table far larger than the
    /// server's memory budget (invites' 6,000,000 visitors, ~170 MB). Every
    /// mapped page a lookup touches stays in the process's resident set
    /// (the whole table, soon); a `pread` page stays only in the kernel's
    /// page cache, shared and reclaimable. It costs a copy per page read.
    pub async fn read_paged<T, F>(&self, f: F) -> Result<T, StoreError>
    where
        F: FnOnce(&Connection) -> Result<T, StoreError> + Send + 'static,
        T: Send + 'static,
    {
        read_inline(&self.paged_readers, &self.paged_permits, f).await
    }

    /// Runs `f` in the blocking pool on a connection of its own, opened for
    /// it with a `SCAN_CACHE_KIB` page cache and no memory map and closed
    /// after it: one scan of a table far larger than the server's memory
    /// budget (5,000,000 roll rows read through the readers' map would stay
    /// resident in this process).
    pub async fn read_scan<T, F>(&self, f: F) -> Result<T, StoreError>
    where
        F: FnOnce(&Connection) -> Result<T, StoreError> + Send + 'static,
        T: Send + 'static,
    {
        let path = self.path.clone();
        tokio::task::spawn_blocking(move || {
            let c = open_connection(&path, SCAN_CACHE_KIB, false)
                .map_err(|e| StoreError::Unavailable(e.to_string()))?;
            c.execute_batch("PRAGMA query_only = 1")?;
            f(&c)
        })
        .await
        .map_err(|e| StoreError::Internal(format!("read task failed: {e}")))?
    }

    /// Runs `f` on a read connection in the blocking pool, for reads that may
    /// scan (reports, exports), so they never stall the async workers.
    pub async fn read_blocking<T, F>(&self, f: F) -> Result<T, StoreError>
    where
        F: FnOnce(&Connection) -> Result<T, StoreError> + Send + 'static,
        T: Send + 'static,
    {
        let permit = self
            .reader_permits
            .clone()
            .acquire_owned()
            .await
            .map_err(|_| StoreError::Unavailable("store closed".into()))?;
        let pool = self.readers.clone();
        tokio::task::spawn_blocking(move || {
            let _permit = permit;
            let conn = pool
                .lock()
                .unwrap()
                .pop()
                .expect("a permit guarantees a connection");
            let guard = ReturnToPool {
                pool: &pool,
                conn: Some(conn),
            };
            f(guard.conn.as_ref().unwrap())
        })
        .await
        .map_err(|e| StoreError::Internal(format!("read task failed: {e}")))?
    }
}

/// Runs `f` on a connection of `pool` (one permit each), inline on the
/// calling task's thread.
async fn read_inline<T>(
    pool: &Mutex<Vec<Connection>>,
    permits: &Semaphore,
    f: impl FnOnce(&Connection) -> Result<T, StoreError>,
) -> Result<T, StoreError> {
    let _permit = permits
        .acquire()
        .await
        .map_err(|_| StoreError::Unavailable("store closed".into()))?;
    let conn = pool
        .lock()
        .unwrap()
        .pop()
        .expect("a permit guarantees a connection");
    let guard = ReturnToPool {
        pool,
        conn: Some(conn),
    };
    f(guard.conn.as_ref().unwrap())
}

/// Puts a read connection back even when the read panicked.
struct ReturnToPool<'a> {
    pool: &'a Mutex<Vec<Connection>>,
    conn: Option<Connection>,
}
impl Drop for ReturnToPool<'_> {
    fn drop(&mut self) {
        if let Some(c) = self.conn.take() {
            if let Ok(mut pool) = self.pool.lock() {
                pool.push(c);
            }
        }
    }
}

/// Page cache of a scan's own connection, in KiB (see
/// [`SqliteStore::read_scan`]).
const SCAN_CACHE_KIB: i64 = 2048;

/// Bytes of the database file a read connection maps into memory at most.
/// Reads through the map skip a `pread` and a copy per page; the mapped pages
/// are the kernel's page cache, counted once however many readers map them.
/// Address space only (64-bit): large enough for the full data sets (the
/// comments set is ~1 GB; pages past the map went through `pread` and the
/// shared page cache, ~15% of a cache-off listing's CPU). SQLite caps the
/// pragma at its compile-time `SQLITE_MAX_MMAP_SIZE` (2 GiB unless raised),
/// silently: `.cargo/config.toml` builds the bundled SQLite with 16 GiB.
const READER_MMAP_BYTES_MAX: i64 = 16 * 1024 * 1024 * 1024;

/// Turns off SQLite's memory statistics once per process, before its first
/// connection: with them on, every SQLite allocation takes one global mutex,
/// which the read connections on both cores fought over (futex wake/wait,
/// ~9% of a cache-off listing's CPU). Nothing here reads those statistics.
fn disable_memstatus() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| unsafe {
        // SQLITE_MISUSE if SQLite is already initialized: harmless, stays on.
        rusqlite::ffi::sqlite3_config(
            rusqlite::ffi::SQLITE_CONFIG_MEMSTATUS,
            0 as std::os::raw::c_int,
        );
    });
}

/// Opens a connection with the pragmas every connection needs.
/// `secure_delete`: a deleted or replaced row's bytes are overwritten with
/// zeros in the database file (and freed pages zeroed), so a privacy delete
/// or a purge leaves no copy of the row in a later copy of the file (the WAL
/// keeps earlier page images until a checkpoint's restart overwrites them).
///
/// `temp_store`: a connection that writes keeps its statement journals and
/// sorts in memory only up to SQLite's bounds (64 KiB of journal, the page
/// cache of sorting) and past them in an unlinked temporary file. A
/// statement that changes many rows inside a longer transaction (the voting
/// board's period moving 250,000 ballots into the box, a places import)
/// journals the earlier image of every page it touches; held in memory
/// (`temp_store = MEMORY`) that was ~150 MB for 250,000 ballots, freed after
/// the commit but kept by the C allocator, so the server's resident memory
/// climbed with every period. Small writes (a vote, a booking) stay under
/// the bounds and never touch the file. Read connections change nothing and
/// keep their sorts in memory.
pub fn open_connection(path: &Path, cache_kib: i64, read_only: bool) -> anyhow::Result<Connection> {
    disable_memstatus();
    let conn = Connection::open(path)
        .map_err(|e| anyhow::anyhow!("cannot open SQLite store {}: {e}", path.display()))?;
    conn.busy_timeout(std::time::Duration::from_secs(5))?;
    conn.execute_batch(&format!(
        "PRAGMA journal_mode = WAL;
         PRAGMA synchronous = FULL;
         PRAGMA foreign_keys = OFF;
         PRAGMA temp_store = {};
         PRAGMA mmap_size = 0;
         PRAGMA secure_delete = ON;
         PRAGMA cache_size = -{};",
        if read_only { "MEMORY" } else { "FILE" },
        cache_kib.max(512)
    ))?;
    if read_only {
        conn.execute_batch(&format!(
            "PRAGMA query_only = 1; PRAGMA mmap_size = {READER_MMAP_BYTES_MAX};"
        ))?;
    }
    conn.set_prepared_statement_cache_capacity(64);
    register_functions(&conn)?;
    Ok(conn)
}

/// SQL functions every connection has.
///
/// `iso_ms(ms)`: milliseconds since the Unix epoch as RFC 3339 UTC with
/// milliseconds, `2025-01-01T10:00:00.000Z` (the API's time format). The
/// same text as `strftime('%Y-%m-%dT%H:%M:%S', ms / 1000, 'unixepoch') ||
/// printf('.%03dZ', ms % 1000)` for times from 1970 to 9999, at a tenth of
/// the instructions: strftime parses its format and modifiers on every call,
/// and the comments listing formats up to three times per comment. NULL
/// gives NULL; a time outside 0..=9999-12-31 is an error.
pub(crate) fn register_functions(conn: &Connection) -> rusqlite::Result<()> {
    use rusqlite::functions::FunctionFlags;
    conn.create_scalar_function(
        "iso_ms",
        1,
        FunctionFlags::SQLITE_UTF8
            | FunctionFlags::SQLITE_DETERMINISTIC
            | FunctionFlags::SQLITE_INNOCUOUS,
        |ctx| {
            let Some(ms) = ctx.get::<Option<i64>>(0)? else {
                return Ok(None);
            };
            crate::base::clock::iso_ms(ms).map(Some).ok_or_else(|| {
                rusqlite::Error::UserFunctionError(
                    format!("iso_ms: {ms} is outside 1970-01-01 to 9999-12-31").into(),
                )
            })
        },
    )
}

fn batch_not_started() -> StoreError {
    StoreError::Unavailable("the write batch could not start".into())
}

/// Runs a write command; a panic becomes an error for its caller.
fn run_caught<T>(
    conn: &Connection,
    f: impl FnOnce(&Connection) -> Result<T, StoreError>,
) -> Result<T, StoreError> {
    std::panic::catch_unwind(AssertUnwindSafe(|| f(conn)))
        .unwrap_or_else(|_| Err(StoreError::Internal("a write command panicked".into())))
}

fn run_in_savepoint<T>(
    conn: &Connection,
    f: impl FnOnce(&Connection) -> Result<T, StoreError>,
) -> Result<T, StoreError> {
    conn.prepare_cached("SAVEPOINT cmd")?.execute([])?;
    match run_caught(conn, f) {
        Ok(v) => {
            conn.prepare_cached("RELEASE cmd")?.execute([])?;
            Ok(v)
        }
        Err(e) => {
            conn.execute_batch("ROLLBACK TO cmd; RELEASE cmd")?;
            Err(e)
        }
    }
}

std::thread_local! {
    /// The number of the batch the writer thread is applying (see
    /// [`writer_batch`]).
    static WRITER_BATCH: std::cell::Cell<i64> = const { std::cell::Cell::new(0) };
}

/// The number of the batch being applied, for a command running in the
/// writer (where every write command runs): it grows by one with every
/// batch, numbered on from the writer's start time in microseconds since
/// the Unix epoch, so it keeps growing across restarts (unless the clock
/// went back). A key led by it puts each batch's rows together at the end
/// of their table (see [`super::Tx::writer_batch`]).
pub(crate) fn writer_batch() -> i64 {
    WRITER_BATCH.with(|b| b.get())
}

/// The previous batch's size from which the writer considers itself under
/// load and applies the commit delay.
const COMMIT_DELAY_BATCH_MIN: usize = 8;

fn writer_loop(
    conn: Connection,
    mut rx: mpsc::Receiver<WriteJob>,
    batch_max: usize,
    commit_delay: std::time::Duration,
    erase_pending: Arc<AtomicBool>,
) {
    let mut batch: Vec<WriteJob> = Vec::with_capacity(batch_max);
    let mut responders: Vec<Responder> = Vec::with_capacity(batch_max);
    let mut previous_batch = 0usize;
    let wal_catch_up_interval = std::time::Duration::from_millis(WAL_CATCH_UP_INTERVAL_MS);
    let mut wal_caught_up_at = Instant::now();
    WRITER_BATCH.with(|b| {
        let started = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_micros() as i64);
        b.set(started)
    });
    while let Some(first) = rx.blocking_recv() {
        batch.push(first);
        let drain = |batch: &mut Vec<WriteJob>, rx: &mut mpsc::Receiver<WriteJob>| {
            while batch.len() < batch_max {
                match rx.try_recv() {
                    Ok(job) => batch.push(job),
                    Err(_) => break,
                }
            }
        };
        drain(&mut batch, &mut rx);
        if !commit_delay.is_zero()
            && previous_batch >= COMMIT_DELAY_BATCH_MIN
            && batch.len() < batch_max
        {
            std::thread::sleep(commit_delay);
            drain(&mut batch, &mut rx);
        }
        previous_batch = batch.len();
        WRITER_BATCH.with(|b| b.set(b.get() + 1));
        let started = Instant::now();
        let began = conn.execute_batch("BEGIN IMMEDIATE");
        let conn_for_jobs = began.as_ref().ok().map(|_| &conn);
        let mut doomed: Option<StoreError> = None;
        let mut erases = false;
        for job in batch.drain(..) {
            let applied = job(conn_for_jobs.filter(|_| doomed.is_none()));
            if doomed.is_none() {
                doomed = applied.dooms_batch;
            }
            erases |= applied.erases;
            responders.push(applied.respond);
        }
        let commit: Result<(), StoreError> = match (began, doomed) {
            (Err(e), _) => Err(e.into()),
            (Ok(()), Some(e)) => {
                tracing::error!(error = %e, "a write command without its own savepoint failed; rolling back its batch");
                let _ = conn.execute_batch("ROLLBACK");
                Err(e)
            }
            (Ok(()), None) => conn.execute_batch("COMMIT").map_err(|e| {
                let _ = conn.execute_batch("ROLLBACK");
                StoreError::from(e)
            }),
        };
        if let Err(e) = &commit {
            tracing::error!(error = %e, "sqlite batch failed to commit");
        }
        metrics::observe_write_batch(responders.len(), started.elapsed());
        if erases && commit.is_ok() {
            // Before anyone is answered: the erased rows' earlier page
            // images go with the WAL.
            if !truncate_wal_within(&conn, ERASE_TRUNCATE_WITHIN) {
                erase_pending.store(true, Ordering::Release);
            }
            wal_caught_up_at = Instant::now();
        }
        for respond in responders.drain(..) {
            respond(commit.clone());
        }
        if wal_caught_up_at.elapsed() >= wal_catch_up_interval {
            catch_up_wal(&conn);
            wal_caught_up_at = Instant::now();
        }
    }
    tracing::debug!("sqlite writer stopped");
}

/// How often the writer, between two batches, copies what the checkpointer
/// has not yet copied of the WAL into the database file.
const WAL_CATCH_UP_INTERVAL_MS: u64 = 250;

/// Copies the WAL's remaining frames into the database file from the
/// writer, between batches: no frame is added meanwhile, so the copy ends
/// level with the WAL, and the next batch writes the WAL from its start
/// again (once no reader still reads a frame of it) instead of appending.
/// The checkpointer alone never caught up under load (the writer commits
/// while it copies): the WAL grew by every commit, 414 MB in 18 s of
/// try-register, and each `fdatasync` of a growing file also commits the
/// file system's journal (a 26 KiB write and its sync: 240 us and 105 us
/// of CPU appended, 139 us and 62 us overwritten, on this project's disk).
fn catch_up_wal(conn: &Connection) {
    if let Err(e) = conn.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |_| Ok(())) {
        tracing::warn!(error = %e, "the writer's WAL catch-up failed; retrying later");
    }
}

/// How long the writer keeps trying an erasure's WAL truncation before it
/// answers; past it the checkpointer retries every round.
const ERASE_TRUNCATE_WITHIN: std::time::Duration = std::time::Duration::from_secs(10);

/// Pause between two tries of an erasure's WAL truncation.
const ERASE_TRUNCATE_RETRY_MS: u64 = 2;

/// [`truncate_wal`], tried again until it finishes or `within` has passed.
/// One checkpoint runs at a time per database, and SQLite answers a second
/// one busy at once, without calling the busy handler: an erasure that met
/// the checkpointer's round (or a backup tool's checkpoint) failed in
/// microseconds, and the erased rows stayed in the WAL and the database file.
/// Readers are waited for inside each try (the busy timeout).
fn truncate_wal_within(conn: &Connection, within: std::time::Duration) -> bool {
    let deadline = Instant::now() + within;
    loop {
        if truncate_wal(conn) {
            return true;
        }
        if Instant::now() >= deadline {
            tracing::warn!(
                "an erasure's WAL truncation could not finish within {within:?}; the checkpointer retries it"
            );
            return false;
        }
        std::thread::sleep(std::time::Duration::from_millis(ERASE_TRUNCATE_RETRY_MS));
    }
}

/// Copies the whole WAL into the database file and truncates it to zero
/// bytes; false when another checkpoint was running, readers kept it from
/// finishing (within the busy timeout), or it failed.
fn truncate_wal(conn: &Connection) -> bool {
    match conn.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |r| {
        r.get::<_, i64>(0)
    }) {
        Ok(0) => true,
        Ok(_) => false,
        Err(e) => {
            tracing::warn!(error = %e, "a WAL truncation failed");
            false
        }
    }
}

/// How often the checkpointer looks at the WAL (and retries an erasure's
/// truncation that could not finish at once).
pub const CHECKPOINT_INTERVAL_MS: u64 = 200;

/// Copies committed WAL frames into the database file, off the writer's path.
/// PASSIVE never blocks the writer or readers; it stops early if a reader
/// still needs old frames and finishes on a later round. The WAL is reused
/// from its start once a checkpoint ends level with it, which under load
/// only the writer's catch-up does ([`catch_up_wal`]).
fn checkpoint_loop(
    conn: Connection,
    stop: std::sync::mpsc::Receiver<()>,
    erase_pending: Arc<AtomicBool>,
) {
    let interval = std::time::Duration::from_millis(CHECKPOINT_INTERVAL_MS);
    while let Err(std::sync::mpsc::RecvTimeoutError::Timeout) = stop.recv_timeout(interval) {
        if erase_pending.swap(false, Ordering::AcqRel) {
            if truncate_wal(&conn) {
                continue;
            }
            erase_pending.store(true, Ordering::Release);
        }
        if let Err(e) = conn.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |_| Ok(())) {
            tracing::warn!(error = %e, "wal checkpoint failed; retrying next round");
        }
    }
    // Writer gone: fold the whole WAL into the database file before exit.
    let _ = conn.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()));
}

/// Claims an SQLite store for one serving process, for as long as the
/// returned file stays open (the kernel drops the lock when the process dies,
/// even by SIGKILL). Booking decides slots in the writer's memory, which is
/// only sound with one writer process; `throng seed` does not take the lock.
pub fn lock_for_serving(db_path: &Path) -> anyhow::Result<std::fs::File> {
    use std::os::fd::AsRawFd;
    let lock_path = db_path.with_extension("serve.lock");
    if let Some(dir) = lock_path.parent().filter(|d| !d.as_os_str().is_empty()) {
        private_fs::create_dir(dir)
            .map_err(|e| anyhow::anyhow!("cannot create {}: {e}", dir.display()))?;
    }
    let file = std::fs::OpenOptions::new()
        .mode(0o600)
        .create(true)
        .truncate(false)
        .write(true)
        .open(&lock_path)
        .map_err(|e| anyhow::anyhow!("cannot open {}: {e}", lock_path.display()))?;
    // SAFETY: flock on a file descriptor we own.
    let rc = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
    if rc != 0 {
        anyhow::bail!(
            "another throng server is serving {}; an SQLite store has one server \
             (use PostgreSQL for several nodes)",
            db_path.display()
        );
    }
    Ok(file)
}

// Rows mapped by functions that answer `StoreError` (row mappers through
// `store::Columns`), for every service's SQLite storage.

/// `stmt`'s rows, each mapped by `f`.
pub fn all<T>(
    stmt: &mut rusqlite::Statement<'_>,
    params: impl rusqlite::Params,
    f: impl Fn(&rusqlite::Row<'_>) -> Result<T, StoreError>,
) -> Result<Vec<T>, StoreError> {
    let mut rows = stmt.query(params)?;
    let mut out = Vec::new();
    while let Some(r) = rows.next()? {
        out.push(f(r)?);
    }
    Ok(out)
}

/// `stmt`'s first row mapped by `f`; no row is an error (as `query_row`).
pub fn first<T>(
    stmt: &mut rusqlite::Statement<'_>,
    params: impl rusqlite::Params,
    f: impl FnOnce(&rusqlite::Row<'_>) -> Result<T, StoreError>,
) -> Result<T, StoreError> {
    optional(stmt, params, f)?.ok_or_else(|| rusqlite::Error::QueryReturnedNoRows.into())
}

/// `stmt`'s first row mapped by `f`, if there is one.
pub fn optional<T>(
    stmt: &mut rusqlite::Statement<'_>,
    params: impl rusqlite::Params,
    f: impl FnOnce(&rusqlite::Row<'_>) -> Result<T, StoreError>,
) -> Result<Option<T>, StoreError> {
    let mut rows = stmt.query(params)?;
    match rows.next()? {
        Some(r) => f(r).map(Some),
        None => Ok(None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn insert(c: &Connection, key: &str) -> Result<(), StoreError> {
        c.execute("INSERT INTO meta (key, value) VALUES (?1, 'v')", [key])?;
        Ok(())
    }

    fn keys(store: &SqliteStore) -> std::collections::BTreeSet<String> {
        let c = open_connection(store.path(), 512, true).unwrap();
        let mut stmt = c
            .prepare("SELECT key FROM meta WHERE key LIKE 't-%'")
            .unwrap();
        let rows = stmt.query_map([], |r| r.get::<_, String>(0)).unwrap();
        rows.map(|r| r.unwrap()).collect()
    }

    /// 200 writers at once, so commands share batches; every 25th fails
    /// after writing (`unguarded_failures`: without its SAVEPOINT, else with
    /// it). Returns the keys answered Ok and the number of Err answers.
    async fn wave(
        store: &Arc<SqliteStore>,
        wave: usize,
        unguarded_failures: bool,
    ) -> (std::collections::BTreeSet<String>, usize) {
        let mut tasks = Vec::new();
        for i in 0..200 {
            let store = store.clone();
            tasks.push(tokio::spawn(async move {
                let key = format!("t-{wave}-{i}");
                let k = key.clone();
                let fails = i % 25 == 7;
                let outcome = match (fails, unguarded_failures) {
                    (true, false) => {
                        store
                            .write(move |c| {
                                insert(c, &k)?;
                                Err::<(), _>(StoreError::Internal("guarded failure".into()))
                            })
                            .await
                    }
                    (true, true) => {
                        store
                            .write_unguarded(move |c| {
                                insert(c, &k)?;
                                Err::<(), _>(StoreError::Internal("unguarded failure".into()))
                            })
                            .await
                    }
                    _ if i % 2 == 0 => store.write_unguarded(move |c| insert(c, &k)).await,
                    _ => store.write(move |c| insert(c, &k)).await,
                };
                assert!(
                    !(fails && outcome.is_ok()),
                    "{key}: a failing command answered Ok"
                );
                (key, outcome.is_ok())
            }));
        }
        let mut ok = std::collections::BTreeSet::new();
        let mut failed = 0;
        for t in tasks {
            match t.await.unwrap() {
                (key, true) => {
                    ok.insert(key);
                }
                (_, false) => failed += 1,
            }
        }
        (ok, failed)
    }

    /// A guarded command that fails after writing is undone alone; an
    /// unguarded one takes its batch down. Either way an Ok answer is in the
    /// database and an Err answer left nothing behind, and the writer goes on.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn answers_match_what_committed() {
        let dir = tempfile::tempdir().unwrap();
        let store =
            SqliteStore::open(&dir.path().join("t.db"), &StoreLimits::default(), &[]).unwrap();
        let (ok_guarded, failed_guarded) = wave(&store, 1, false).await;
        assert_eq!(failed_guarded, 8, "only the failing commands fail");
        assert_eq!(ok_guarded.len(), 192);
        let (ok_unguarded, failed_unguarded) = wave(&store, 2, true).await;
        assert!(failed_unguarded >= 8, "{failed_unguarded}");
        let mut all_ok = ok_guarded.clone();
        all_ok.extend(ok_unguarded);
        assert_eq!(keys(&store), all_ok);
        // Alone in its batch, an unguarded failure leaves the writer working.
        let failed = store
            .write_unguarded(|c| {
                insert(c, "t-3-a")?;
                Err::<(), _>(StoreError::Internal("unguarded failure".into()))
            })
            .await;
        assert!(failed.is_err());
        store.write_unguarded(|c| insert(c, "t-3-b")).await.unwrap();
        let after = keys(&store);
        assert!(!after.contains("t-3-a") && after.contains("t-3-b"));
    }

    /// Every file of the store whose bytes hold `marker`.
    fn files_holding(dir: &Path, marker: &[u8]) -> Vec<String> {
        std::fs::read_dir(dir)
            .unwrap()
            .filter_map(|e| e.ok())
            .filter(|e| {
                std::fs::read(e.path())
                    .unwrap_or_default()
                    .windows(marker.len())
                    .any(|w| w == marker)
            })
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect()
    }

    /// An erasing write answers once neither the database file nor its WAL
    /// holds what it deleted, readers and other writes going on meanwhile.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn an_erasure_leaves_no_copy_in_any_file() {
        let dir = tempfile::tempdir().unwrap();
        let store =
            SqliteStore::open(&dir.path().join("t.db"), &StoreLimits::default(), &[]).unwrap();
        // Readers reading all along.
        let stop = Arc::new(AtomicBool::new(false));
        let mut readers = Vec::new();
        for _ in 0..4 {
            let (path, stop) = (dir.path().join("t.db"), stop.clone());
            readers.push(std::thread::spawn(move || {
                let c = open_connection(&path, 512, true).unwrap();
                while !stop.load(Ordering::Relaxed) {
                    let _: i64 = c
                        .query_row("SELECT COUNT(*) FROM meta", [], |r| r.get(0))
                        .unwrap();
                }
            }));
        }
        store
            .write(|c| {
                c.execute_batch(
                    "CREATE TABLE answers (v INTEGER NOT NULL, s INTEGER NOT NULL, d BLOB NOT NULL,
                        PRIMARY KEY (v, s)) WITHOUT ROWID",
                )?;
                Ok(())
            })
            .await
            .unwrap();
        // Rows keyed like invites' answers, each rewritten as its blob grows.
        for v in 1..=3i64 {
            for step in 0..3u8 {
                store
                    .write(move |c| {
                        let mut d = Vec::new();
                        for k in 0..=step {
                            d.extend_from_slice(&[0xA5, 0x5A, v as u8, k, 0xEE, 0x11, 0x22, 0x33]);
                        }
                        c.execute(
                            "INSERT INTO answers (v, s, d) VALUES (?1, 1, ?2)
                             ON CONFLICT (v, s) DO UPDATE SET d = excluded.d",
                            rusqlite::params![v, d],
                        )?;
                        Ok(())
                    })
                    .await
                    .unwrap();
            }
        }
        let mark = |v: u8, k: u8| [0xA5, 0x5A, v, k, 0xEE, 0x11, 0x22, 0x33];
        assert!(!files_holding(dir.path(), &mark(2, 0)).is_empty());
        store
            .write_erasing(|c| Ok(c.execute("DELETE FROM answers WHERE v = 2", [])?))
            .await
            .unwrap();
        for k in 0..3 {
            let held = files_holding(dir.path(), &mark(2, k));
            assert!(held.is_empty(), "answer row {k}: still in {held:?}");
        }
        assert!(
            !files_holding(dir.path(), &mark(3, 2)).is_empty(),
            "the others kept"
        );
        for round in 0..3 {
            let marker = format!("erase-me-{round}-7f3a9c");
            let m = marker.clone();
            store
                .write(move |c| {
                    c.execute("INSERT INTO meta (key, value) VALUES (?1, ?1)", [&m])?;
                    // Rewritten once: an earlier image of its page in the WAL.
                    c.execute("UPDATE meta SET value = ?1 || 'x' WHERE key = ?1", [&m])?;
                    Ok(())
                })
                .await
                .unwrap();
            for i in 0..50 {
                store
                    .write(move |c| insert(c, &format!("t-{round}-{i}")))
                    .await
                    .unwrap();
            }
            assert!(
                !files_holding(dir.path(), marker.as_bytes()).is_empty(),
                "readable before"
            );
            let m = marker.clone();
            let gone = store
                .write_erasing(move |c| Ok(c.execute("DELETE FROM meta WHERE key = ?1", [&m])?))
                .await
                .unwrap();
            assert_eq!(gone, 1);
            // Gone when the erasure answers, unless the readers held the
            // WAL through every attempt: then the checkpointer's next
            // passes (every CHECKPOINT_INTERVAL_MS) finish it.
            let deadline = std::time::Instant::now() + std::time::Duration::from_secs(3);
            let mut held = files_holding(dir.path(), marker.as_bytes());
            while !held.is_empty() && std::time::Instant::now() < deadline {
                std::thread::sleep(std::time::Duration::from_millis(CHECKPOINT_INTERVAL_MS));
                held = files_holding(dir.path(), marker.as_bytes());
            }
            assert!(
                held.is_empty(),
                "round {round}: still in {held:?} after 3 s"
            );
        }
        stop.store(true, Ordering::Relaxed);
        for r in readers {
            r.join().unwrap();
        }
    }

    /// Another connection checkpoints all along (as a backup tool or the
    /// `sqlite3` shell may) while writes stream in: an erasure still answers
    /// only once no file holds what it deleted.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn an_erasure_amid_other_checkpoints_leaves_no_copy() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.db");
        let store = SqliteStore::open(&path, &StoreLimits::default(), &[]).unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let checkpointer = {
            let (path, stop) = (path.clone(), stop.clone());
            std::thread::spawn(move || {
                let c = open_connection(&path, 512, false).unwrap();
                let mut rounds = 0u64;
                while !stop.load(Ordering::Relaxed) && rounds < 10_000_000 {
                    let _ = c.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |_| Ok(()));
                    rounds += 1;
                }
                rounds
            })
        };
        // 16 KiB rows rewritten over 64 keys: each checkpoint has pages to
        // copy while the database stays small.
        let filler = {
            let (store, stop) = (store.clone(), stop.clone());
            tokio::spawn(async move {
                let mut i = 0u64;
                while !stop.load(Ordering::Relaxed) && i < 100_000 {
                    let (key, fill) = (format!("fill-{}", i % 64), "f".repeat(16 * 1024));
                    store
                        .write(move |c| {
                            c.execute(
                                "INSERT INTO meta (key, value) VALUES (?1, ?2)
                                 ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                                rusqlite::params![key, fill],
                            )?;
                            Ok(())
                        })
                        .await
                        .unwrap();
                    i += 1;
                }
            })
        };
        let erasures = 30;
        let mut left_behind = Vec::new();
        for round in 0..erasures {
            let marker = format!("erase-amid-checkpoints-{round}-c41d");
            let m = marker.clone();
            store
                .write(move |c| {
                    c.execute("INSERT INTO meta (key, value) VALUES (?1, ?1)", [&m])?;
                    Ok(())
                })
                .await
                .unwrap();
            let m = marker.clone();
            store
                .write_erasing(move |c| Ok(c.execute("DELETE FROM meta WHERE key = ?1", [&m])?))
                .await
                .unwrap();
            let held = files_holding(dir.path(), marker.as_bytes());
            if !held.is_empty() {
                left_behind.push((round, held));
            }
        }
        stop.store(true, Ordering::Relaxed);
        filler.await.unwrap();
        assert!(checkpointer.join().unwrap() > 0);
        assert!(
            left_behind.is_empty(),
            "of {erasures} erasures, these answered while a file still held the row: {left_behind:?}"
        );
    }

    #[test]
    fn iso_ms_matches_strftime() {
        let conn = Connection::open_in_memory().unwrap();
        register_functions(&conn).unwrap();
        let mut stmt = conn
            .prepare(
                "SELECT iso_ms(?1), strftime('%Y-%m-%dT%H:%M:%S', ?1 / 1000, 'unixepoch') \
                 || printf('.%03dZ', ?1 % 1000)",
            )
            .unwrap();
        // Edges, leap days and centuries, then a spread over 1970..9999.
        let mut times: Vec<i64> = vec![
            0,
            999,
            86_399_999,
            951_782_400_000,     // 2000-02-29
            4_107_542_399_999,   // 2100-02-28T23:59:59.999
            253_402_300_799_999, // 9999-12-31T23:59:59.999
        ];
        let mut x: u64 = 0x2545_F491_4F6C_DD1D;
        for _ in 0..20_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            times.push((x % 253_402_300_800_000) as i64);
        }
        for t in times {
            let (ours, sqlite): (String, String) =
                stmt.query_row([t], |r| Ok((r.get(0)?, r.get(1)?))).unwrap();
            assert_eq!(ours, sqlite, "{t}");
        }
        use crate::base::clock::iso_ms;
        assert!(iso_ms(-1).is_none() && iso_ms(253_402_300_800_000).is_none());
        let null: Option<String> = conn
            .query_row("SELECT iso_ms(NULL)", [], |r| r.get(0))
            .unwrap();
        assert_eq!(null, None);
        assert!(conn
            .query_row("SELECT iso_ms(-5)", [], |r| r.get::<_, String>(0))
            .is_err());
    }
}
