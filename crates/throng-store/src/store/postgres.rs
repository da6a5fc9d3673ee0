//! The scale-out store: PostgreSQL shared by several throng nodes.
//!
//! Writes keep the SQLite contract: writer tasks (`--pg-writers` per node)
//! gather waiting commands, run them pipelined in one transaction and commit
//! once. If any command fails, the batch is rolled back and every command is
//! rerun alone, so one bad command (or a deadlock between two writers) fails
//! only itself. Several writers per node let one batch run its statements
//! while another waits for its commit's fsync, and PostgreSQL flushes the
//! commits that arrive together with one fsync.
//!
//! Event positions come from a sequence, taken at the end of a batch (after
//! its transaction id, see `horizon.rs`), so no batch waits for another's
//! commit to number its events: positions commit out of order and a
//! rolled-back batch leaves a hole. Readers of the log never skip an event
//! all the same: they read up to the horizon (`horizon.rs`), below which no
//! event can still appear. Appends to one stream agree on its versions
//! through a lock on that stream only (see [`decide_appends`]).

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use deadpool_postgres::{Manager, ManagerConfig, Pool, RecyclingMethod, Runtime};
use futures::TryFutureExt;
use tokio::sync::{mpsc, oneshot};
use tokio_postgres::NoTls;

use super::streams::{self, AppendOutcome, IdAt, StreamAppend, StreamHead};
use super::{eventlog::NewEvent, migrate, StoreError, StoreLimits};
use crate::base::metrics;

pub type PgFuture<'a, T> = Pin<Box<dyn Future<Output = Result<T, StoreError>> + Send + 'a>>;

/// What a write command sees: the batch's transaction and its event outbox.
pub struct PgTx<'a> {
    /// deadpool's transaction (it derefs to tokio-postgres's): its
    /// `prepare_cached` keeps a command's statement prepared on the writer's
    /// connection, so a hot write is not planned again in every batch.
    pub tx: &'a deadpool_postgres::Transaction<'a>,
    events: Mutex<Vec<NewEvent>>,
    /// Events that open a stream nobody else can know yet (see
    /// [`PgTx::append_opening`]).
    opening: Mutex<Vec<NewEvent>>,
    conditional: Mutex<Vec<(StreamAppend, OutcomeSlot)>>,
    invalidated: Mutex<Vec<String>>,
}

/// Where a conditional append's outcome lands once its batch decided it
/// (read after the commit).
pub type OutcomeSlot = Arc<Mutex<Option<AppendOutcome>>>;

impl PgTx<'_> {
    /// Appends an event that commits with this transaction.
    pub fn append(&self, event: NewEvent) {
        self.events.lock().unwrap().push(event);
    }

    /// Appends the first event of a stream whose name this transaction
    /// made and nobody can have appended to (a registration's stream,
    /// named by the id its own row takes in the same transaction): its
    /// version is 0, so the batch neither locks the stream nor reads its
    /// head. The unique `(stream, stream_version)` index still fails the
    /// batch if the name was not new after all.
    pub fn append_opening(&self, event: NewEvent) {
        self.opening.lock().unwrap().push(event);
    }

    /// Tells every node's caches that what `key` names changed, when (and
    /// only if) this transaction commits (see `invalidate.rs`).
    pub fn invalidate(&self, key: String) {
        self.invalidated.lock().unwrap().push(key);
    }

    /// Appends `append` if its stream is as expected when the batch takes
    /// its positions (under its stream's lock); the outcome is in the slot
    /// once the batch committed.
    pub fn append_to_stream(&self, append: StreamAppend) -> OutcomeSlot {
        let slot = OutcomeSlot::default();
        self.conditional
            .lock()
            .unwrap()
            .push((append, slot.clone()));
        slot
    }
}

/// A kind of write command that runs together with the others of its kind
/// in a batch, as set-based statements (one statement for N commands
/// instead of N statements: on PostgreSQL a statement's own cost —
/// protocol, executor start, a round of locks — is more than a row's), see
/// [`PgStore::write_grouped`].
pub trait PgGroup: Send + Sync + 'static {
    type Item: Send + Sync + 'static;
    type Out: Send + 'static;
    /// Runs `items` (in arrival order) in the batch's transaction and
    /// returns one outcome per item, in the same order. `Err` only when
    /// the database failed (the batch is then retried command by command,
    /// so a group may also run with one item).
    fn run<'a>(tx: &'a PgTx<'a>, items: Vec<&'a Self::Item>) -> PgFuture<'a, Vec<Self::Out>>;
}

type JobFuture<'a> = Pin<Box<dyn Future<Output = bool> + Send + 'a>>;

/// A command's answer once its batch ended: its own outcome if the batch
/// committed, else the batch's error.
fn answer<T>(
    outcome: &Mutex<Option<Result<T, StoreError>>>,
    commit: Result<(), StoreError>,
) -> Result<T, StoreError> {
    let outcome = outcome
        .lock()
        .unwrap()
        .take()
        .unwrap_or_else(|| Err(StoreError::Internal("command did not run".into())));
    commit.and(outcome)
}

trait PgJob: Send + Sync {
    /// Runs the command; `false` when the database failed.
    fn run<'a>(&'a self, tx: &'a PgTx<'a>) -> JobFuture<'a>;
    fn respond(self: Box<Self>, commit: Result<(), StoreError>);
    /// The group this command runs in, if any (see [`PgGroup`]).
    fn group(&self) -> Option<std::any::TypeId> {
        None
    }
    fn as_any(&self) -> &dyn std::any::Any;
    /// Runs `members` (every command of this one's group in the batch,
    /// this one first) together; `false` when the database failed.
    fn run_group<'a>(&'a self, tx: &'a PgTx<'a>, members: &'a [&'a dyn PgJob]) -> JobFuture<'a> {
        let _ = members;
        self.run(tx)
    }
}

/// What one item of a group came to, and where its caller waits for it.
type GroupOutcome<G> = Result<<G as PgGroup>::Out, StoreError>;

struct GroupJob<G: PgGroup> {
    item: G::Item,
    outcome: Mutex<Option<GroupOutcome<G>>>,
    reply: Mutex<Option<oneshot::Sender<GroupOutcome<G>>>>,
}

impl<G: PgGroup> PgJob for GroupJob<G> {
    fn run<'a>(&'a self, tx: &'a PgTx<'a>) -> JobFuture<'a> {
        self.run_group(tx, &[])
    }
    fn respond(self: Box<Self>, commit: Result<(), StoreError>) {
        if let Some(reply) = self.reply.lock().unwrap().take() {
            let _ = reply.send(answer(&self.outcome, commit));
        }
    }
    fn group(&self) -> Option<std::any::TypeId> {
        Some(std::any::TypeId::of::<G>())
    }
    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
    fn run_group<'a>(&'a self, tx: &'a PgTx<'a>, members: &'a [&'a dyn PgJob]) -> JobFuture<'a> {
        Box::pin(async move {
            let mut jobs: Vec<&GroupJob<G>> = members
                .iter()
                .filter_map(|m| m.as_any().downcast_ref::<GroupJob<G>>())
                .collect();
            if jobs.is_empty() {
                jobs.push(self);
            }
            let items = jobs.iter().map(|j| &j.item).collect();
            match G::run(tx, items).await {
                Ok(outs) if outs.len() == jobs.len() => {
                    for (job, out) in jobs.iter().zip(outs) {
                        *job.outcome.lock().unwrap() = Some(Ok(out));
                    }
                    true
                }
                Ok(outs) => {
                    let e = StoreError::Internal(format!(
                        "a command group answered {} outcomes for {} commands",
                        outs.len(),
                        jobs.len()
                    ));
                    for job in jobs {
                        *job.outcome.lock().unwrap() = Some(Err(e.clone()));
                    }
                    false
                }
                Err(e) => {
                    for job in jobs {
                        *job.outcome.lock().unwrap() = Some(Err(e.clone()));
                    }
                    false
                }
            }
        })
    }
}

struct Job<T, F> {
    f: F,
    outcome: Mutex<Option<Result<T, StoreError>>>,
    reply: oneshot::Sender<Result<T, StoreError>>,
}

impl<T, F> PgJob for Job<T, F>
where
    T: Send + 'static,
    F: for<'a> Fn(&'a PgTx<'a>) -> PgFuture<'a, T> + Send + Sync + 'static,
    Job<T, F>: 'static,
{
    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
    fn run<'a>(&'a self, tx: &'a PgTx<'a>) -> JobFuture<'a> {
        Box::pin(async move {
            let outcome = (self.f)(tx).await;
            let ok = outcome.is_ok();
            *self.outcome.lock().unwrap() = Some(outcome);
            ok
        })
    }
    fn respond(self: Box<Self>, commit: Result<(), StoreError>) {
        let _ = self.reply.send(answer(&self.outcome, commit));
    }
}

pub struct PgStore {
    pool: Pool,
    writer: mpsc::Sender<Box<dyn PgJob>>,
    /// How far readers of the event log may read (see `horizon.rs`).
    horizon: super::horizon::Horizon,
    /// Other nodes' writes, for caches (see `invalidate.rs`).
    invalidations: Arc<super::invalidate::Invalidations>,
    /// How to connect (for [`PgStore::pool_of`]).
    config: tokio_postgres::Config,
    wait: Duration,
}

impl PgStore {
    pub async fn open(
        url: &str,
        limits: &StoreLimits,
        services: &[&'static migrate::MigrationSet],
    ) -> anyhow::Result<Arc<PgStore>> {
        let mut cfg: tokio_postgres::Config = url
            .parse()
            .map_err(|e| anyhow::anyhow!("invalid PostgreSQL url: {e}"))?;
        cfg.connect_timeout(Duration::from_secs(3));
        cfg.application_name("throng");
        let wait = Duration::from_millis(limits.pg_wait_ms);
        let writers = limits.pg_writers.max(1);
        let pool = new_pool(&cfg, limits.read_connections.max(1), wait)?;
        // The writers' connections apart: reads under a crowd never keep a
        // batch waiting for a connection.
        let write_pool = new_pool(&cfg, writers, wait)?;
        {
            let mut client = pool
                .get()
                .await
                .map_err(|e| anyhow::anyhow!("cannot connect to PostgreSQL: {e}"))?;
            migrate::apply_postgres(&mut client, services).await?;
        }
        let (tx, rx) = mpsc::channel::<Box<dyn PgJob>>(limits.write_queue_max.max(1));
        let rx = Arc::new(tokio::sync::Mutex::new(rx));
        // The writers run on a thread of their own: each batch is a few
        // round trips, and on the request workers every reply waited behind
        // the ready HTTP tasks before the next statement went out.
        let batch_max = limits.batch_commands_max.max(1);
        let loops: Vec<_> = (0..writers)
            .map(|_| writer_loop(write_pool.clone(), rx.clone(), batch_max))
            .collect();
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        std::thread::Builder::new()
            .name("pg-writers".into())
            .spawn(move || runtime.block_on(futures::future::join_all(loops)))?;
        Ok(Arc::new(PgStore {
            pool,
            writer: tx,
            horizon: Default::default(),
            invalidations: super::invalidate::Invalidations::start(cfg.clone()),
            config: cfg,
            wait,
        }))
    }

    /// Another pool of `size` connections to the same database, for code
    /// that must not share the store's (the benches' comparison designs).
    pub fn pool_of(&self, size: usize) -> anyhow::Result<Pool> {
        new_pool(&self.config, size, self.wait)
    }

    /// A pooled connection for reads.
    pub async fn client(&self) -> Result<deadpool_postgres::Object, StoreError> {
        Ok(self.pool.get().await?)
    }

    /// Runs `item` with the other commands of group `G` in the writer's
    /// current batch (see [`PgGroup`]); answers after the commit.
    pub async fn write_grouped<G: PgGroup>(&self, item: G::Item) -> Result<G::Out, StoreError> {
        let (reply, answer) = oneshot::channel();
        let job: Box<dyn PgJob> = Box::new(GroupJob::<G> {
            item,
            outcome: Mutex::new(None),
            reply: Mutex::new(Some(reply)),
        });
        self.submit(job, answer).await
    }

    /// Queues `job` for the writers and waits for its answer.
    async fn submit<T>(
        &self,
        job: Box<dyn PgJob>,
        answer: oneshot::Receiver<Result<T, StoreError>>,
    ) -> Result<T, StoreError> {
        let stopped = || StoreError::Unavailable("the writer has stopped".into());
        self.writer.send(job).await.map_err(|_| stopped())?;
        answer.await.map_err(|_| stopped())?
    }

    /// What every node's writes invalidate (see `invalidate.rs`).
    pub fn invalidations(&self) -> &super::invalidate::Invalidations {
        &self.invalidations
    }

    /// The event log's horizon read on `client`: every event at a position
    /// up to it has committed or never will (see `horizon.rs`).
    pub async fn horizon(&self, client: &deadpool_postgres::Client) -> Result<i64, StoreError> {
        self.horizon.read_pooled(client).await
    }

    /// Runs `f` in the writer's current batch; answers after the commit.
    /// `f` may run more than once (a failed batch is retried command by
    /// command), always in a fresh transaction, so it must not have effects
    /// outside the database.
    pub async fn write<T, F>(&self, f: F) -> Result<T, StoreError>
    where
        T: Send + 'static,
        F: for<'a> Fn(&'a PgTx<'a>) -> PgFuture<'a, T> + Send + Sync + 'static,
    {
        let (reply, answer) = oneshot::channel();
        let job = Box::new(Job {
            f,
            outcome: Mutex::new(None),
            reply,
        });
        self.submit(job, answer).await
    }
}

fn new_pool(cfg: &tokio_postgres::Config, size: usize, wait: Duration) -> anyhow::Result<Pool> {
    let mgr = Manager::from_config(
        cfg.clone(),
        NoTls,
        ManagerConfig {
            recycling_method: RecyclingMethod::Fast,
        },
    );
    Ok(Pool::builder(mgr)
        .max_size(size.max(1))
        .runtime(Runtime::Tokio1)
        .wait_timeout(Some(wait))
        .create_timeout(Some(wait))
        .recycle_timeout(Some(wait))
        .build()?)
}

/// One writer: takes the waiting commands (up to `batch_max`) while no other
/// writer of this node is taking them, then runs them as one batch.
async fn writer_loop(
    pool: Pool,
    rx: Arc<tokio::sync::Mutex<mpsc::Receiver<Box<dyn PgJob>>>>,
    batch_max: usize,
) {
    let mut batch: Vec<Box<dyn PgJob>> = Vec::with_capacity(batch_max);
    loop {
        {
            let mut rx = rx.lock().await;
            let Some(first) = rx.recv().await else { return };
            batch.push(first);
            while batch.len() < batch_max {
                match rx.try_recv() {
                    Ok(job) => batch.push(job),
                    Err(_) => break,
                }
            }
        }
        let started = Instant::now();
        let jobs: Vec<&dyn PgJob> = batch.iter().map(|j| j.as_ref()).collect();
        let outcome = run_batch(&pool, &jobs).await;
        let n = batch.len();
        match outcome {
            BatchOutcome::Committed => {
                for job in batch.drain(..) {
                    job.respond(Ok(()));
                }
            }
            BatchOutcome::CommandFailed if n > 1 => {
                // Isolate the failing command(s): rerun each alone.
                for job in batch.drain(..) {
                    let alone = run_batch(&pool, &[job.as_ref()]).await;
                    job.respond(match alone {
                        BatchOutcome::Committed | BatchOutcome::CommandFailed => Ok(()),
                        BatchOutcome::Failed(e) => Err(e),
                    });
                }
            }
            BatchOutcome::CommandFailed => {
                for job in batch.drain(..) {
                    job.respond(Ok(()));
                }
            }
            BatchOutcome::Failed(e) => {
                tracing::error!(error = %e, "postgres write batch failed");
                for job in batch.drain(..) {
                    job.respond(Err(e.clone()));
                }
            }
        }
        metrics::observe_write_batch(n, started.elapsed());
    }
}

enum BatchOutcome {
    Committed,
    /// A command reported a database error (kept in its outcome); rolled back.
    CommandFailed,
    /// The batch itself failed (connection, commit): every command fails.
    Failed(StoreError),
}

async fn run_batch(pool: &Pool, jobs: &[&dyn PgJob]) -> BatchOutcome {
    match try_run_batch(pool, jobs).await {
        Ok(true) => BatchOutcome::Committed,
        Ok(false) => BatchOutcome::CommandFailed,
        Err(e) => BatchOutcome::Failed(e),
    }
}

/// How long a writer connection keeps its prepared statements. PostgreSQL
/// keeps a prepared statement's generic plan, chosen from the tables' sizes
/// when it was made; a plan made while a table was empty (a new store: the
/// event log, the registrations) scanned the whole table once it held
/// hundreds of thousands of rows (try-register fell to 190 req/s in the
/// first bench phase until autovacuum's first ANALYZE, up to a minute
/// later). Preparing again now and then plans for the tables as they are.
const STATEMENTS_KEPT_MAX: Duration = Duration::from_secs(5);

async fn try_run_batch(pool: &Pool, jobs: &[&dyn PgJob]) -> Result<bool, StoreError> {
    let mut client = pool.get().await?;
    {
        static PREPARED_AT: Mutex<Vec<(usize, Instant)>> = Mutex::new(Vec::new());
        let id = Arc::as_ptr(&client.statement_cache) as usize;
        let mut at = PREPARED_AT.lock().unwrap();
        match at.iter_mut().find(|(c, _)| *c == id) {
            Some((_, since)) if since.elapsed() > STATEMENTS_KEPT_MAX => {
                client.statement_cache.clear();
                *since = Instant::now();
            }
            Some(_) => {}
            None => {
                if at.len() >= 256 {
                    at.clear();
                }
                at.push((id, Instant::now()));
            }
        }
    }
    let tx = client.transaction().await?;
    let ptx = PgTx {
        tx: &tx,
        events: Mutex::new(Vec::new()),
        opening: Mutex::new(Vec::new()),
        conditional: Mutex::new(Vec::new()),
        invalidated: Mutex::new(Vec::new()),
    };
    // Statements of all commands are pipelined on the one connection; the
    // commands of a group run once, together, led by the group's first.
    let mut groups: Vec<(std::any::TypeId, Vec<&dyn PgJob>)> = Vec::new();
    let mut alone: Vec<&dyn PgJob> = Vec::new();
    for &job in jobs {
        match job.group() {
            None => alone.push(job),
            Some(key) => match groups.iter_mut().find(|(k, _)| *k == key) {
                Some((_, members)) => members.push(job),
                None => groups.push((key, vec![job])),
            },
        }
    }
    let runs = alone.iter().map(|j| j.run(&ptx)).chain(
        groups
            .iter()
            .map(|(_, members)| members[0].run_group(&ptx, members)),
    );
    let oks = futures::future::join_all(runs).await;
    if oks.iter().any(|ok| !ok) {
        drop(ptx);
        let _ = tx.rollback().await;
        return Ok(false);
    }
    let mut events = std::mem::take(&mut *ptx.events.lock().unwrap());
    let opening = std::mem::take(&mut *ptx.opening.lock().unwrap());
    let conditional = std::mem::take(&mut *ptx.conditional.lock().unwrap());
    let invalidated = std::mem::take(&mut *ptx.invalidated.lock().unwrap());
    drop(ptx);
    notify_invalidated(&tx, invalidated).await?;
    if events.is_empty() && conditional.is_empty() {
        if opening.is_empty() {
            tx.commit().await?;
            return Ok(true);
        }
        if opening_streams_distinct(&opening) {
            commit_with_opening_events(&tx, &opening).await?;
            std::mem::forget(tx);
            return Ok(true);
        }
    }
    // With other appends (or one stream opened twice), opening events go
    // the general way: no head read finds them a version but 0.
    events.extend(opening);
    let appends: Vec<&StreamAppend> = conditional.iter().map(|(a, _)| a).collect();
    // (decide_appends takes the transaction id before any position.)
    let decided = decide_appends(&tx, &events, &appends).await?;
    // The rows and the COMMIT go out together: one round trip. The insert
    // is prepared first, so it is sent before the COMMIT (a statement still
    // being prepared would let the COMMIT run first, and the insert after
    // it outside the transaction). A failed insert makes the server answer
    // the COMMIT with a rollback, and the insert's error fails the batch.
    let insert = insert_rows_statement(&tx).await?;
    futures::try_join!(
        insert_rows_prepared(&tx, &insert, &decided.positions, &decided.rows),
        tx.batch_execute("COMMIT").map_err(StoreError::from)
    )?;
    // Committed: forgetting the transaction keeps its drop from sending a
    // ROLLBACK after it (it holds a borrow of the connection, nothing more).
    std::mem::forget(tx);
    for ((_, slot), outcome) in conditional.iter().zip(decided.outcomes) {
        *slot.lock().unwrap() = Some(outcome);
    }
    Ok(true)
}

/// Tells every node's caches that what `keys` name changed, when (and only
/// if) `tx` commits (see `invalidate.rs`).
pub(crate) async fn notify_invalidated(
    tx: &deadpool_postgres::Transaction<'_>,
    mut keys: Vec<String>,
) -> Result<(), StoreError> {
    if keys.is_empty() {
        return Ok(());
    }
    keys.sort_unstable();
    keys.dedup();
    let stmt = tx
        .prepare_cached("SELECT COUNT(pg_notify($1, k)) FROM unnest($2::TEXT[]) AS k")
        .await?;
    tx.query_one(&stmt, &[&super::invalidate::CHANNEL, &keys])
        .await?;
    Ok(())
}

/// Whether every opening event names a stream of its own.
fn opening_streams_distinct(opening: &[NewEvent]) -> bool {
    let mut names: Vec<&str> = opening.iter().map(|e| e.stream.as_str()).collect();
    names.sort_unstable();
    names.windows(2).all(|w| w[0] != w[1])
}

/// Inserts `opening` (each the first event of its own new stream, version
/// 0) and commits, in one round trip: the transaction's id is taken first
/// (the horizon's rule 1, see `horizon.rs`), then the rows take their
/// positions from the sequence as they are inserted, then the `COMMIT`.
/// The three statements are prepared before any is sent, so they run in
/// that order; a failed statement makes the server answer the `COMMIT`
/// with a rollback, and its error fails the batch. The caller forgets the
/// transaction once this returned `Ok` (it committed).
async fn commit_with_opening_events(
    tx: &deadpool_postgres::Transaction<'_>,
    opening: &[NewEvent],
) -> Result<(), StoreError> {
    let (xid, insert) = futures::try_join!(
        tx.prepare_cached(XACT_ID_SQL),
        tx.prepare_cached(
            "INSERT INTO events (position, stream, event_type, payload, created_at_ms,
                                 stream_version, event_id, metadata, payload_format)
             SELECT nextval('event_position'), s, t, pl, $3, 0, id, m, f
               FROM unnest($1::TEXT[], $2::TEXT[], $4::BYTEA[], $5::BYTEA[], $6::BYTEA[],
                           $7::SMALLINT[]) AS r(s, t, pl, id, m, f)",
        )
    )?;
    let now_ms = crate::base::clock::now_ms();
    let c = EventColumns::of(opening.iter());
    let params: [&(dyn tokio_postgres::types::ToSql + Sync); 7] = [
        &c.streams,
        &c.types,
        &now_ms,
        &c.payloads,
        &c.ids,
        &c.metadata,
        &c.formats,
    ];
    futures::try_join!(
        tx.query_one(&xid, &[]).map_err(StoreError::from),
        tx.execute(&insert, &params).map_err(StoreError::from),
        tx.batch_execute("COMMIT").map_err(StoreError::from)
    )?;
    Ok(())
}

/// Appends `events` inside `tx`, each at its stream's next version, and
/// returns their positions (increasing, in `events`' order; on PostgreSQL
/// another transaction's events may sit between them). The one place that
/// takes positions, with [`take_positions`]; code that writes in its own
/// transaction instead of the batched writer (a voting round) calls this
/// too.
pub async fn append_events(
    tx: &deadpool_postgres::Transaction<'_>,
    events: &[NewEvent],
) -> Result<Vec<i64>, StoreError> {
    let decided = decide_appends(tx, events, &[]).await?;
    insert_rows(tx, &decided.positions, &decided.rows).await?;
    Ok(decided.positions)
}

/// Gives the transaction its id (the horizon's rule 1, see `horizon.rs`),
/// before it takes any position.
const XACT_ID_SQL: &str = "SELECT pg_current_xact_id()::text";

/// Takes `n` positions for events of `tx` from the `event_position`
/// sequence, increasing. The transaction's id is assigned first (the
/// horizon's rule 1, see `horizon.rs`): both statements go out at once and
/// run in order.
pub async fn take_positions(
    tx: &deadpool_postgres::Transaction<'_>,
    n: usize,
) -> Result<Vec<i64>, StoreError> {
    let n = n as i64;
    let n_param: [&(dyn tokio_postgres::types::ToSql + Sync); 1] = [&n];
    let (xid, next) = futures::try_join!(
        tx.prepare_cached(XACT_ID_SQL),
        tx.prepare_cached("SELECT nextval('event_position') FROM generate_series(1, $1::BIGINT)")
    )?;
    let (_, rows) = futures::try_join!(tx.query_one(&xid, &[]), tx.query(&next, &n_param))?;
    let mut positions: Vec<i64> = rows.iter().map(|r| r.get(0)).collect();
    positions.sort_unstable();
    Ok(positions)
}

/// What a batch appends: its rows (event, stream version) at their
/// positions, and each conditional append's outcome.
struct DecidedAppends {
    positions: Vec<i64>,
    rows: Vec<(NewEvent, i64)>,
    outcomes: Vec<AppendOutcome>,
}

/// Decides the appends of `plain` events and the `conditional` appends
/// that pass their check, in that order: the rows to insert, their
/// positions and each conditional append's outcome.
///
/// Streams, not the whole log, are what appends must agree on: each stream
/// the batch touches is locked (a transaction-level advisory lock on a hash
/// of its name, taken in one order by every writer, so two batches never
/// wait on each other in a cycle) before its head is read, and the lock is
/// held until commit. Appends to other streams, from this node's other
/// writers or from other nodes, run at the same time.
async fn decide_appends(
    tx: &deadpool_postgres::Transaction<'_>,
    plain: &[NewEvent],
    conditional: &[&StreamAppend],
) -> Result<DecidedAppends, StoreError> {
    let mut names: Vec<&str> = plain.iter().map(|e| e.stream.as_str()).collect();
    names.extend(conditional.iter().map(|a| a.stream.as_str()));
    names.sort_unstable();
    names.dedup();
    let wanted: Vec<&[u8]> = conditional
        .iter()
        .flat_map(|a| {
            a.events
                .iter()
                .filter_map(|e| e.event_id.as_ref().map(|id| &id[..]))
        })
        .collect();
    // Locks, then heads and ids (each statement of a READ COMMITTED
    // transaction sees what committed before it began, so the heads are
    // those the last holder of each lock left), sent at once.
    let lock = tx.prepare_cached(
        "SELECT COUNT(pg_advisory_xact_lock(k)) FROM
           (SELECT DISTINCT hashtextextended(s, 0) AS k FROM unnest($1::TEXT[]) AS s ORDER BY 1) AS l",
    );
    // Each head is the last entry of its stream in `(stream,
    // stream_version)`: one backward index probe per stream. (`DISTINCT
    // ON (stream) ... WHERE stream = ANY($1)` read and sorted every event
    // of each stream: 367 ms per append to voting's ballot stream at
    // 423,861 events, EXPLAIN ANALYZE.)
    let heads = tx.prepare_cached(
        "SELECT s.stream, h.stream_version, h.event_type FROM unnest($1::TEXT[]) AS s(stream)
         CROSS JOIN LATERAL (SELECT stream_version, event_type FROM events
                              WHERE stream = s.stream ORDER BY stream_version DESC LIMIT 1) AS h",
    );
    let (lock, heads) = futures::try_join!(lock, heads)?;
    let ids_query = async {
        if wanted.is_empty() {
            return Ok(Vec::new());
        }
        let stmt = tx
            .prepare_cached(
                "SELECT event_id, position, stream, stream_version FROM events
                 WHERE event_id = ANY($1)",
            )
            .await?;
        tx.query(&stmt, &[&wanted]).await
    };
    // Plain events are all written: their positions go out in the same
    // round trip, after the locks (a stream's versions and positions rise
    // together). A conditional append may write nothing, so a batch with
    // one takes positions once decided, and leaves no hole.
    let positions_now = conditional.is_empty() && !plain.is_empty();
    let positions_query = async {
        if !positions_now {
            return Ok(Vec::new());
        }
        take_positions(tx, plain.len()).await
    };
    let names_param: [&(dyn tokio_postgres::types::ToSql + Sync); 1] = [&names];
    let (_, head_rows, id_rows, positions) = futures::try_join!(
        tx.query_one(&lock, &names_param).map_err(StoreError::from),
        tx.query(&heads, &names_param).map_err(StoreError::from),
        ids_query.map_err(StoreError::from),
        positions_query
    )?;
    let mut heads: HashMap<String, StreamHead> = HashMap::with_capacity(names.len());
    for row in head_rows {
        heads.insert(
            row.get(0),
            StreamHead {
                version: row.get(1),
                deleted: row.get::<_, &str>(2) == super::eventlog::TOMBSTONE_TYPE,
            },
        );
    }
    let mut ids: HashMap<[u8; 16], IdAt> = HashMap::new();
    for row in id_rows {
        let id: &[u8] = row.get(0);
        if let Ok(id) = <[u8; 16]>::try_from(id) {
            ids.insert(
                id,
                IdAt {
                    position: row.get(1),
                    stream: row.get(2),
                    version: row.get(3),
                },
            );
        }
    }
    let (rows, decided) = streams::decide_batch(plain, conditional, heads, &ids);
    let positions = if positions_now || rows.is_empty() {
        positions
    } else {
        take_positions(tx, rows.len()).await?
    };
    let at = |relative: i64| positions[relative as usize];
    let outcomes = decided
        .into_iter()
        .map(|(outcome, relative)| match (outcome, relative) {
            (
                AppendOutcome::Appended {
                    first_position,
                    last_position,
                    version,
                },
                true,
            ) => AppendOutcome::Appended {
                first_position: at(first_position),
                last_position: at(last_position),
                version,
            },
            (
                AppendOutcome::AlreadyAppended {
                    first_position,
                    last_position,
                    version,
                },
                true,
            ) => AppendOutcome::AlreadyAppended {
                first_position: at(first_position),
                last_position: at(last_position),
                version,
            },
            (other, _) => other,
        })
        .collect();
    Ok(DecidedAppends {
        positions,
        rows,
        outcomes,
    })
}

/// Inserts `rows` (event, stream version) at `positions`, in one prepared
/// statement whatever their number (arrays, unnested).
async fn insert_rows(
    tx: &deadpool_postgres::Transaction<'_>,
    positions: &[i64],
    rows: &[(NewEvent, i64)],
) -> Result<(), StoreError> {
    let stmt = insert_rows_statement(tx).await?;
    insert_rows_prepared(tx, &stmt, positions, rows).await
}

async fn insert_rows_statement(
    tx: &deadpool_postgres::Transaction<'_>,
) -> Result<tokio_postgres::Statement, StoreError> {
    Ok(tx
        .prepare_cached(
            "INSERT INTO events (position, stream, event_type, payload, created_at_ms,
                                 stream_version, event_id, metadata, payload_format)
             SELECT p, s, t, pl, $4, v, id, m, f
               FROM unnest($1::BIGINT[], $2::TEXT[], $3::TEXT[], $5::BYTEA[], $6::BIGINT[],
                           $7::BYTEA[], $8::BYTEA[], $9::SMALLINT[])
                 AS r(p, s, t, pl, v, id, m, f)",
        )
        .await?)
}

/// [`insert_rows`] with its statement prepared: the request goes out when
/// the future is first polled, before any await.
async fn insert_rows_prepared(
    tx: &deadpool_postgres::Transaction<'_>,
    stmt: &tokio_postgres::Statement,
    positions: &[i64],
    rows: &[(NewEvent, i64)],
) -> Result<(), StoreError> {
    if rows.is_empty() {
        return Ok(());
    }
    let now_ms = crate::base::clock::now_ms();
    let c = EventColumns::of(rows.iter().map(|(e, _)| e));
    let versions: Vec<i64> = rows.iter().map(|(_, v)| *v).collect();
    tx.execute(
        stmt,
        &[
            &positions,
            &c.streams,
            &c.types,
            &now_ms,
            &c.payloads,
            &versions,
            &c.ids,
            &c.metadata,
            &c.formats,
        ],
    )
    .await?;
    Ok(())
}

/// Events' columns as the arrays the inserts unnest.
struct EventColumns<'a> {
    streams: Vec<&'a str>,
    types: Vec<&'a str>,
    payloads: Vec<&'a [u8]>,
    ids: Vec<Option<&'a [u8]>>,
    metadata: Vec<Option<&'a [u8]>>,
    formats: Vec<i16>,
}

impl<'a> EventColumns<'a> {
    fn of(events: impl ExactSizeIterator<Item = &'a NewEvent>) -> EventColumns<'a> {
        let mut c = EventColumns {
            streams: Vec::with_capacity(events.len()),
            types: Vec::with_capacity(events.len()),
            payloads: Vec::with_capacity(events.len()),
            ids: Vec::with_capacity(events.len()),
            metadata: Vec::with_capacity(events.len()),
            formats: Vec::with_capacity(events.len()),
        };
        for e in events {
            c.streams.push(&e.stream);
            c.types.push(&e.event_type);
            c.payloads.push(&e.payload);
            c.ids.push(e.event_id.as_ref().map(|id| &id[..]));
            c.metadata.push(e.metadata.as_deref());
            c.formats.push(e.format);
        }
        c
    }
}
