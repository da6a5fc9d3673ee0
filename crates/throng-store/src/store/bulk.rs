//! Bulk loading, for the seeds: [`BulkLoad`] fills a group of tables on
//! either database, written once by its caller (rows through [`BulkRows`]).
//! On PostgreSQL by binary `COPY`, with the tables' indexes set aside for
//! the load and built once after it; on SQLite by prepared inserts on a
//! connection of its own.
//!
//! Both work inside one transaction that also empties the tables, so a seed
//! that fails or is killed leaves the tables (and their indexes) as they
//! were, and `COPY ... FREEZE` may write rows already frozen (no hint-bit
//! rewrites and no freezing vacuum later; PostgreSQL refuses `FREEZE` on a
//! partitioned table, whose rows are copied unfrozen).
//!
//! A replacing load ([`KeyedTable`]) deletes only the rows of one key (one
//! election of several) and keeps the others: rows are copied unfrozen
//! (`FREEZE` needs the table emptied in the same transaction) into tables
//! whose indexes stay in place, since rebuilding one would sort the rows
//! kept as well as the rows loaded.

use tokio_postgres::Transaction;

/// Rows in `COPY`'s binary format, built in memory and sent in one piece:
/// a chunk of rows costs one message to the connection instead of one per
/// few kilobytes, and no per-value dynamic dispatch (measured: the seeding
/// process spent as much CPU as PostgreSQL with tokio-postgres's
/// row-at-a-time `BinaryCopyInWriter`).
pub struct CopyRows {
    buf: bytes::BytesMut,
    rows: u64,
}

/// The binary format's signature, flags and header-extension length.
const COPY_HEADER: &[u8] = b"PGCOPY\n\xff\r\n\0\0\0\0\0\0\0\0\0";

impl CopyRows {
    pub fn with_capacity(bytes: usize) -> CopyRows {
        let mut buf = bytes::BytesMut::with_capacity(bytes + COPY_HEADER.len() + 2);
        buf.extend_from_slice(COPY_HEADER);
        CopyRows { buf, rows: 0 }
    }

    /// Starts a row of `fields` values; each must follow, in column order.
    pub fn row(&mut self, fields: i16) -> &mut CopyRows {
        self.rows += 1;
        self.buf.extend_from_slice(&fields.to_be_bytes());
        self
    }

    /// A `BIGINT`.
    pub fn int8(&mut self, v: i64) -> &mut CopyRows {
        self.buf.extend_from_slice(&8i32.to_be_bytes());
        self.buf.extend_from_slice(&v.to_be_bytes());
        self
    }

    /// An `INT`.
    pub fn int4(&mut self, v: i32) -> &mut CopyRows {
        self.buf.extend_from_slice(&4i32.to_be_bytes());
        self.buf.extend_from_slice(&v.to_be_bytes());
        self
    }

    /// A `TEXT` (UTF-8, as the database's encoding must be).
    pub fn text(&mut self, v: &str) -> &mut CopyRows {
        let len = i32::try_from(v.len()).expect("a COPY field under 2 GiB");
        self.buf.extend_from_slice(&len.to_be_bytes());
        self.buf.extend_from_slice(v.as_bytes());
        self
    }

    /// `NULL`.
    pub fn null(&mut self) -> &mut CopyRows {
        self.buf.extend_from_slice(&(-1i32).to_be_bytes());
        self
    }

    pub fn opt_int8(&mut self, v: Option<i64>) -> &mut CopyRows {
        match v {
            Some(v) => self.int8(v),
            None => self.null(),
        }
    }

    pub fn opt_int4(&mut self, v: Option<i32>) -> &mut CopyRows {
        match v {
            Some(v) => self.int4(v),
            None => self.null(),
        }
    }

    /// Sends the rows with `COPY table (columns) FROM STDIN (FORMAT binary
    /// [, FREEZE])`; returns the rows PostgreSQL stored. `FREEZE` needs the
    /// table created or truncated earlier in the same transaction.
    pub async fn send(
        self,
        tx: &Transaction<'_>,
        table: &str,
        columns: &[&str],
        freeze: bool,
    ) -> Result<u64, tokio_postgres::Error> {
        use futures::SinkExt;
        if self.rows == 0 {
            return Ok(0);
        }
        let (sql, body) = self.statement(table, columns, freeze);
        let sink = tx.copy_in::<_, bytes::Bytes>(&sql).await?;
        futures::pin_mut!(sink);
        sink.send(body).await?;
        sink.finish().await
    }

    /// [`CopyRows::send`] on a client in a transaction it began.
    pub async fn send_on(
        self,
        client: &tokio_postgres::Client,
        table: &str,
        columns: &[&str],
        freeze: bool,
    ) -> Result<u64, tokio_postgres::Error> {
        use futures::SinkExt;
        if self.rows == 0 {
            return Ok(0);
        }
        let (sql, body) = self.statement(table, columns, freeze);
        let sink = client.copy_in::<_, bytes::Bytes>(&sql).await?;
        futures::pin_mut!(sink);
        sink.send(body).await?;
        sink.finish().await
    }

    /// The `COPY` statement and the rows' bytes, ended.
    fn statement(mut self, table: &str, columns: &[&str], freeze: bool) -> (String, bytes::Bytes) {
        self.buf.extend_from_slice(&(-1i16).to_be_bytes());
        let sql = format!(
            "COPY {table} ({}) FROM STDIN (FORMAT binary{})",
            columns.join(", "),
            if freeze { ", FREEZE" } else { "" }
        );
        (sql, self.buf.freeze())
    }
}

/// Indexes (primary keys and unique constraints included) dropped for a
/// load, with the statements that build them again.
#[derive(Debug, Default)]
pub struct IndexesAside {
    /// `ALTER TABLE ... ADD CONSTRAINT ...` or `CREATE INDEX ...`, in the
    /// order they were found (constraints first).
    rebuild: Vec<String>,
}

impl IndexesAside {
    /// Drops every index of `tables` in `tx`, remembering how to build it.
    pub async fn drop_all(
        tx: &Transaction<'_>,
        tables: &[&str],
    ) -> Result<IndexesAside, tokio_postgres::Error> {
        IndexesAside::drop_all_on(tx, tables).await
    }

    /// [`IndexesAside::drop_all`] on a client in a transaction it began.
    pub async fn drop_all_on(
        tx: &impl tokio_postgres::GenericClient,
        tables: &[&str],
    ) -> Result<IndexesAside, tokio_postgres::Error> {
        let tables: Vec<String> = tables.iter().map(|t| t.to_string()).collect();
        let rows = tx
            .query(
                "SELECT quote_ident(t.relname), i.indexrelid::regclass::text,
                        quote_ident(c.conname), pg_get_constraintdef(c.oid), pg_get_indexdef(i.indexrelid)
                 FROM pg_index i
                 JOIN pg_class t ON t.oid = i.indrelid
                 LEFT JOIN pg_constraint c ON c.conindid = i.indexrelid AND c.conrelid = t.oid
                                           AND c.contype IN ('p', 'u')
                 WHERE i.indrelid IN (SELECT to_regclass(n) FROM unnest($1::TEXT[]) AS n)
                 ORDER BY c.conname IS NULL, t.relname, i.indexrelid::regclass::text",
                &[&tables],
            )
            .await?;
        let mut aside = IndexesAside::default();
        let mut drops = String::new();
        for r in rows {
            let (table, index): (String, String) = (r.get(0), r.get(1));
            let constraint: Option<String> = r.get(2);
            match constraint {
                Some(name) => {
                    let def: String = r.get(3);
                    drops.push_str(&format!("ALTER TABLE {table} DROP CONSTRAINT {name};"));
                    aside
                        .rebuild
                        .push(format!("ALTER TABLE {table} ADD CONSTRAINT {name} {def}"));
                }
                None => {
                    drops.push_str(&format!("DROP INDEX {index};"));
                    aside.rebuild.push(r.get(4));
                }
            }
        }
        if !drops.is_empty() {
            tx.batch_execute(&drops).await?;
        }
        Ok(aside)
    }

    /// Builds them again, each from sorted input (one pass over its table,
    /// instead of an insert per row during the load).
    pub async fn rebuild(self, tx: &Transaction<'_>) -> Result<(), tokio_postgres::Error> {
        self.rebuild_on(tx).await
    }

    /// [`IndexesAside::rebuild`] on a client in a transaction it began.
    pub async fn rebuild_on(
        self,
        tx: &impl tokio_postgres::GenericClient,
    ) -> Result<(), tokio_postgres::Error> {
        for sql in &self.rebuild {
            tx.batch_execute(sql).await?;
        }
        Ok(())
    }
}

// ------------------------------------------------------------ the loader

/// A table a bulk load fills: its name and the columns each row gives, in
/// order.
pub struct BulkTable {
    pub name: &'static str,
    pub columns: &'static [&'static str],
    /// Whether the load gathers the table's statistics when it finishes
    /// (booking's tables are meant to run without: ARCHITECTURE.md).
    pub analyze: bool,
}

/// A table of a replacing load, with its column holding the key whose rows
/// the load replaces.
pub struct KeyedTable {
    pub table: &'static BulkTable,
    pub column: &'static str,
}

/// The rows a load deletes before it fills its tables.
pub(crate) enum Replaced {
    /// Every row.
    All,
    /// The rows whose key column holds `key`.
    Key {
        tables: &'static [KeyedTable],
        key: i64,
    },
}

/// Rows for one table, encoded for the database they go to: `COPY`'s
/// binary format for PostgreSQL, values for SQLite's prepared insert.
pub struct BulkRows {
    table: &'static BulkTable,
    encoded: Encoded,
}

enum Encoded {
    Copy(CopyRows),
    Values {
        values: Vec<rusqlite::types::Value>,
        rows: usize,
    },
}

impl BulkRows {
    /// Starts a row; each of the table's columns must follow, in order.
    pub fn row(&mut self) -> &mut BulkRows {
        let fields = self.table.columns.len();
        match &mut self.encoded {
            Encoded::Copy(c) => {
                c.row(fields as i16);
            }
            Encoded::Values { rows, .. } => *rows += 1,
        }
        self
    }

    /// The value as COPY encodes it, or as SQLite binds it (made only
    /// for SQLite: a PostgreSQL load copies nothing twice).
    fn value(
        &mut self,
        copy: impl FnOnce(&mut CopyRows) -> &mut CopyRows,
        value: impl FnOnce() -> rusqlite::types::Value,
    ) -> &mut BulkRows {
        match &mut self.encoded {
            Encoded::Copy(c) => {
                copy(c);
            }
            Encoded::Values { values, .. } => values.push(value()),
        }
        self
    }

    /// A `BIGINT`.
    pub fn int8(&mut self, v: i64) -> &mut BulkRows {
        self.value(|c| c.int8(v), || v.into())
    }

    /// An `INT`.
    pub fn int4(&mut self, v: i32) -> &mut BulkRows {
        self.value(|c| c.int4(v), || v.into())
    }

    /// A `SMALLINT`.
    pub fn int2(&mut self, v: i16) -> &mut BulkRows {
        self.value(|c| c.int2(v), || v.into())
    }

    pub fn text(&mut self, v: &str) -> &mut BulkRows {
        self.value(|c| c.text(v), || v.to_string().into())
    }

    /// A `BYTEA` (SQLite: a blob).
    pub fn bytes(&mut self, v: &[u8]) -> &mut BulkRows {
        self.value(|c| c.bytes(v), || v.to_vec().into())
    }

    pub fn null(&mut self) -> &mut BulkRows {
        self.value(|c| c.null(), || rusqlite::types::Value::Null)
    }

    pub fn opt_int8(&mut self, v: Option<i64>) -> &mut BulkRows {
        match v {
            Some(v) => self.int8(v),
            None => self.null(),
        }
    }

    pub fn opt_int4(&mut self, v: Option<i32>) -> &mut BulkRows {
        match v {
            Some(v) => self.int4(v),
            None => self.null(),
        }
    }

    /// A `BIGINT[]`; SQLite, which has no arrays, takes a blob of the
    /// values as 8-byte big-endian integers.
    pub fn int8_array(&mut self, v: &[i64]) -> &mut BulkRows {
        self.value(
            |c| c.int8_array(v),
            || {
                let blob: Vec<u8> = v.iter().flat_map(|x| x.to_be_bytes()).collect();
                blob.into()
            },
        )
    }

    pub fn opt_text(&mut self, v: Option<&str>) -> &mut BulkRows {
        match v {
            Some(v) => self.text(v),
            None => self.null(),
        }
    }
}

impl CopyRows {
    /// A one-dimensional `BIGINT[]` (no NULLs; empty, PostgreSQL stores
    /// `{}`).
    pub fn int8_array(&mut self, v: &[i64]) -> &mut CopyRows {
        /// `int8`'s type oid, which an array names for its elements.
        const INT8_OID: i32 = 20;
        let n = i32::try_from(v.len()).expect("an array under 2^31 elements");
        let len = i32::try_from(20 + 12 * v.len()).expect("a COPY field under 2 GiB");
        self.buf.extend_from_slice(&len.to_be_bytes());
        // One dimension, no NULLs, the elements' type; the dimension's
        // length and lower bound.
        for word in [1, 0, INT8_OID, n, 1] {
            self.buf.extend_from_slice(&word.to_be_bytes());
        }
        for x in v {
            self.buf.extend_from_slice(&8i32.to_be_bytes());
            self.buf.extend_from_slice(&x.to_be_bytes());
        }
        self
    }

    /// A `SMALLINT`.
    pub fn int2(&mut self, v: i16) -> &mut CopyRows {
        self.buf.extend_from_slice(&2i32.to_be_bytes());
        self.buf.extend_from_slice(&v.to_be_bytes());
        self
    }

    /// A `BYTEA`.
    pub fn bytes(&mut self, v: &[u8]) -> &mut CopyRows {
        let len = i32::try_from(v.len()).expect("a COPY field under 2 GiB");
        self.buf.extend_from_slice(&len.to_be_bytes());
        self.buf.extend_from_slice(v);
        self
    }
}

/// Memory for each index build in a PostgreSQL load's transaction
/// (`maintenance_work_mem`): the largest seeded index (comments' thread
/// index over 3,000,000 rows) sorts in memory with it.
const PG_INDEX_BUILD_MEMORY_MB: u32 = 512;

/// How long a PostgreSQL load waits for its tables' locks per attempt, and
/// how many attempts it makes (see `BulkLoad::postgres`).
const PG_LOAD_LOCK_WAIT_MS: u64 = 2_000;
const PG_LOAD_LOCK_ATTEMPTS_MAX: u32 = 10;

/// Whether PostgreSQL refused a lock: a deadlock it broke (40P01) or a
/// wait past `lock_timeout` (55P03).
fn lock_refused(e: &tokio_postgres::Error) -> bool {
    use tokio_postgres::error::SqlState;
    e.code().is_some_and(|c| {
        *c == SqlState::T_R_DEADLOCK_DETECTED || *c == SqlState::LOCK_NOT_AVAILABLE
    })
}

/// SQLite page cache of a load's own connection, in KiB.
const SQLITE_LOAD_CACHE_KIB: i64 = 256 * 1024;

/// A bulk load of a group of tables, emptied first. The named strategy per
/// database:
/// - PostgreSQL: one transaction that empties the tables (`TRUNCATE`), sets
///   their indexes aside, takes the rows by binary `COPY ... FREEZE` and
///   builds the indexes once at the end, so a failed or killed load leaves
///   the tables as they were;
/// - SQLite: a connection of its own without `fsync` (seeding is not
///   serving: a crash mid-seed means seeding again), a transaction per
///   [`BulkLoad::send`] with one prepared insert per row, in the tables'
///   key order, so every insert appends to its B-tree.
///
/// A replacing load (`Store::bulk_load_replacing`) deletes the key's rows instead of
/// emptying its tables: on PostgreSQL in the load's transaction, with the
/// indexes kept and the rows copied unfrozen; on SQLite in a transaction
/// of its own before the rows.
pub struct BulkLoad {
    tables: Vec<&'static BulkTable>,
    inner: LoadInner,
}

/// A pooled PostgreSQL connection inside a load's transaction. Dropped
/// before the load committed (an error, a panic, a cancelled seed), it
/// leaves the pool and closes, so the server rolls the transaction back;
/// back in the pool it would carry the open transaction to its next user.
struct InTransaction(Option<deadpool_postgres::Object>);

impl InTransaction {
    fn client(&self) -> &tokio_postgres::Client {
        self.0.as_ref().expect("a load's connection until it ends")
    }

    /// The transaction ended: the connection may go back to the pool.
    fn ended(mut self) {
        self.0.take();
    }
}

impl Drop for InTransaction {
    fn drop(&mut self) {
        if let Some(open) = self.0.take() {
            drop(deadpool_postgres::Object::take(open));
        }
    }
}

enum LoadInner {
    Sqlite(rusqlite::Connection),
    Postgres {
        client: InTransaction,
        aside: IndexesAside,
        /// The load's tables whose rows `COPY` cannot freeze: partitioned
        /// ones, or every one when the load keeps other rows.
        unfrozen: Vec<String>,
    },
}

impl Replaced {
    /// The load's tables.
    fn tables(&self, all: &'static [&'static BulkTable]) -> Vec<&'static BulkTable> {
        match self {
            Replaced::All => all.to_vec(),
            Replaced::Key { tables, .. } => tables.iter().map(|t| t.table).collect(),
        }
    }
}

impl BulkLoad {
    pub(super) fn sqlite(
        path: &std::path::Path,
        tables: &'static [&'static BulkTable],
        replaced: Replaced,
    ) -> anyhow::Result<BulkLoad> {
        let mut conn = super::sqlite::open_connection(path, SQLITE_LOAD_CACHE_KIB, false)?;
        conn.execute_batch("PRAGMA synchronous = OFF;")?;
        let tx = conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
        match &replaced {
            Replaced::All => {
                for t in tables {
                    tx.execute(&format!("DELETE FROM {}", t.name), [])?;
                }
            }
            Replaced::Key { tables, key } => {
                for t in *tables {
                    let sql = format!("DELETE FROM {} WHERE {} = ?1", t.table.name, t.column);
                    tx.execute(&sql, [key])?;
                }
            }
        }
        tx.commit()?;
        Ok(BulkLoad {
            tables: replaced.tables(tables),
            inner: LoadInner::Sqlite(conn),
        })
    }

    pub(super) async fn postgres(
        client: deadpool_postgres::Object,
        tables: &'static [&'static BulkTable],
        replaced: Replaced,
    ) -> anyhow::Result<BulkLoad> {
        let client = InTransaction(Some(client));
        let raw = client.client();
        if let Replaced::Key { tables: keyed, key } = &replaced {
            raw.batch_execute("BEGIN").await?;
            for t in *keyed {
                let sql = format!("DELETE FROM {} WHERE {} = $1", t.table.name, t.column);
                raw.execute(&sql, &[key]).await?;
            }
            let unfrozen = keyed.iter().map(|t| t.table.name.to_string()).collect();
            return Ok(BulkLoad {
                tables: replaced.tables(tables),
                inner: LoadInner::Postgres {
                    client,
                    aside: IndexesAside::default(),
                    unfrozen,
                },
            });
        }
        let names: Vec<&str> = tables.iter().map(|t| t.name).collect();
        // TRUNCATE in this transaction is also what lets COPY freeze the rows.
        let begin = format!(
            "BEGIN; SET LOCAL maintenance_work_mem = '{PG_INDEX_BUILD_MEMORY_MB}MB';
             SET LOCAL max_parallel_maintenance_workers = 0; SET LOCAL lock_timeout = '{}ms';
             TRUNCATE {}",
            PG_LOAD_LOCK_WAIT_MS,
            names.join(", ")
        );
        // A live server's transactions hold the tables too: taking their
        // locks one after another can deadlock with one of them, or wait
        // behind a long one. Either way the load lets go of what it took
        // and tries again, a bounded number of times.
        let mut attempt = 1;
        loop {
            match raw.batch_execute(&begin).await {
                Ok(()) => break,
                Err(e) if attempt < PG_LOAD_LOCK_ATTEMPTS_MAX && lock_refused(&e) => {
                    raw.batch_execute("ROLLBACK").await?;
                    tracing::info!(attempt, error = %e, "the bulk load waits for the tables' locks");
                    tokio::time::sleep(std::time::Duration::from_millis(100 * attempt as u64))
                        .await;
                    attempt += 1;
                }
                Err(e) => return Err(e.into()),
            }
        }
        let unfrozen = raw
            .query(
                "SELECT n FROM unnest($1::TEXT[]) AS n
                 JOIN pg_class c ON c.oid = to_regclass(n) WHERE c.relkind = 'p'",
                &[&names],
            )
            .await?
            .iter()
            .map(|r| r.get(0))
            .collect();
        let aside = IndexesAside::drop_all_on(raw, &names).await?;
        Ok(BulkLoad {
            tables: replaced.tables(tables),
            inner: LoadInner::Postgres {
                client,
                aside,
                unfrozen,
            },
        })
    }

    /// An empty batch of rows for `table` (one of the load's), with room
    /// for about `rows` rows of `row_bytes` each.
    pub fn rows(&self, table: &'static BulkTable, rows: usize, row_bytes: usize) -> BulkRows {
        debug_assert!(self.tables.iter().any(|t| std::ptr::eq(*t, table)));
        BulkRows {
            table,
            encoded: match self.inner {
                LoadInner::Sqlite(_) => Encoded::Values {
                    values: Vec::with_capacity(rows * table.columns.len()),
                    rows: 0,
                },
                LoadInner::Postgres { .. } => {
                    Encoded::Copy(CopyRows::with_capacity(rows * row_bytes))
                }
            },
        }
    }

    /// Stores `rows`; the number of rows stored.
    pub async fn send(&mut self, rows: BulkRows) -> anyhow::Result<u64> {
        let table = rows.table;
        match (&mut self.inner, rows.encoded) {
            (LoadInner::Sqlite(conn), Encoded::Values { values, rows }) => {
                let placeholders: Vec<String> =
                    (1..=table.columns.len()).map(|i| format!("?{i}")).collect();
                let sql = format!(
                    "INSERT INTO {} ({}) VALUES ({})",
                    table.name,
                    table.columns.join(", "),
                    placeholders.join(", ")
                );
                let tx =
                    conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
                {
                    let mut insert = tx.prepare_cached(&sql)?;
                    for row in values.chunks_exact(table.columns.len()) {
                        insert.execute(rusqlite::params_from_iter(row))?;
                    }
                }
                tx.commit()?;
                Ok(rows as u64)
            }
            (
                LoadInner::Postgres {
                    client, unfrozen, ..
                },
                Encoded::Copy(copy),
            ) => {
                let freeze = !unfrozen.iter().any(|t| t == table.name);
                Ok(copy
                    .send_on(client.client(), table.name, table.columns, freeze)
                    .await?)
            }
            _ => anyhow::bail!("rows encoded for another database"),
        }
    }

    /// Ends the load: on PostgreSQL builds the indexes again and commits;
    /// then gathers the statistics of the tables that want them.
    pub async fn finish(self) -> anyhow::Result<()> {
        let analyzed: Vec<&str> = self
            .tables
            .iter()
            .filter(|t| t.analyze)
            .map(|t| t.name)
            .collect();
        match self.inner {
            LoadInner::Sqlite(conn) => {
                // Synchronous again for the checkpoint, which then syncs the
                // database file before it empties the log: a load that has
                // finished is on disk.
                let mut sql =
                    String::from("PRAGMA synchronous = FULL; PRAGMA wal_checkpoint(TRUNCATE);");
                if !analyzed.is_empty() {
                    sql.push_str("PRAGMA analysis_limit = 1000;");
                    for t in &analyzed {
                        sql.push_str(&format!("ANALYZE {t};"));
                    }
                }
                conn.execute_batch(&sql)?;
            }
            LoadInner::Postgres { client, aside, .. } => {
                let raw = client.client();
                aside.rebuild_on(raw).await?;
                raw.batch_execute("COMMIT").await?;
                for t in &analyzed {
                    raw.batch_execute(&format!("ANALYZE {t}")).await?;
                }
                client.ended();
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The array field is what tokio-postgres itself sends for a
    /// `BIGINT[]`, after its length.
    #[test]
    fn int8_arrays_are_encoded_as_postgres_reads_them() {
        use tokio_postgres::types::{ToSql, Type};
        for v in [vec![], vec![7i64], vec![-1, 0, i64::MAX]] {
            let mut rows = CopyRows::with_capacity(64);
            let start = rows.buf.len();
            rows.int8_array(&v);
            let mut body = bytes::BytesMut::new();
            v.to_sql(&Type::INT8_ARRAY, &mut body).unwrap();
            let field = &rows.buf[start..];
            assert_eq!(&field[..4], &(body.len() as i32).to_be_bytes(), "{v:?}");
            assert_eq!(&field[4..], &body[..], "{v:?}");
        }
    }
}
