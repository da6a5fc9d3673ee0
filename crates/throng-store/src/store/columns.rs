//! [`Columns`]: a row's columns as either driver gives them, so a service
//! maps each row shape once for both dialects.

use super::StoreError;

/// A row's columns, typed as the caller asks; integers of any width.
pub trait Columns {
    /// Column `i` as `T` (a type both drivers read).
    fn col<T>(&self, i: usize) -> Result<T, StoreError>
    where
        T: rusqlite::types::FromSql + tokio_postgres::types::FromSqlOwned;

    /// An integer column of any width (PostgreSQL's `SMALLINT`, `INT` or
    /// `BIGINT`; SQLite's one integer), or `None` for NULL.
    fn opt_int(&self, i: usize) -> Result<Option<i64>, StoreError>;

    /// An integer column of any width.
    fn int(&self, i: usize) -> Result<i64, StoreError> {
        self.opt_int(i)?
            .ok_or_else(|| StoreError::Internal(format!("column {i}: null")))
    }

    /// A 32-bit integer column (`INT` on PostgreSQL).
    fn int4(&self, i: usize) -> Result<i32, StoreError> {
        self.col(i)
    }

    fn text(&self, i: usize) -> Result<String, StoreError> {
        self.col(i)
    }

    fn bytes(&self, i: usize) -> Result<Vec<u8>, StoreError> {
        self.col(i)
    }

    fn opt_bytes(&self, i: usize) -> Result<Option<Vec<u8>>, StoreError> {
        self.col(i)
    }
}

impl Columns for rusqlite::Row<'_> {
    fn col<T>(&self, i: usize) -> Result<T, StoreError>
    where
        T: rusqlite::types::FromSql + tokio_postgres::types::FromSqlOwned,
    {
        Ok(self.get(i)?)
    }

    fn opt_int(&self, i: usize) -> Result<Option<i64>, StoreError> {
        Ok(self.get(i)?)
    }
}

impl Columns for tokio_postgres::Row {
    fn col<T>(&self, i: usize) -> Result<T, StoreError>
    where
        T: rusqlite::types::FromSql + tokio_postgres::types::FromSqlOwned,
    {
        self.try_get(i)
            .map_err(|e| StoreError::Internal(format!("column {i}: {e}")))
    }

    fn opt_int(&self, i: usize) -> Result<Option<i64>, StoreError> {
        use tokio_postgres::types::Type;
        let ty = self.columns()[i].type_();
        let v = if *ty == Type::INT2 {
            self.try_get::<_, Option<i16>>(i).map(|v| v.map(i64::from))
        } else if *ty == Type::INT4 {
            self.try_get::<_, Option<i32>>(i).map(|v| v.map(i64::from))
        } else {
            self.try_get::<_, Option<i64>>(i)
        };
        v.map_err(|e| StoreError::Internal(format!("column {i}: {e}")))
    }
}
