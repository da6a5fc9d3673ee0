//! Embedded migrations, applied at start. The store's own tables (`meta`,
//! the event log, consumer positions) are migrated from
//! `crates/throng/migrations/{sqlite,postgres}`; each service brings a
//! [`MigrationSet`] of its own folder (`services/<name>/migrations/...`).
//! A migration is keyed by its owner and version (the file name's number
//! prefix), so a service numbers its own history: the store's come first,
//! then each service's in the order services are listed, each in version
//! order. `schema_versions` records what ran; a database whose record is
//! the older `schema_migrations` (keyed by version alone, when versions were
//! numbered across owners) has it copied over, owners found by file name.

use include_dir::include_dir;
pub use include_dir::{Dir, DirEntry, File};

/// The migrations of one owner (the store itself or a service), one folder
/// per dialect, each holding `NNNN_name.sql` files.
pub struct MigrationSet {
    pub owner: &'static str,
    pub sqlite: Dir<'static>,
    pub postgres: Dir<'static>,
}

/// A [`MigrationSet`] whose SQL reads the same in both dialects, written
/// once: `portable_migrations!("owner", "0001_name.sql" => "CREATE ...")`.
#[macro_export]
macro_rules! portable_migrations {
    ($owner:literal, $($file:literal => $sql:expr),+ $(,)?) => {
        $crate::store::MigrationSet {
            owner: $owner,
            sqlite: $crate::portable_migrations!(@dir "sqlite", $($file => $sql),+),
            postgres: $crate::portable_migrations!(@dir "postgres", $($file => $sql),+),
        }
    };
    (@dir $name:literal, $($file:literal => $sql:expr),+) => {
        $crate::store::migrate::Dir::new(
            $name,
            &[$($crate::store::migrate::DirEntry::File(
                $crate::store::migrate::File::new($file, $sql.as_bytes()),
            )),+],
        )
    };
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

/// One migration to apply.
#[derive(Clone, Copy, Debug)]
pub struct Migration {
    pub owner: &'static str,
    pub version: i64,
    pub name: &'static str,
    pub sql: &'static str,
}

/// The store's and `sets`' migrations in the order they apply: the store's
/// first, then each set's, each in version order. An error names two files
/// of one owner that claim one version, or two owners of one name.
pub fn ordered(sets: &[&'static MigrationSet], dialect: Dialect) -> anyhow::Result<Vec<Migration>> {
    let mut out: Vec<Migration> = Vec::new();
    let mut owners: Vec<&str> = Vec::new();
    for set in std::iter::once(&&PLATFORM).chain(sets.iter()) {
        if owners.contains(&set.owner) {
            anyhow::bail!("two migration sets are owned by {}", set.owner);
        }
        owners.push(set.owner);
        let dir = match dialect {
            Dialect::Sqlite => &set.sqlite,
            Dialect::Postgres => &set.postgres,
        };
        let mut own: Vec<Migration> = Vec::new();
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
            own.push(Migration {
                owner: set.owner,
                version,
                name,
                sql,
            });
        }
        own.sort_by_key(|m| m.version);
        for pair in own.windows(2) {
            if pair[0].version == pair[1].version {
                anyhow::bail!(
                    "migrations {}/{} and {}/{} claim version {}; give the newer one the next free number",
                    pair[0].owner,
                    pair[0].name,
                    pair[1].owner,
                    pair[1].name,
                    pair[0].version
                );
            }
        }
        out.extend(own);
    }
    Ok(out)
}

/// The owner of a migration recorded by file name in the older
/// `schema_migrations` (file names were unique across owners there).
fn owner_of_name(all: &[Migration], name: &str) -> Option<&'static str> {
    all.iter().find(|m| m.name == name).map(|m| m.owner)
}

const CREATE_SCHEMA_VERSIONS_SQLITE: &str = "CREATE TABLE IF NOT EXISTS schema_versions (
    owner TEXT NOT NULL, version INTEGER NOT NULL, name TEXT NOT NULL,
    applied_at_ms INTEGER NOT NULL, PRIMARY KEY (owner, version))";

const CREATE_SCHEMA_VERSIONS_PG: &str = "CREATE TABLE IF NOT EXISTS schema_versions (
    owner TEXT NOT NULL, version BIGINT NOT NULL, name TEXT NOT NULL,
    applied_at_ms BIGINT NOT NULL, PRIMARY KEY (owner, version))";

pub fn apply_sqlite(
    conn: &mut rusqlite::Connection,
    sets: &[&'static MigrationSet],
) -> anyhow::Result<()> {
    let all = ordered(sets, Dialect::Sqlite)?;
    {
        let tx = conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
        tx.execute_batch(CREATE_SCHEMA_VERSIONS_SQLITE)?;
        let older: i64 = tx.query_row(
            "SELECT COUNT(*) FROM sqlite_master WHERE type = 'table' AND name = 'schema_migrations'",
            [],
            |r| r.get(0),
        )?;
        if older == 1 {
            let rows: Vec<(i64, String, i64)> = tx
                .prepare("SELECT version, name, applied_at_ms FROM schema_migrations")?
                .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?
                .collect::<Result<_, _>>()?;
            for (version, name, at) in rows {
                let Some(owner) = owner_of_name(&all, &name) else {
                    anyhow::bail!(
                        "schema_migrations records {name}, which no migration set of this build has"
                    );
                };
                tx.execute(
                    "INSERT OR IGNORE INTO schema_versions (owner, version, name, applied_at_ms)
                     VALUES (?1, ?2, ?3, ?4)",
                    rusqlite::params![owner, version, name, at],
                )?;
            }
            tx.execute_batch("DROP TABLE schema_migrations")?;
        }
        tx.commit()?;
    }
    for m in all {
        let tx = conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
        let done: i64 = tx.query_row(
            "SELECT COUNT(*) FROM schema_versions WHERE owner = ?1 AND version = ?2",
            rusqlite::params![m.owner, m.version],
            |r| r.get(0),
        )?;
        if done == 0 {
            tx.execute_batch(m.sql)
                .map_err(|e| anyhow::anyhow!("migration {}/{} failed: {e}", m.owner, m.name))?;
            tx.execute(
                "INSERT INTO schema_versions (owner, version, name, applied_at_ms)
                 VALUES (?1, ?2, ?3, ?4)",
                rusqlite::params![m.owner, m.version, m.name, crate::base::clock::now_ms()],
            )?;
            tracing::info!(owner = m.owner, migration = m.name, "applied");
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
    // serialized by claiming their version row first (below). Copying the
    // older record races the same way (a twin dropped it: 42P01).
    let mut attempt = 0;
    loop {
        attempt += 1;
        let done = async {
            client.batch_execute(CREATE_SCHEMA_VERSIONS_PG).await?;
            adopt_older_record_pg(client, &all).await
        }
        .await;
        match done {
            Ok(()) => break,
            Err(e)
                if attempt < PG_BOOTSTRAP_ATTEMPTS_MAX
                    && e.downcast_ref::<tokio_postgres::Error>()
                        .and_then(|e| e.code())
                        .is_some_and(|c| {
                            matches!(c.code(), "23505" | "42710" | "42P07" | "42P01" | "40001")
                        }) =>
            {
                tokio::time::sleep(std::time::Duration::from_millis(50 * attempt as u64)).await;
            }
            Err(e) => return Err(e),
        }
    }
    for m in all {
        let tx = client.transaction().await?;
        // Claiming the version first makes concurrent starts of several nodes
        // safe: the second waits on the key, then finds it taken and skips.
        let claimed = tx
            .execute(
                "INSERT INTO schema_versions (owner, version, name, applied_at_ms)
                 VALUES ($1, $2, $3, $4) ON CONFLICT (owner, version) DO NOTHING",
                &[&m.owner, &m.version, &m.name, &crate::base::clock::now_ms()],
            )
            .await?;
        if claimed == 1 {
            tx.batch_execute(m.sql)
                .await
                .map_err(|e| anyhow::anyhow!("migration {}/{} failed: {e}", m.owner, m.name))?;
            tracing::info!(owner = m.owner, migration = m.name, "applied");
        }
        tx.commit().await?;
    }
    Ok(())
}

/// Copies the older `schema_migrations` record, if there is one, into
/// `schema_versions` and drops it, in one transaction.
async fn adopt_older_record_pg(
    client: &mut deadpool_postgres::Object,
    all: &[Migration],
) -> anyhow::Result<()> {
    let tx = client.transaction().await?;
    let older: Option<String> = tx
        .query_one("SELECT to_regclass('schema_migrations')::text", &[])
        .await?
        .get(0);
    if older.is_none() {
        return Ok(());
    }
    let rows = tx
        .query(
            "SELECT version, name, applied_at_ms FROM schema_migrations",
            &[],
        )
        .await?;
    for row in rows {
        let (version, name, at): (i64, String, i64) = (row.get(0), row.get(1), row.get(2));
        let Some(owner) = owner_of_name(all, &name) else {
            anyhow::bail!(
                "schema_migrations records {name}, which no migration set of this build has"
            );
        };
        tx.execute(
            "INSERT INTO schema_versions (owner, version, name, applied_at_ms)
             VALUES ($1, $2, $3, $4) ON CONFLICT (owner, version) DO NOTHING",
            &[&owner, &version, &name, &at],
        )
        .await?;
    }
    tx.batch_execute("DROP TABLE IF EXISTS schema_migrations")
        .await?;
    tx.commit().await?;
    Ok(())
}
