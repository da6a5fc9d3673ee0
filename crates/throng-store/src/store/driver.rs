//! The one place that knows which database a [`Store`] is: runs the seam's
//! operations on the SQLite or the PostgreSQL driver, and the event log's
//! reads, which differ by how each numbers its events (SQLite's gapless
//! positions; PostgreSQL's read up to the horizon).

use std::sync::Arc;

use super::postgres::{PgFuture, PgGroup, PgStore, PgTx};
use super::seam::{run_ready, Conn, Group, StoreFuture, Tx};
use super::sqlite::SqliteStore;
use super::{
    migrate, streams, NewEvent, ReadKind, Store, StoreError, StoreLimits, StoreUrl, WriteKind,
    Writers,
};

#[derive(Clone)]
pub(super) enum Driver {
    Sqlite(Arc<SqliteStore>),
    Postgres(Arc<PgStore>),
}

impl Driver {
    pub(super) async fn open(
        url: &StoreUrl,
        limits: &StoreLimits,
        services: &[&'static migrate::MigrationSet],
    ) -> anyhow::Result<Driver> {
        Ok(match url {
            StoreUrl::Sqlite(path) => Driver::Sqlite(SqliteStore::open(path, limits, services)?),
            StoreUrl::Postgres(url) => {
                Driver::Postgres(PgStore::open(url, limits, services).await?)
            }
        })
    }

    pub(super) fn dialect(&self) -> &'static str {
        match self {
            Driver::Sqlite(_) => "sqlite",
            Driver::Postgres(_) => "postgres",
        }
    }

    pub(super) fn writers(&self) -> Writers {
        match self {
            Driver::Sqlite(_) => Writers::OneProcess,
            Driver::Postgres(_) => Writers::Shared,
        }
    }

    pub(super) async fn write<T, F>(&self, f: F, kind: WriteKind) -> Result<T, StoreError>
    where
        T: Send + 'static,
        F: for<'a> Fn(&'a Tx<'a>) -> StoreFuture<'a, T> + Send + Sync + 'static,
    {
        match self {
            Driver::Sqlite(s) => {
                let job = move |c: &rusqlite::Connection| {
                    let tx = Tx::sqlite(c);
                    run_ready(f(&tx))
                };
                match kind {
                    WriteKind::Guarded => s.write(job).await,
                    WriteKind::Unguarded => s.write_unguarded(job).await,
                    WriteKind::Erasing => s.write_erasing(job).await,
                }
            }
            Driver::Postgres(p) => {
                let f = Arc::new(f);
                p.write(move |ptx| {
                    let f = f.clone();
                    Box::pin(async move {
                        let tx = Tx::postgres(ptx);
                        f(&tx).await
                    })
                })
                .await
            }
        }
    }

    pub(super) async fn write_apart<T, F>(&self, f: F) -> Result<T, StoreError>
    where
        T: Send + 'static,
        F: for<'a> Fn(&'a Tx<'a>) -> StoreFuture<'a, T> + Send + Sync + 'static,
    {
        match self {
            Driver::Sqlite(_) => self.write(f, WriteKind::Guarded).await,
            Driver::Postgres(p) => {
                let mut client = p.client().await?;
                let tx = client.transaction().await?;
                let out = {
                    let apart = Tx::pg_apart(&tx);
                    let out = f(&apart).await?;
                    apart.finish_apart().await?;
                    out
                };
                tx.commit().await?;
                Ok(out)
            }
        }
    }

    pub(super) async fn write_alone<T, F>(&self, f: F) -> Result<T, StoreError>
    where
        T: Send + 'static,
        F: for<'a> FnOnce(&'a Conn<'a>) -> StoreFuture<'a, T> + Send + 'static,
    {
        match self {
            Driver::Sqlite(s) => {
                s.write_alone(move |c| {
                    let conn = Conn::sqlite(c);
                    run_ready(f(&conn))
                })
                .await
            }
            Driver::Postgres(p) => {
                let mut client = p.client().await?;
                let tx = client.transaction().await?;
                let out = {
                    let conn = Conn::pg_tx(&tx);
                    f(&conn).await?
                };
                tx.commit().await?;
                Ok(out)
            }
        }
    }

    pub(super) async fn write_grouped<G: Group>(
        &self,
        item: G::Item,
    ) -> Result<G::Out, StoreError> {
        match self {
            Driver::Sqlite(s) => {
                s.write(move |c| {
                    let tx = Tx::sqlite(c);
                    let mut outs = run_ready(G::run(&tx, vec![&item]))?;
                    match (outs.pop(), outs.is_empty()) {
                        (Some(out), true) => Ok(out),
                        _ => Err(StoreError::Internal(
                            "a command group answered other than one outcome for one command"
                                .into(),
                        )),
                    }
                })
                .await
            }
            Driver::Postgres(p) => p.write_grouped::<PgGrouped<G>>(item).await,
        }
    }

    pub(super) async fn bulk_load(
        &self,
        tables: &'static [&'static super::bulk::BulkTable],
        replaced: super::bulk::Replaced,
    ) -> anyhow::Result<super::bulk::BulkLoad> {
        match self {
            Driver::Sqlite(s) => super::bulk::BulkLoad::sqlite(s.path(), tables, replaced),
            Driver::Postgres(p) => {
                super::bulk::BulkLoad::postgres(p.client().await?, tables, replaced).await
            }
        }
    }

    pub(super) async fn read<T, F>(&self, f: F, kind: ReadKind) -> Result<T, StoreError>
    where
        T: Send + 'static,
        F: for<'a> FnOnce(&'a Conn<'a>) -> StoreFuture<'a, T> + Send + 'static,
    {
        match self {
            Driver::Sqlite(s) => {
                let job = move |c: &rusqlite::Connection| {
                    let conn = Conn::sqlite(c);
                    run_ready(f(&conn))
                };
                match kind {
                    ReadKind::Inline => s.read(job).await,
                    ReadKind::Blocking => s.read_blocking(job).await,
                    ReadKind::Paged => s.read_paged(job).await,
                    ReadKind::Scan => s.read_scan(job).await,
                }
            }
            Driver::Postgres(p) => {
                let client = p.client().await?;
                let conn = Conn::pg_client(&client, p);
                f(&conn).await
            }
        }
    }
}

/// Connections of their own to the store's database, outside the writer
/// and its batches, on which each statement commits alone (autocommit):
/// for the benches' comparison designs, which measure a way of writing the
/// store itself does not use. Unlike [`Store::write_alone`] no transaction
/// is begun, so a statement is one round trip to PostgreSQL, on a pool of
/// the size asked. Opened on first use: SQLite one connection (it has one
/// writer), behind a lock, run off the async workers.
pub struct Autocommit(AutocommitInner);

enum AutocommitInner {
    Sqlite {
        path: std::path::PathBuf,
        conn: Arc<std::sync::Mutex<Option<rusqlite::Connection>>>,
    },
    Postgres {
        store: Arc<PgStore>,
        connections: usize,
        pool: tokio::sync::OnceCell<deadpool_postgres::Pool>,
    },
}

/// The page cache of an autocommit connection to SQLite, in KiB.
const AUTOCOMMIT_SQLITE_CACHE_KIB: i64 = 4 * 1024;

impl Autocommit {
    /// Runs `f` on one of the connections.
    pub async fn run<T, F>(&self, f: F) -> Result<T, StoreError>
    where
        T: Send + 'static,
        F: for<'a> FnOnce(&'a Conn<'a>) -> StoreFuture<'a, T> + Send + 'static,
    {
        match &self.0 {
            AutocommitInner::Sqlite { path, conn } => {
                let (path, conn) = (path.clone(), conn.clone());
                tokio::task::spawn_blocking(move || {
                    let mut guard = conn.lock().unwrap_or_else(|e| e.into_inner());
                    if guard.is_none() {
                        let c = super::sqlite::open_connection(
                            &path,
                            AUTOCOMMIT_SQLITE_CACHE_KIB,
                            false,
                        )
                        .map_err(|e| StoreError::Unavailable(e.to_string()))?;
                        *guard = Some(c);
                    }
                    let conn = Conn::sqlite(guard.as_ref().expect("opened above"));
                    run_ready(f(&conn))
                })
                .await
                .map_err(|e| StoreError::Internal(format!("an autocommit task: {e}")))?
            }
            AutocommitInner::Postgres {
                store,
                connections,
                pool,
            } => {
                let pool = pool
                    .get_or_try_init(|| async { store.pool_of(*connections) })
                    .await
                    .map_err(|e| StoreError::Unavailable(e.to_string()))?;
                let client = pool.get().await?;
                let conn = Conn::pg_client(&client, store);
                f(&conn).await
            }
        }
    }
}

/// A seam [`Group`] as the PostgreSQL writer runs groups.
struct PgGrouped<G>(std::marker::PhantomData<G>);

impl<G: Group> PgGroup for PgGrouped<G> {
    type Item = G::Item;
    type Out = G::Out;
    fn run<'a>(tx: &'a PgTx<'a>, items: Vec<&'a G::Item>) -> PgFuture<'a, Vec<G::Out>> {
        Box::pin(async move {
            let tx = Tx::postgres(tx);
            G::run(&tx, items).await
        })
    }
}

impl Store {
    /// The SQLite driver, when this store is one: for what reads its files
    /// directly (a test playing an attacker with a copy of them, a seed that
    /// loads in bulk on a connection of its own).
    pub fn sqlite(&self) -> Option<&Arc<SqliteStore>> {
        match &self.driver {
            Driver::Sqlite(s) => Some(s),
            Driver::Postgres(_) => None,
        }
    }

    /// The PostgreSQL driver, when this store is one (see [`Store::sqlite`]).
    pub fn postgres(&self) -> Option<&Arc<PgStore>> {
        match &self.driver {
            Driver::Sqlite(_) => None,
            Driver::Postgres(p) => Some(p),
        }
    }

    /// Up to `connections` connections of their own, each statement its
    /// own transaction (see [`Autocommit`]).
    pub fn autocommit(&self, connections: usize) -> Autocommit {
        Autocommit(match &self.driver {
            Driver::Sqlite(s) => AutocommitInner::Sqlite {
                path: s.path().to_path_buf(),
                conn: Arc::default(),
            },
            Driver::Postgres(p) => AutocommitInner::Postgres {
                store: p.clone(),
                connections,
                pool: tokio::sync::OnceCell::new(),
            },
        })
    }

    /// Other nodes' writes, as the invalidation channel hears them: where
    /// writers are shared (PostgreSQL); `None` where every write is this
    /// process's own.
    pub fn invalidations(&self) -> Option<&super::invalidate::Invalidations> {
        match &self.driver {
            Driver::Sqlite(_) => None,
            Driver::Postgres(p) => Some(p.invalidations()),
        }
    }

    /// Appends to a stream if it is as `append.expected` says (decided in
    /// the writer's batch, see `streams`).
    pub async fn append_to_stream(
        &self,
        append: streams::StreamAppend,
    ) -> Result<streams::AppendOutcome, StoreError> {
        match &self.driver {
            Driver::Sqlite(s) => {
                s.write(move |c| streams::sqlite_append_stream(c, &append))
                    .await
            }
            Driver::Postgres(p) => {
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

    /// Appends many events at versions their caller decided, in chunks of
    /// one transaction each, outside the writer (a seed; see
    /// `eventlog::VersionedEvent`); finishes with the log's statistics
    /// (PostgreSQL) or its WAL folded in (SQLite).
    pub async fn append_versioned(
        &self,
        mut chunks: tokio::sync::mpsc::Receiver<Vec<super::eventlog::VersionedEvent>>,
        mut appended: impl FnMut(&[super::eventlog::VersionedEvent]) + Send + 'static,
    ) -> anyhow::Result<()> {
        use super::eventlog::{pg_append_versioned, sqlite_append_versioned};
        match &self.driver {
            Driver::Sqlite(s) => {
                let path = s.path().to_path_buf();
                tokio::task::spawn_blocking(move || -> anyhow::Result<()> {
                    let mut conn = super::sqlite::open_connection(&path, 64 * 1024, false)?;
                    while let Some(chunk) = chunks.blocking_recv() {
                        sqlite_append_versioned(&mut conn, &chunk)?;
                        appended(&chunk);
                    }
                    conn.execute_batch("PRAGMA wal_checkpoint(TRUNCATE);")?;
                    Ok(())
                })
                .await?
            }
            Driver::Postgres(p) => {
                let mut client = p.client().await?;
                while let Some(chunk) = chunks.recv().await {
                    pg_append_versioned(&mut client, &chunk).await?;
                    appended(&chunk);
                }
                client.batch_execute("ANALYZE events").await?;
                Ok(())
            }
        }
    }

    /// Appends one event on its own (a write with no other state change, such
    /// as the summary of a bulk load).
    pub async fn append_event(&self, event: NewEvent) -> Result<(), StoreError> {
        self.write(move |tx| {
            let event = event.clone();
            Box::pin(async move { tx.append(event) })
        })
        .await
    }
}
