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

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use deadpool_postgres::{Manager, ManagerConfig, Pool, RecyclingMethod, Runtime};
use tokio::sync::{mpsc, oneshot};
use tokio_postgres::types::ToSql;
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
    conditional: Mutex<Vec<(StreamAppend, OutcomeSlot)>>,
}

/// Where a conditional append's outcome lands once its batch decided it
/// (read after the commit).
pub type OutcomeSlot = Arc<Mutex<Option<AppendOutcome>>>;

impl PgTx<'_> {
    /// Appends an event that commits with this transaction.
    pub fn append(&self, event: NewEvent) {
        self.events.lock().unwrap().push(event);
    }

    /// Appends `append` if its stream is as expected when the batch takes
    /// its positions (under the `event_head` lock); the outcome is in the
    /// slot once the batch committed.
    pub fn append_to_stream(&self, append: StreamAppend) -> OutcomeSlot {
        let slot = OutcomeSlot::default();
        self.conditional
            .lock()
            .unwrap()
            .push((append, slot.clone()));
        slot
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
        conditional: Mutex::new(Vec::new()),
    };
    // Statements of all commands are pipelined on the one connection.
    let oks = futures::future::join_all(jobs.iter().map(|j| j.run(&ptx))).await;
    if oks.iter().any(|ok| !ok) {
        drop(ptx);
        let _ = tx.rollback().await;
        return Ok(false);
    }
    let events = std::mem::take(&mut *ptx.events.lock().unwrap());
    let conditional = std::mem::take(&mut *ptx.conditional.lock().unwrap());
    drop(ptx);
    if !events.is_empty() || !conditional.is_empty() {
        let appends: Vec<&StreamAppend> = conditional.iter().map(|(a, _)| a).collect();
        let (_, outcomes) = append_all(&tx, &events, &appends).await?;
        for ((_, slot), outcome) in conditional.iter().zip(outcomes) {
            *slot.lock().unwrap() = Some(outcome);
        }
    }
    tx.commit().await?;
    Ok(true)
}

/// Events appended in one statement at most (9 parameters each).
const EVENTS_PER_INSERT_MAX: usize = 1000;

/// Appends `events` inside `tx` at consecutive positions, each at its
/// stream's next version, and returns the first position; the one place
/// that takes positions (under the `event_head` row lock, held until
/// commit; see the module doc). Code that writes in its own transaction
/// instead of the batched writer (a voting round) calls this too.
pub async fn append_events(
    tx: &tokio_postgres::Transaction<'_>,
    events: &[NewEvent],
) -> Result<i64, StoreError> {
    Ok(append_all(tx, events, &[]).await?.0)
}

/// Appends `plain` events and the `conditional` appends that pass their
/// check, in that order, under the `event_head` row lock; returns the
/// first position and each conditional append's outcome.
async fn append_all(
    tx: &tokio_postgres::Transaction<'_>,
    plain: &[NewEvent],
    conditional: &[&StreamAppend],
) -> Result<(i64, Vec<AppendOutcome>), StoreError> {
    // Takes the row lock that orders commits by position (see module doc).
    // Without conditional appends the count is known and one statement
    // both locks and advances the head.
    let locked_head: Option<i64> = if conditional.is_empty() {
        None
    } else {
        Some(
            tx.query_one(
                "SELECT position FROM event_head WHERE id = 1 FOR UPDATE",
                &[],
            )
            .await?
            .get(0),
        )
    };
    let plain_first = if conditional.is_empty() {
        let n = plain.len() as i64;
        let head: i64 = tx
            .query_one(
                "UPDATE event_head SET position = position + $1 WHERE id = 1 RETURNING position",
                &[&n],
            )
            .await?
            .get(0);
        Some(head - n + 1)
    } else {
        None
    };
    // Every earlier append has committed now (the lock), and each statement
    // of a READ COMMITTED transaction sees what committed before it began.
    let mut names: Vec<&str> = plain.iter().map(|e| e.stream.as_str()).collect();
    names.extend(conditional.iter().map(|a| a.stream.as_str()));
    names.sort_unstable();
    names.dedup();
    let mut heads: HashMap<String, StreamHead> = HashMap::with_capacity(names.len());
    for row in tx
        .query(
            "SELECT DISTINCT ON (stream) stream, stream_version, event_type FROM events
             WHERE stream = ANY($1) ORDER BY stream, stream_version DESC",
            &[&names],
        )
        .await?
    {
        heads.insert(
            row.get(0),
            StreamHead {
                version: row.get(1),
                deleted: row.get::<_, &str>(2) == super::eventlog::TOMBSTONE_TYPE,
            },
        );
    }
    let wanted: Vec<&[u8]> = conditional
        .iter()
        .flat_map(|a| {
            a.events
                .iter()
                .filter_map(|e| e.event_id.as_ref().map(|id| &id[..]))
        })
        .collect();
    let mut ids: HashMap<[u8; 16], IdAt> = HashMap::new();
    if !wanted.is_empty() {
        for row in tx
            .query(
                "SELECT event_id, position, stream, stream_version FROM events
                 WHERE event_id = ANY($1)",
                &[&wanted],
            )
            .await?
        {
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
    }
    let (rows, decided) = streams::decide_batch(plain, conditional, heads, &ids);
    let n = rows.len() as i64;
    let first = match (plain_first, locked_head) {
        (Some(first), _) => first,
        (None, Some(head)) if n > 0 => {
            tx.execute(
                "UPDATE event_head SET position = $1 WHERE id = 1",
                &[&(head + n)],
            )
            .await?;
            head + 1
        }
        (None, head) => head.unwrap_or(0) + 1,
    };
    insert_rows(tx, first, &rows).await?;
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
                first_position: first + first_position,
                last_position: first + last_position,
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
                first_position: first + first_position,
                last_position: first + last_position,
                version,
            },
            (other, _) => other,
        })
        .collect();
    Ok((first, outcomes))
}

/// Inserts `rows` (event, stream version) at positions from `first` on.
async fn insert_rows(
    tx: &tokio_postgres::Transaction<'_>,
    first: i64,
    rows: &[(NewEvent, i64)],
) -> Result<(), StoreError> {
    const COLUMNS: usize = 9;
    let now_ms = crate::base::clock::now_ms();
    for (chunk_no, chunk) in rows.chunks(EVENTS_PER_INSERT_MAX).enumerate() {
        let mut sql = String::from(
            "INSERT INTO events (position, stream, event_type, payload, created_at_ms, \
             stream_version, event_id, metadata, payload_format) VALUES ",
        );
        let positions: Vec<i64> = (0..chunk.len())
            .map(|i| first + (chunk_no * EVENTS_PER_INSERT_MAX + i) as i64)
            .collect();
        let ids: Vec<Option<&[u8]>> = chunk
            .iter()
            .map(|(e, _)| e.event_id.as_ref().map(|id| &id[..]))
            .collect();
        let mut params: Vec<&(dyn ToSql + Sync)> = Vec::with_capacity(chunk.len() * COLUMNS);
        for (i, (e, version)) in chunk.iter().enumerate() {
            let b = i * COLUMNS;
            if i > 0 {
                sql.push(',');
            }
            sql.push('(');
            for c in 1..=COLUMNS {
                if c > 1 {
                    sql.push(',');
                }
                sql.push('$');
                sql.push_str(&(b + c).to_string());
            }
            sql.push(')');
            params.push(&positions[i]);
            params.push(&e.stream);
            params.push(&e.event_type);
            params.push(&e.payload);
            params.push(&now_ms);
            params.push(version);
            params.push(&ids[i]);
            params.push(&e.metadata);
            params.push(&e.format);
        }
        tx.execute(sql.as_str(), &params).await?;
    }
    Ok(())
}
