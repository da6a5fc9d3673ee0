//! The one way code above the store runs SQL, on either database.
//!
//! A storage operation is written once: statements as [`Sql`] (SQLite's
//! `?N` placeholders, the PostgreSQL form derived once, or both given where
//! the dialects differ), parameters as [`Param`]s (typed once, converted to
//! each driver's types, integers to the width a PostgreSQL column takes),
//! rows read through [`Row`] (a [`Columns`]), and the whole operation an
//! `async` block over a [`Conn`] (reads) or a [`Tx`] (a command of the
//! writer's batch: statements, events appended in its transaction, caches
//! invalidated when it commits).
//!
//! On SQLite every method completes at once (the statement runs on the
//! calling thread, the writer's or a reader's), so the driver runs the
//! operation's future to completion without an executor; on PostgreSQL it
//! awaits the server. An operation awaits nothing but the store: on SQLite
//! anything else fails the operation (see [`run_ready`]).

use std::borrow::Cow;
use std::future::Future;
use std::pin::Pin;
use std::sync::OnceLock;

use super::columns::Columns;
use super::eventlog::NewEvent;
use super::postgres::PgTx;
use super::StoreError;

/// The future of a storage operation, borrowing its connection.
pub type StoreFuture<'a, T> = Pin<Box<dyn Future<Output = Result<T, StoreError>> + Send + 'a>>;

/// A statement, written once.
pub struct Sql {
    sqlite: Cow<'static, str>,
    /// Given where the dialects differ; else derived from `sqlite` once.
    postgres: Option<Cow<'static, str>>,
    derived: OnceLock<String>,
}

impl Sql {
    /// A statement the same in both dialects, with `?N` placeholders.
    pub const fn new(text: &'static str) -> Sql {
        Sql {
            sqlite: Cow::Borrowed(text),
            postgres: None,
            derived: OnceLock::new(),
        }
    }

    /// A statement built at run time (held in a `LazyLock`), the same in
    /// both dialects.
    pub fn owned(text: String) -> Sql {
        Sql {
            sqlite: Cow::Owned(text),
            postgres: None,
            derived: OnceLock::new(),
        }
    }

    /// A statement each dialect writes its own way (PostgreSQL's with `$N`
    /// placeholders).
    pub const fn per_dialect(sqlite: &'static str, postgres: &'static str) -> Sql {
        Sql {
            sqlite: Cow::Borrowed(sqlite),
            postgres: Some(Cow::Borrowed(postgres)),
            derived: OnceLock::new(),
        }
    }

    /// [`Sql::per_dialect`] for statements built at run time.
    pub fn owned_per_dialect(sqlite: String, postgres: String) -> Sql {
        Sql {
            sqlite: Cow::Owned(sqlite),
            postgres: Some(Cow::Owned(postgres)),
            derived: OnceLock::new(),
        }
    }

    pub fn sqlite(&self) -> &str {
        &self.sqlite
    }

    pub fn postgres(&self) -> &str {
        match &self.postgres {
            Some(p) => p,
            None => self
                .derived
                .get_or_init(|| super::pg_placeholders(&self.sqlite)),
        }
    }
}

/// A parameter's value, as both drivers take it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Value<'a> {
    Null,
    /// Bound as the PostgreSQL parameter's width (`SMALLINT`, `INT`,
    /// `BIGINT`), failing the statement if it does not fit.
    Int(i64),
    Real(f64),
    Bool(bool),
    Text(&'a str),
    Bytes(&'a [u8]),
    /// PostgreSQL arrays (`unnest($1::BIGINT[])`); SQLite has none.
    Ints(&'a [i64]),
    Texts(&'a [String]),
    /// PostgreSQL `BYTEA[]`, elements possibly NULL.
    Blobs(&'a [Option<&'a [u8]>]),
}

/// Something bound to a placeholder.
pub trait Param: Sync {
    fn value(&self) -> Value<'_>;
}

macro_rules! int_param {
    ($($t:ty),*) => {$(
        impl Param for $t {
            fn value(&self) -> Value<'_> {
                Value::Int(i64::from(*self))
            }
        }
    )*};
}
int_param!(i8, i16, i32, i64, u8, u16, u32);

impl Param for bool {
    fn value(&self) -> Value<'_> {
        Value::Bool(*self)
    }
}
impl Param for f64 {
    fn value(&self) -> Value<'_> {
        Value::Real(*self)
    }
}
/// `Param` for types that borrow as one `Value` variant.
macro_rules! borrowed_param {
    ($($variant:ident: $($t:ty),*;)*) => {$($(
        impl Param for $t {
            fn value(&self) -> Value<'_> {
                Value::$variant(self)
            }
        }
    )*)*};
}
borrowed_param! {
    Text: str, String;
    Bytes: [u8], Vec<u8>;
    Ints: [i64], Vec<i64>;
    Texts: [String], Vec<String>;
    Blobs: [Option<&[u8]>], Vec<Option<&[u8]>>;
}
impl<const N: usize> Param for [u8; N] {
    fn value(&self) -> Value<'_> {
        Value::Bytes(self)
    }
}
impl<T: Param + ?Sized> Param for &T {
    fn value(&self) -> Value<'_> {
        (**self).value()
    }
}
impl<T: Param> Param for Option<T> {
    fn value(&self) -> Value<'_> {
        match self {
            Some(v) => v.value(),
            None => Value::Null,
        }
    }
}
impl Param for Value<'_> {
    fn value(&self) -> Value<'_> {
        *self
    }
}

impl rusqlite::ToSql for Value<'_> {
    fn to_sql(&self) -> rusqlite::Result<rusqlite::types::ToSqlOutput<'_>> {
        use rusqlite::types::{ToSqlOutput, ValueRef};
        Ok(ToSqlOutput::Borrowed(match *self {
            Value::Null => ValueRef::Null,
            Value::Int(i) => ValueRef::Integer(i),
            Value::Real(f) => ValueRef::Real(f),
            Value::Bool(b) => ValueRef::Integer(i64::from(b)),
            Value::Text(s) => ValueRef::Text(s.as_bytes()),
            Value::Bytes(b) => ValueRef::Blob(b),
            Value::Ints(_) | Value::Texts(_) | Value::Blobs(_) => {
                return Err(rusqlite::Error::ToSqlConversionFailure(
                    "SQLite has no array parameters".into(),
                ))
            }
        }))
    }
}

impl tokio_postgres::types::ToSql for Value<'_> {
    fn to_sql(
        &self,
        ty: &tokio_postgres::types::Type,
        out: &mut bytes::BytesMut,
    ) -> Result<tokio_postgres::types::IsNull, Box<dyn std::error::Error + Sync + Send>> {
        use tokio_postgres::types::{IsNull, Type};
        match *self {
            Value::Null => Ok(IsNull::Yes),
            Value::Int(i) => match *ty {
                Type::INT2 => i16::try_from(i)?.to_sql(ty, out),
                Type::INT4 => i32::try_from(i)?.to_sql(ty, out),
                Type::FLOAT8 => (i as f64).to_sql(ty, out),
                _ => i.to_sql(ty, out),
            },
            Value::Real(f) => match *ty {
                Type::FLOAT4 => (f as f32).to_sql(ty, out),
                _ => f.to_sql(ty, out),
            },
            Value::Bool(b) => b.to_sql(ty, out),
            Value::Text(s) => match *ty {
                Type::JSON => {
                    out.extend_from_slice(s.as_bytes());
                    Ok(IsNull::No)
                }
                Type::JSONB => {
                    out.extend_from_slice(&[1]);
                    out.extend_from_slice(s.as_bytes());
                    Ok(IsNull::No)
                }
                _ => s.to_sql(ty, out),
            },
            Value::Bytes(b) => b.to_sql(ty, out),
            Value::Ints(v) => match *ty {
                Type::INT4_ARRAY => v
                    .iter()
                    .map(|&i| i32::try_from(i))
                    .collect::<Result<Vec<i32>, _>>()?
                    .to_sql(ty, out),
                Type::INT2_ARRAY => v
                    .iter()
                    .map(|&i| i16::try_from(i))
                    .collect::<Result<Vec<i16>, _>>()?
                    .to_sql(ty, out),
                _ => v.to_sql(ty, out),
            },
            Value::Texts(v) => v.to_sql(ty, out),
            Value::Blobs(v) => v.to_sql(ty, out),
        }
    }

    /// Every type: `to_sql` converts to the parameter's or fails.
    fn accepts(_ty: &tokio_postgres::types::Type) -> bool {
        true
    }

    tokio_postgres::types::to_sql_checked!();
}

/// One row of an answer, read through [`Columns`].
pub struct Row<'a>(RowInner<'a>);

enum RowInner<'a> {
    Sqlite(&'a rusqlite::Row<'a>),
    Postgres(&'a tokio_postgres::Row),
}

impl Columns for Row<'_> {
    fn col<T>(&self, i: usize) -> Result<T, StoreError>
    where
        T: rusqlite::types::FromSql + tokio_postgres::types::FromSqlOwned,
    {
        match &self.0 {
            RowInner::Sqlite(r) => r.col(i),
            RowInner::Postgres(r) => r.col(i),
        }
    }

    fn opt_int(&self, i: usize) -> Result<Option<i64>, StoreError> {
        match &self.0 {
            RowInner::Sqlite(r) => r.opt_int(i),
            RowInner::Postgres(r) => r.opt_int(i),
        }
    }
}

impl Row<'_> {
    /// A blob column's bytes, borrowed from the driver's row: a payload
    /// decoded in place, without a `Vec` per row.
    pub fn blob_bytes(&self, i: usize) -> Result<&[u8], StoreError> {
        let e = |e: &dyn std::fmt::Display| StoreError::Internal(format!("column {i}: {e}"));
        match &self.0 {
            RowInner::Sqlite(r) => r.get_ref(i)?.as_blob().map_err(|x| e(&x)),
            RowInner::Postgres(r) => r.try_get::<_, &[u8]>(i).map_err(|x| e(&x)),
        }
    }

    /// A text column's bytes, borrowed from the driver's row: text passed
    /// on as it is (JSON the database built) without a `String` per row.
    pub fn text_bytes(&self, i: usize) -> Result<&[u8], StoreError> {
        let e = |e: &dyn std::fmt::Display| StoreError::Internal(format!("column {i}: {e}"));
        match &self.0 {
            RowInner::Sqlite(r) => r.get_ref(i)?.as_bytes().map_err(|x| e(&x)),
            RowInner::Postgres(r) => r
                .try_get::<_, &str>(i)
                .map(str::as_bytes)
                .map_err(|x| e(&x)),
        }
    }
}

/// A connection to run statements on: a read connection, or the writer's
/// transaction (through [`Tx`]).
pub struct Conn<'a>(ConnInner<'a>);

/// An SQLite connection, usable only on the thread that made the [`Conn`]
/// (the writer's or a reader's, where the operation's future is run to
/// completion at once): it lets the operation's future be `Send`, as
/// PostgreSQL's must be, while SQLite's connection is not `Sync`.
type Local<'a> = send_wrapper::SendWrapper<&'a rusqlite::Connection>;

enum ConnInner<'a> {
    Sqlite(Local<'a>),
    PgTx(&'a deadpool_postgres::Transaction<'a>),
    /// A pooled connection, with its store for the log's horizon.
    PgClient(&'a deadpool_postgres::Client, &'a super::postgres::PgStore),
}

/// The parameters as PostgreSQL's driver takes them.
fn pg_values<'p>(params: &'p [&'p dyn Param]) -> Vec<Value<'p>> {
    params.iter().map(|p| p.value()).collect()
}

fn pg_refs<'v>(values: &'v [Value<'v>]) -> Vec<&'v (dyn tokio_postgres::types::ToSql + Sync)> {
    values
        .iter()
        .map(|v| v as &(dyn tokio_postgres::types::ToSql + Sync))
        .collect()
}

impl<'a> Conn<'a> {
    pub(crate) fn sqlite(conn: &'a rusqlite::Connection) -> Conn<'a> {
        Conn(ConnInner::Sqlite(send_wrapper::SendWrapper::new(conn)))
    }

    pub(crate) fn pg_client(
        client: &'a deadpool_postgres::Client,
        store: &'a super::postgres::PgStore,
    ) -> Conn<'a> {
        Conn(ConnInner::PgClient(client, store))
    }

    pub(crate) fn pg_tx(tx: &'a deadpool_postgres::Transaction<'a>) -> Conn<'a> {
        Conn(ConnInner::PgTx(tx))
    }

    /// Which database this is, for logs and reports only: a storage
    /// operation that needs a different design per database asks its
    /// store for the named strategy instead.
    pub fn dialect(&self) -> &'static str {
        match &self.0 {
            ConnInner::Sqlite(_) => "sqlite",
            _ => "postgres",
        }
    }

    /// How far the event log may be read: no event can still appear at a
    /// position up to it. SQLite: the last committed position (one writer
    /// commits positions in order). PostgreSQL: the horizon (positions
    /// commit out of order; see `horizon.rs`), read on a read connection
    /// only.
    pub async fn log_end(&self) -> Result<i64, StoreError> {
        static LAST: Sql = Sql::new("SELECT COALESCE(MAX(position), 0) FROM events");
        match &self.0 {
            ConnInner::Sqlite(_) => self.query_one(&LAST, &[], |r| r.int(0)).await,
            ConnInner::PgClient(c, store) => store.horizon(c).await,
            ConnInner::PgTx(_) => Err(StoreError::Internal(
                "the event log's end is read on a read connection".into(),
            )),
        }
    }

    /// Runs a statement; the rows it changed.
    pub async fn execute(&self, sql: &Sql, params: &[&dyn Param]) -> Result<u64, StoreError> {
        match &self.0 {
            ConnInner::Sqlite(c) => {
                let values: Vec<Value<'_>> = params.iter().map(|p| p.value()).collect();
                let n = c
                    .prepare_cached(sql.sqlite())?
                    .execute(rusqlite::params_from_iter(values.iter()))?;
                Ok(n as u64)
            }
            ConnInner::PgTx(t) => {
                let stmt = t.prepare_cached(sql.postgres()).await?;
                let values = pg_values(params);
                Ok(t.execute(&stmt, &pg_refs(&values)).await?)
            }
            ConnInner::PgClient(c, _) => {
                let stmt = c.prepare_cached(sql.postgres()).await?;
                let values = pg_values(params);
                Ok(c.execute(&stmt, &pg_refs(&values)).await?)
            }
        }
    }

    /// Runs an `INSERT` of at most one row into a table keyed by an integer
    /// id; the id it got, `None` when it inserted nothing (`ON CONFLICT DO
    /// NOTHING`). PostgreSQL's text answers the id (`RETURNING id`);
    /// SQLite's has no `RETURNING` and the id is the connection's
    /// `last_insert_rowid()`: SQLite's `RETURNING` collects the rows in an
    /// ephemeral table per run, 13.3 us an insert against 7.4 us without
    /// (200,000 one-row inserts with two indexes, release build).
    pub async fn insert_id(
        &self,
        sql: &Sql,
        params: &[&dyn Param],
    ) -> Result<Option<i64>, StoreError> {
        match &self.0 {
            ConnInner::Sqlite(c) => {
                let values: Vec<Value<'_>> = params.iter().map(|p| p.value()).collect();
                let n = c
                    .prepare_cached(sql.sqlite())?
                    .execute(rusqlite::params_from_iter(values.iter()))?;
                Ok((n > 0).then(|| c.last_insert_rowid()))
            }
            _ => match self.pg_rows(sql, params).await?.first() {
                Some(r) => Ok(Some(r.int(0)?)),
                None => Ok(None),
            },
        }
    }

    /// Runs statements without parameters or answers, separated by `;`
    /// (schema changes, a test's setup).
    pub async fn batch(&self, sql: &Sql) -> Result<(), StoreError> {
        match &self.0 {
            ConnInner::Sqlite(c) => Ok(c.execute_batch(sql.sqlite())?),
            ConnInner::PgTx(t) => Ok(t.batch_execute(sql.postgres()).await?),
            ConnInner::PgClient(c, _) => Ok(c.batch_execute(sql.postgres()).await?),
        }
    }

    /// Every row the statement answers, each mapped by `map`.
    pub async fn query<T>(
        &self,
        sql: &Sql,
        params: &[&dyn Param],
        mut map: impl FnMut(&Row<'_>) -> Result<T, StoreError>,
    ) -> Result<Vec<T>, StoreError> {
        match &self.0 {
            ConnInner::Sqlite(c) => {
                let values: Vec<Value<'_>> = params.iter().map(|p| p.value()).collect();
                let mut stmt = c.prepare_cached(sql.sqlite())?;
                let mut rows = stmt.query(rusqlite::params_from_iter(values.iter()))?;
                let mut out = Vec::new();
                while let Some(r) = rows.next()? {
                    out.push(map(&Row(RowInner::Sqlite(r)))?);
                }
                Ok(out)
            }
            _ => self
                .pg_rows(sql, params)
                .await?
                .iter()
                .map(|r| map(&Row(RowInner::Postgres(r))))
                .collect(),
        }
    }

    /// The statement's first row mapped by `map`, if it answers one.
    pub async fn query_opt<T>(
        &self,
        sql: &Sql,
        params: &[&dyn Param],
        map: impl FnOnce(&Row<'_>) -> Result<T, StoreError>,
    ) -> Result<Option<T>, StoreError> {
        match &self.0 {
            ConnInner::Sqlite(c) => {
                let values: Vec<Value<'_>> = params.iter().map(|p| p.value()).collect();
                let mut stmt = c.prepare_cached(sql.sqlite())?;
                let mut rows = stmt.query(rusqlite::params_from_iter(values.iter()))?;
                match rows.next()? {
                    Some(r) => map(&Row(RowInner::Sqlite(r))).map(Some),
                    None => Ok(None),
                }
            }
            _ => match self.pg_rows(sql, params).await?.first() {
                Some(r) => map(&Row(RowInner::Postgres(r))).map(Some),
                None => Ok(None),
            },
        }
    }

    /// The statement's first row mapped by `map`; no row is an error.
    pub async fn query_one<T>(
        &self,
        sql: &Sql,
        params: &[&dyn Param],
        map: impl FnOnce(&Row<'_>) -> Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        self.query_opt(sql, params, map).await?.ok_or_else(|| {
            StoreError::Internal(format!("no row answered: {}", first_line(sql.sqlite())))
        })
    }

    /// Every row the statement answers, handed to `each` as it is read and
    /// never all held at once: a scan of millions of rows (an index loaded
    /// at start) keeps one row in memory, not the answer.
    pub async fn for_each(
        &self,
        sql: &Sql,
        params: &[&dyn Param],
        mut each: impl FnMut(&Row<'_>) -> Result<(), StoreError> + Send,
    ) -> Result<(), StoreError> {
        use futures::TryStreamExt;
        let stream = match &self.0 {
            ConnInner::Sqlite(c) => {
                let values: Vec<Value<'_>> = params.iter().map(|p| p.value()).collect();
                let mut stmt = c.prepare_cached(sql.sqlite())?;
                let mut rows = stmt.query(rusqlite::params_from_iter(values.iter()))?;
                while let Some(r) = rows.next()? {
                    each(&Row(RowInner::Sqlite(r)))?;
                }
                return Ok(());
            }
            ConnInner::PgTx(t) => {
                let stmt = t.prepare_cached(sql.postgres()).await?;
                t.query_raw(&stmt, pg_values(params)).await?
            }
            ConnInner::PgClient(c, _) => {
                let stmt = c.prepare_cached(sql.postgres()).await?;
                c.query_raw(&stmt, pg_values(params)).await?
            }
        };
        futures::pin_mut!(stream);
        while let Some(r) = stream.try_next().await? {
            each(&Row(RowInner::Postgres(&r)))?;
        }
        Ok(())
    }

    async fn pg_rows(
        &self,
        sql: &Sql,
        params: &[&dyn Param],
    ) -> Result<Vec<tokio_postgres::Row>, StoreError> {
        let values = pg_values(params);
        let refs = pg_refs(&values);
        Ok(match &self.0 {
            ConnInner::PgTx(t) => {
                let stmt = t.prepare_cached(sql.postgres()).await?;
                t.query(&stmt, &refs).await?
            }
            ConnInner::PgClient(c, _) => {
                let stmt = c.prepare_cached(sql.postgres()).await?;
                c.query(&stmt, &refs).await?
            }
            ConnInner::Sqlite(_) => unreachable!("SQLite rows are read in place"),
        })
    }
}

fn first_line(sql: &str) -> &str {
    sql.trim().lines().next().unwrap_or("")
}

/// A write command's view of the writer's batch: its statements run in the
/// batch's transaction (through `Deref` to [`Conn`]); what it appends and
/// invalidates commits with it.
pub struct Tx<'a> {
    conn: Conn<'a>,
    outbox: Outbox<'a>,
}

enum Outbox<'a> {
    /// SQLite's single writer appends at once, at the next position.
    Sqlite(Local<'a>),
    /// PostgreSQL positions a batch's events when it commits.
    Postgres(&'a PgTx<'a>),
    /// A PostgreSQL transaction of its own ([`super::Store::write_apart`]).
    PgApart(Apart<'a>),
}

/// What a PostgreSQL transaction of its own appends and invalidates: sent
/// when it commits ([`Tx::finish_apart`]), or, for events whose positions
/// the command needs, at once ([`Tx::append_positioned`]).
struct Apart<'a> {
    tx: &'a deadpool_postgres::Transaction<'a>,
    events: std::sync::Mutex<Vec<NewEvent>>,
    invalidated: std::sync::Mutex<Vec<String>>,
}

impl<'a> Tx<'a> {
    pub(crate) fn sqlite(conn: &'a rusqlite::Connection) -> Tx<'a> {
        Tx {
            conn: Conn::sqlite(conn),
            outbox: Outbox::Sqlite(send_wrapper::SendWrapper::new(conn)),
        }
    }

    pub(crate) fn postgres(tx: &'a PgTx<'a>) -> Tx<'a> {
        Tx {
            conn: Conn::pg_tx(tx.tx),
            outbox: Outbox::Postgres(tx),
        }
    }

    pub(crate) fn pg_apart(tx: &'a deadpool_postgres::Transaction<'a>) -> Tx<'a> {
        Tx {
            conn: Conn::pg_tx(tx),
            outbox: Outbox::PgApart(Apart {
                tx,
                events: Default::default(),
                invalidated: Default::default(),
            }),
        }
    }

    /// Sends what a transaction of its own appended and invalidated, before
    /// its commit.
    pub(crate) async fn finish_apart(&self) -> Result<(), StoreError> {
        if let Outbox::PgApart(a) = &self.outbox {
            let events = std::mem::take(&mut *a.events.lock().unwrap());
            if !events.is_empty() {
                super::postgres::append_events(a.tx, &events).await?;
            }
            let keys = std::mem::take(&mut *a.invalidated.lock().unwrap());
            super::postgres::notify_invalidated(a.tx, keys).await?;
        }
        Ok(())
    }

    /// The writer's batch this command runs in, where one process makes
    /// every write (SQLite): a number that grows with every batch and across
    /// restarts, the same for every command of one batch. A table keyed by
    /// it first takes each batch's rows at its end, a few pages per commit
    /// however random the rest of the key; its rows then show which rows
    /// committed together, as the WAL's frames do, and nothing finer. None
    /// where writers are shared.
    pub fn writer_batch(&self) -> Option<i64> {
        match &self.outbox {
            Outbox::Sqlite(_) => Some(super::sqlite::writer_batch()),
            Outbox::Postgres(_) | Outbox::PgApart(_) => None,
        }
    }

    /// Appends an event that commits with this command.
    pub fn append(&self, event: NewEvent) -> Result<(), StoreError> {
        match &self.outbox {
            Outbox::Sqlite(c) => super::eventlog::sqlite_append(c, &event).map(|_| ()),
            Outbox::Postgres(t) => {
                t.append(event);
                Ok(())
            }
            Outbox::PgApart(a) => {
                a.events.lock().unwrap().push(event);
                Ok(())
            }
        }
    }

    /// Appends `events`, in order, and answers their positions, for a
    /// command that stores them beside its own rows: in SQLite's writer and
    /// in a transaction of its own ([`super::Store::write_apart`]). A
    /// command of PostgreSQL's batched writer cannot: its batch positions
    /// events when it commits.
    pub async fn append_positioned(&self, events: &[NewEvent]) -> Result<Vec<i64>, StoreError> {
        match &self.outbox {
            Outbox::Sqlite(c) => events
                .iter()
                .map(|e| super::eventlog::sqlite_append(c, e))
                .collect(),
            Outbox::Postgres(_) => Err(StoreError::Internal(
                "a batched command's events are positioned when its batch commits; \
                 write it apart (Store::write_apart)"
                    .into(),
            )),
            Outbox::PgApart(a) => {
                let earlier = std::mem::take(&mut *a.events.lock().unwrap());
                if !earlier.is_empty() {
                    super::postgres::append_events(a.tx, &earlier).await?;
                }
                super::postgres::append_events(a.tx, events).await
            }
        }
    }

    /// Appends the first event of a stream this command named and nobody
    /// can have appended to (see `PgTx::append_opening`).
    pub fn append_opening(&self, event: NewEvent) -> Result<(), StoreError> {
        match &self.outbox {
            Outbox::Sqlite(c) => super::eventlog::sqlite_append(c, &event).map(|_| ()),
            Outbox::Postgres(t) => {
                t.append_opening(event);
                Ok(())
            }
            Outbox::PgApart(a) => {
                a.events.lock().unwrap().push(event);
                Ok(())
            }
        }
    }

    /// Tells every node's caches that what `key` names changed, once this
    /// command commits. Where one process makes every write (SQLite) the
    /// service's own cache already knows, so nothing is sent.
    pub fn invalidate(&self, key: String) {
        match &self.outbox {
            Outbox::Sqlite(_) => {}
            Outbox::Postgres(t) => t.invalidate(key),
            Outbox::PgApart(a) => a.invalidated.lock().unwrap().push(key),
        }
    }
}

impl<'a> std::ops::Deref for Tx<'a> {
    type Target = Conn<'a>;
    fn deref(&self) -> &Conn<'a> {
        &self.conn
    }
}

/// A kind of write command that runs together with the others of its kind
/// in a batch where writers are shared, as set-based statements (one
/// statement for N commands: on PostgreSQL a statement's own cost, its
/// protocol, executor start and round of locks, is more than a row's). See
/// [`super::Store::write_grouped`].
pub trait Group: Send + Sync + 'static {
    type Item: Send + Sync + 'static;
    type Out: Send + 'static;
    /// Runs `items` (in arrival order) in the batch's transaction and
    /// returns one outcome per item, in the same order. `Err` only when the
    /// database failed (the batch is then retried command by command, so a
    /// group may also run with one item).
    fn run<'a>(tx: &'a Tx<'a>, items: Vec<&'a Self::Item>) -> StoreFuture<'a, Vec<Self::Out>>;
}

/// Runs an operation's future on SQLite, where every statement completes at
/// once: it must be ready when first polled. One that awaits anything else
/// (a timer, a channel) would block the writer, so it fails instead.
pub(crate) fn run_ready<T>(
    fut: impl Future<Output = Result<T, StoreError>>,
) -> Result<T, StoreError> {
    use futures::FutureExt;
    fut.now_or_never().unwrap_or_else(|| {
        Err(StoreError::Internal(
            "a storage operation awaited something other than the store".into(),
        ))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statements_take_each_dialects_placeholders() {
        static S: Sql = Sql::new("SELECT a FROM t WHERE b = ?1 AND c = ?12");
        assert_eq!(S.sqlite(), "SELECT a FROM t WHERE b = ?1 AND c = ?12");
        assert_eq!(S.postgres(), "SELECT a FROM t WHERE b = $1 AND c = $12");
        static P: Sql = Sql::per_dialect("SELECT 1", "SELECT 2");
        assert_eq!((P.sqlite(), P.postgres()), ("SELECT 1", "SELECT 2"));
    }

    #[test]
    fn sqlite_binds_and_reads_every_value() {
        let c = rusqlite::Connection::open_in_memory().unwrap();
        c.execute_batch("CREATE TABLE t (i INTEGER, s TEXT, b BLOB, n INTEGER, f REAL)")
            .unwrap();
        let conn = Conn::sqlite(&c);
        static INSERT: Sql = Sql::new("INSERT INTO t VALUES (?1, ?2, ?3, ?4, ?5)");
        let none: Option<i64> = None;
        let n = run_ready(conn.execute(&INSERT, &[&7i32, &"x", &vec![1u8, 2], &none, &1.5f64]))
            .unwrap();
        assert_eq!(n, 1);
        static READ: Sql = Sql::new("SELECT i, s, b, n, f FROM t WHERE i = ?1");
        let row = run_ready(conn.query_one(&READ, &[&7i64], |r| {
            Ok((
                r.int(0)?,
                r.text(1)?,
                r.bytes(2)?,
                r.opt_int(3)?,
                r.col::<f64>(4)?,
            ))
        }))
        .unwrap();
        assert_eq!(row, (7, "x".to_string(), vec![1, 2], None, 1.5));
        let missing = run_ready(conn.query_opt(&READ, &[&8i64], |r| r.int(0))).unwrap();
        assert_eq!(missing, None);
        assert!(run_ready(conn.execute(&INSERT, &[&vec![1i64], &"", &"", &1, &1.0])).is_err());
    }

    #[test]
    fn sqlite_inserts_answer_their_id_or_none() {
        let c = rusqlite::Connection::open_in_memory().unwrap();
        c.execute_batch("CREATE TABLE t (id INTEGER PRIMARY KEY, k TEXT UNIQUE)")
            .unwrap();
        let conn = Conn::sqlite(&c);
        static INSERT: Sql = Sql::per_dialect(
            "INSERT INTO t (k) VALUES (?1) ON CONFLICT (k) DO NOTHING",
            "INSERT INTO t (k) VALUES ($1) ON CONFLICT (k) DO NOTHING RETURNING id",
        );
        assert_eq!(
            run_ready(conn.insert_id(&INSERT, &[&"a"])).unwrap(),
            Some(1)
        );
        assert_eq!(
            run_ready(conn.insert_id(&INSERT, &[&"b"])).unwrap(),
            Some(2)
        );
        assert_eq!(run_ready(conn.insert_id(&INSERT, &[&"a"])).unwrap(), None);
    }
}
