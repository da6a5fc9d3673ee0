//! Embedded migrations, applied in version order at start. The store's own
//! tables (`meta`, the event log, consumer positions) are migrated from
//! `crates/throng/migrations/{sqlite,postgres}`; each service brings a
//! [`MigrationSet`] of its own folder (`services/<name>/migrations/...`). A
//! version is the file name's number prefix and is unique across the store
//! and every service (checked at start and by a unit test), so a database
//! keeps one ordered history however the files are grouped.

use include_dir::{include_dir, Dir};

/// The migrations of one owner (the store itself or a service), one folder
/// per dialect, each holding `NNNN_name.sql` files.
pub struct MigrationSet {
    pub owner: &'static str,
    pub sqlite: Dir<'static>,
    pub postgres: Dir<'static>,
}

/// The store's own tables.
pub static PLATFORM: MigrationSet = MigrationSet {
    owner: "store",
    sqlite: include_dir!("$CARGO_MANIFEST_DIR/migrations/sqlite"),
    postgres: include_dir!("$CARGO_MANIFEST_DIR/migrations/postgres"),
};

#[derive(Clone, Copy)]
pub enum Dialect {
    Sqlite,
    Postgres,
}

/// (version, name, sql) of the store's and `sets`' migrations in version
/// order; an error names two files that claim one version.
pub fn ordered(
    sets: &[&'static MigrationSet],
    dialect: Dialect,
) -> anyhow::Result<Vec<(i64, &'static str, &'static str)>> {
    let mut out: Vec<(i64, &'static str, &'static str, &'static str)> = Vec::new();
    for set in std::iter::once(&&PLATFORM).chain(sets.iter()) {
        let dir = match dialect {
            Dialect::Sqlite => &set.sqlite,
            Dialect::Postgres => &set.postgres,
        };
        for f in dir.files() {
            let Some(name) = f.path().file_name().and_then(|n| n.to_str()) else {
                continue;
            };
            let Some(version) = name.split('_').next().and_then(|v| v.parse::<i64>().ok()) else {
                anyhow::bail!(
                    "migration {}/{name}: the name must start with a number",
                    set.owner
                );
            };
            let Some(sql) = f.contents_utf8() else {
                anyhow::bail!("migration {}/{name} is not UTF-8", set.owner);
            };
            out.push((version, set.owner, name, sql));
        }
    }
    out.sort_by_key(|m| m.0);
    for pair in out.windows(2) {
        if pair[0].0 == pair[1].0 {
            anyhow::bail!(
                "migrations {}/{} and {}/{} claim version {}; give the newer one the next free number",
                pair[0].1,
                pair[0].2,
                pair[1].1,
                pair[1].2,
                pair[0].0
            );
        }
    }
    Ok(out.into_iter().map(|(v, _, n, s)| (v, n, s)).collect())
}

pub fn apply_sqlite(
    conn: &mut rusqlite::Connection,
    sets: &[&'static MigrationSet],
) -> anyhow::Result<()> {
    let all = ordered(sets, Dialect::Sqlite)?;
    conn.execute_batch(
        "CREATE TABLE IF NOT EXISTS schema_migrations (
            version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at_ms INTEGER NOT NULL)",
    )?;
    for (version, name, sql) in all {
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
                rusqlite::params![version, name, crate::base::clock::now_ms()],
            )?;
            tracing::info!(migration = name, "applied");
        }
        tx.commit()?;
    }
    Ok(())
}

/// Attempts at creating the migrations table when nodes race to create it.
const PG_BOOTSTRAP_ATTEMPTS_MAX: u32 = 10;

pub async fn apply_postgres(
    client: &mut deadpool_postgres::Object,
    sets: &[&'static MigrationSet],
) -> anyhow::Result<()> {
    let all = ordered(sets, Dialect::Postgres)?;
    // `CREATE TABLE IF NOT EXISTS` is not safe against a concurrent twin: the
    // loser fails on pg_type's unique index (23505), finds the row type
    // already made (42710, "type ... already exists") or sees the table
    // appear (42P07). Retrying settles it, and unlike an advisory lock it works on
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
                        .is_some_and(|c| matches!(c.code(), "23505" | "42710" | "42P07")) =>
            {
                tokio::time::sleep(std::time::Duration::from_millis(50 * attempt as u64)).await;
            }
            Err(e) => return Err(e.into()),
        }
    }
    for (version, name, sql) in all {
        let tx = client.transaction().await?;
        // Claiming the version first makes concurrent starts of several nodes
        // safe: the second waits on the key, then finds it taken and skips.
        let claimed = tx
            .execute(
                "INSERT INTO schema_migrations (version, name, applied_at_ms) VALUES ($1, $2, $3)
                 ON CONFLICT (version) DO NOTHING",
                &[&version, &name, &crate::base::clock::now_ms()],
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
