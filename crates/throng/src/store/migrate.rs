//! Embedded migrations, one folder per dialect (`migrations/sqlite`,
//! `migrations/postgres`), applied in file-name order at start. A service adds
//! a file to both folders and nothing else.

use include_dir::{include_dir, Dir};

static SQLITE: Dir<'_> = include_dir!("$CARGO_MANIFEST_DIR/migrations/sqlite");
static POSTGRES: Dir<'_> = include_dir!("$CARGO_MANIFEST_DIR/migrations/postgres");

/// (version, name, sql) in order; the version is the file name's number prefix.
fn migrations(dir: &'static Dir<'static>) -> Vec<(i64, &'static str, &'static str)> {
    let mut out: Vec<_> = dir
        .files()
        .filter_map(|f| {
            let name = f.path().file_name()?.to_str()?;
            let version: i64 = name.split('_').next()?.parse().ok()?;
            Some((version, name, f.contents_utf8()?))
        })
        .collect();
    out.sort_by_key(|m| m.0);
    out
}

pub fn apply_sqlite(conn: &mut rusqlite::Connection) -> anyhow::Result<()> {
    conn.execute_batch(
        "CREATE TABLE IF NOT EXISTS schema_migrations (
            version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at_ms INTEGER NOT NULL)",
    )?;
    for (version, name, sql) in migrations(&SQLITE) {
        let tx = conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
        let done: i64 = tx.query_row(
            "SELECT COUNT(*) FROM schema_migrations WHERE version = ?1",
            [version],
            |r| r.get(0),
        )?;
        if done == 0 {
            tx.execute_batch(sql)
                .map_err(|e| anyhow::anyhow!("migration {name} failed: {e}"))?;
            tx.execute(
                "INSERT INTO schema_migrations (version, name, applied_at_ms) VALUES (?1, ?2, ?3)",
                rusqlite::params![version, name, crate::platform::clock::now_ms()],
            )?;
            tracing::info!(migration = name, "applied");
        }
        tx.commit()?;
    }
    Ok(())
}

/// Attempts at creating the migrations table when nodes race to create it.
const PG_BOOTSTRAP_ATTEMPTS_MAX: u32 = 10;

pub async fn apply_postgres(client: &mut deadpool_postgres::Object) -> anyhow::Result<()> {
    // `CREATE TABLE IF NOT EXISTS` is not safe against a concurrent twin: the
    // loser fails on pg_type's unique index (23505) or sees the table appear
    // (42P07). Retrying settles it, and unlike an advisory lock it works on
    // CockroachDB and YugabyteDB too. The migrations themselves are then
    // serialized by claiming their version row first (below).
    let mut attempt = 0;
    loop {
        attempt += 1;
        match client
            .batch_execute(
                "CREATE TABLE IF NOT EXISTS schema_migrations (
                    version BIGINT PRIMARY KEY, name TEXT NOT NULL, applied_at_ms BIGINT NOT NULL)",
            )
            .await
        {
            Ok(()) => break,
            Err(e)
                if attempt < PG_BOOTSTRAP_ATTEMPTS_MAX
                    && e.code()
                        .is_some_and(|c| c.code() == "23505" || c.code() == "42P07") =>
            {
                tokio::time::sleep(std::time::Duration::from_millis(50 * attempt as u64)).await;
            }
            Err(e) => return Err(e.into()),
        }
    }
    for (version, name, sql) in migrations(&POSTGRES) {
        let tx = client.transaction().await?;
        // Claiming the version first makes concurrent starts of several nodes
        // safe: the second waits on the key, then finds it taken and skips.
        let claimed = tx
            .execute(
                "INSERT INTO schema_migrations (version, name, applied_at_ms) VALUES ($1, $2, $3)
                 ON CONFLICT (version) DO NOTHING",
                &[&version, &name, &crate::platform::clock::now_ms()],
            )
            .await?;
        if claimed == 1 {
            tx.batch_execute(sql)
                .await
                .map_err(|e| anyhow::anyhow!("migration {name} failed: {e}"))?;
            tracing::info!(migration = name, "applied");
        }
        tx.commit().await?;
    }
    Ok(())
}
