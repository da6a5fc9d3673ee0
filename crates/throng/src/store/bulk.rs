//! Bulk loading into PostgreSQL, for the seeds: binary `COPY`, and a
//! table's indexes set aside for a load and built once after it.
//!
//! Both work inside one transaction that also empties the tables, so a seed
//! that fails or is killed leaves the tables (and their indexes) as they
//! were, and `COPY ... FREEZE` may write rows already frozen (no hint-bit
//! rewrites and no freezing vacuum later).

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
        mut self,
        tx: &Transaction<'_>,
        table: &str,
        columns: &[&str],
        freeze: bool,
    ) -> Result<u64, tokio_postgres::Error> {
        use futures::SinkExt;
        if self.rows == 0 {
            return Ok(0);
        }
        self.buf.extend_from_slice(&(-1i16).to_be_bytes());
        let sql = format!(
            "COPY {table} ({}) FROM STDIN (FORMAT binary{})",
            columns.join(", "),
            if freeze { ", FREEZE" } else { "" }
        );
        let sink = tx.copy_in::<_, bytes::Bytes>(&sql).await?;
        futures::pin_mut!(sink);
        sink.send(self.buf.freeze()).await?;
        sink.finish().await
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
        for sql in &self.rebuild {
            tx.batch_execute(sql).await?;
        }
        Ok(())
    }
}
