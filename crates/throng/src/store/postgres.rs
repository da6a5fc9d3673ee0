//! The scale-out store: PostgreSQL shared by several throng nodes.
//!
//! Writes keep the SQLite contract: one writer task per node gathers waiting
//! commands, runs them pipelined in one transaction and commits once. If any
//! command fails, the batch is rolled back and every command is rerun alone,
//! so one bad command (or a deadlock between two nodes) fails only itself.
//!
//! Event positions: a plain sequence commits out of order (transaction A takes
//! 7, B takes 8, B commits first, a reader at 8 skips 7 forever). Instead the
//! writer takes positions at the very end of its transaction from one counter
//! row (`event_head`), whose row lock is held until commit: a transaction with
//! higher positions can only commit after every lower one did, and positions
//! stay gapless. The cost is one short lock per batch, not per event.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use deadpool_postgres::{Manager, ManagerConfig, Pool, RecyclingMethod, Runtime};
use tokio::sync::{mpsc, oneshot};
use tokio_postgres::types::ToSql;
use tokio_postgres::NoTls;

use super::{eventlog::NewEvent, migrate, StoreError, StoreLimits};
use crate::base::metrics;

pub type PgFuture<'a, T> = Pin<Box<dyn Future<Output = Result<T, StoreError>> + Send + 'a>>;

/// What a write command sees: the batch's transaction and its event outbox.
pub struct PgTx<'a> {
    pub tx: &'a deadpool_postgres::Transaction<'a>,
    events: Mutex<Vec<NewEvent>>,
}

impl PgTx<'_> {
    /// Appends an event that commits with this transaction.
    pub fn append(&self, event: NewEvent) {
        self.events.lock().unwrap().push(event);
    }
}

trait PgJob: Send + Sync {
    /// Runs the command; `Err` only when the database failed.
    fn run<'a>(&'a self, tx: &'a PgTx<'a>) -> Pin<Box<dyn Future<Output = bool> + Send + 'a>>;
    fn respond(self: Box<Self>, commit: Result<(), StoreError>);
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
{
    fn run<'a>(&'a self, tx: &'a PgTx<'a>) -> Pin<Box<dyn Future<Output = bool> + Send + 'a>> {
        Box::pin(async move {
            let outcome = (self.f)(tx).await;
            let ok = outcome.is_ok();
            *self.outcome.lock().unwrap() = Some(outcome);
            ok
        })
    }
    fn respond(self: Box<Self>, commit: Result<(), StoreError>) {
        let outcome = self
            .outcome
            .lock()
            .unwrap()
            .take()
            .unwrap_or_else(|| Err(StoreError::Internal("command did not run".into())));
        let _ = self.reply.send(commit.and(outcome));
    }
}

pub struct PgStore {
    pool: Pool,
    writer: mpsc::Sender<Box<dyn PgJob>>,
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
        let mgr = Manager::from_config(
            cfg,
            NoTls,
            ManagerConfig {
                recycling_method: RecyclingMethod::Fast,
            },
        );
        let wait = Duration::from_millis(limits.pg_wait_ms);
        let pool = Pool::builder(mgr)
            .max_size(limits.read_connections.max(1) + 1)
            .runtime(Runtime::Tokio1)
            .wait_timeout(Some(wait))
            .create_timeout(Some(wait))
            .recycle_timeout(Some(wait))
            .build()?;
        {
            let mut client = pool
                .get()
                .await
                .map_err(|e| anyhow::anyhow!("cannot connect to PostgreSQL: {e}"))?;
            migrate::apply_postgres(&mut client, services).await?;
        }
        let (tx, rx) = mpsc::channel::<Box<dyn PgJob>>(limits.write_queue_max.max(1));
        tokio::spawn(writer_loop(
            pool.clone(),
            rx,
            limits.batch_commands_max.max(1),
        ));
        Ok(Arc::new(PgStore { pool, writer: tx }))
    }

    /// A pooled connection for reads.
    pub async fn client(&self) -> Result<deadpool_postgres::Object, StoreError> {
        Ok(self.pool.get().await?)
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
        self.writer
            .send(job)
            .await
            .map_err(|_| StoreError::Unavailable("the writer has stopped".into()))?;
        answer
            .await
            .map_err(|_| StoreError::Unavailable("the writer has stopped".into()))?
    }
}

async fn writer_loop(pool: Pool, mut rx: mpsc::Receiver<Box<dyn PgJob>>, batch_max: usize) {
    let mut batch: Vec<Box<dyn PgJob>> = Vec::with_capacity(batch_max);
    while let Some(first) = rx.recv().await {
        batch.push(first);
        while batch.len() < batch_max {
            match rx.try_recv() {
                Ok(job) => batch.push(job),
                Err(_) => break,
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

async fn try_run_batch(pool: &Pool, jobs: &[&dyn PgJob]) -> Result<bool, StoreError> {
    let mut client = pool.get().await?;
    let tx = client.transaction().await?;
    let ptx = PgTx {
        tx: &tx,
        events: Mutex::new(Vec::new()),
    };
    // Statements of all commands are pipelined on the one connection.
    let oks = futures::future::join_all(jobs.iter().map(|j| j.run(&ptx))).await;
    if oks.iter().any(|ok| !ok) {
        drop(ptx);
        let _ = tx.rollback().await;
        return Ok(false);
    }
    let events = std::mem::take(&mut *ptx.events.lock().unwrap());
    drop(ptx);
    if !events.is_empty() {
        append_events(&tx, &events).await?;
    }
    tx.commit().await?;
    Ok(true)
}

/// Events appended in one statement at most (5 parameters each).
const EVENTS_PER_INSERT_MAX: usize = 1000;

/// Appends `events` inside `tx` at consecutive positions and returns the
/// first; the one place that takes positions (under the `event_head` row
/// lock, held until commit; see the module doc). Code that writes in its own
/// transaction instead of the batched writer (a voting round) calls this too.
pub async fn append_events(
    tx: &tokio_postgres::Transaction<'_>,
    events: &[NewEvent],
) -> Result<i64, StoreError> {
    let n = events.len() as i64;
    // Takes the row lock that orders commits by position (see module doc).
    let head: i64 = tx
        .query_one(
            "UPDATE event_head SET position = position + $1 WHERE id = 1 RETURNING position",
            &[&n],
        )
        .await?
        .get(0);
    let first = head - n + 1;
    let now_ms = crate::base::clock::now_ms();
    for (chunk_no, chunk) in events.chunks(EVENTS_PER_INSERT_MAX).enumerate() {
        let mut sql = String::from(
            "INSERT INTO events (position, stream, event_type, payload, created_at_ms) VALUES ",
        );
        let positions: Vec<i64> = (0..chunk.len())
            .map(|i| first + (chunk_no * EVENTS_PER_INSERT_MAX + i) as i64)
            .collect();
        let mut params: Vec<&(dyn ToSql + Sync)> = Vec::with_capacity(chunk.len() * 5);
        for (i, e) in chunk.iter().enumerate() {
            let b = i * 5;
            if i > 0 {
                sql.push(',');
            }
            sql.push_str(&format!(
                "(${},${},${},${},${})",
                b + 1,
                b + 2,
                b + 3,
                b + 4,
                b + 5
            ));
            params.push(&positions[i]);
            params.push(&e.stream);
            params.push(&e.event_type);
            params.push(&e.payload);
            params.push(&now_ms);
        }
        tx.execute(sql.as_str(), &params).await?;
    }
    Ok(first)
}
