//! Copies of a live store and their return. SQLite: the online backup API
//! copies every page in one step, inside one read transaction, so the copy
//! is the database as of that transaction's start (every write committed,
//! and so acknowledged, before it) while the server goes on writing.
//! PostgreSQL: `pg_dump` in its custom format (one snapshot too), and
//! `pg_restore` back; continuous archiving is the server's own business
//! (README). The secrets are not in the database and not in these copies:
//! the platform bundles them apart (`platform::secrets`).

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use super::StoreUrl;

/// What a backup or a restore did.
#[derive(Debug)]
pub struct CopySummary {
    /// The copy's size in bytes.
    pub bytes: u64,
    pub elapsed: Duration,
}

/// Writes a consistent copy of the store at `url` to `to` (replaced if
/// there). The copy appears under its name only once complete and synced.
pub async fn backup(url: &StoreUrl, to: &Path) -> anyhow::Result<CopySummary> {
    let started = Instant::now();
    let partial = partial_name(to);
    let made = match url {
        StoreUrl::Sqlite(db) => {
            let (db, partial) = (db.clone(), partial.clone());
            tokio::task::spawn_blocking(move || sqlite_backup(&db, &partial)).await?
        }
        StoreUrl::Postgres(url) => pg_dump(url, &partial).await,
    };
    if let Err(e) = made {
        let _ = std::fs::remove_file(&partial);
        return Err(e);
    }
    install(&partial, to)?;
    Ok(CopySummary {
        bytes: std::fs::metadata(to)?.len(),
        elapsed: started.elapsed(),
    })
}

/// Puts the copy at `from` in place as the store at `url`, after checking
/// it. An existing store is replaced only with `replace` (its server must
/// be stopped: SQLite's old `-wal` and `-shm` files are removed, so they
/// can never be applied to the restored file).
pub async fn restore(url: &StoreUrl, from: &Path, replace: bool) -> anyhow::Result<CopySummary> {
    let started = Instant::now();
    anyhow::ensure!(from.is_file(), "no backup at {}", from.display());
    match url {
        StoreUrl::Sqlite(db) => {
            let (db, from) = (db.clone(), from.to_path_buf());
            tokio::task::spawn_blocking(move || sqlite_restore(&from, &db, replace)).await??
        }
        StoreUrl::Postgres(url) => pg_restore(url, from, replace).await?,
    }
    Ok(CopySummary {
        bytes: std::fs::metadata(from)?.len(),
        elapsed: started.elapsed(),
    })
}

fn partial_name(to: &Path) -> PathBuf {
    let mut name = to.file_name().unwrap_or_default().to_os_string();
    name.push(format!(".partial-{}", std::process::id()));
    to.with_file_name(name)
}

/// Renames the synced `partial` to `to` and makes the name durable.
fn install(partial: &Path, to: &Path) -> anyhow::Result<()> {
    std::fs::File::open(partial)?.sync_all()?;
    std::fs::rename(partial, to)
        .map_err(|e| anyhow::anyhow!("cannot put the copy at {}: {e}", to.display()))?;
    if let Some(dir) = to.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::File::open(dir)?.sync_all()?;
    }
    Ok(())
}

fn sqlite_backup(db: &Path, to: &Path) -> anyhow::Result<()> {
    anyhow::ensure!(db.is_file(), "no SQLite store at {}", db.display());
    let source = super::sqlite::open_connection(db, 2 * 1024, true)?;
    crate::base::private_fs::create_file(to)?;
    let mut copy = rusqlite::Connection::open(to)?;
    {
        let backup = rusqlite::backup::Backup::new(&source, &mut copy)?;
        // Every page in one step: one read transaction, one snapshot.
        // Stepping in parts would restart whenever the server wrote.
        match backup.step(-1)? {
            rusqlite::backup::StepResult::Done => {}
            other => anyhow::bail!("the copy did not finish ({other:?}); try again"),
        }
    }
    // A standalone file: no WAL beside it.
    copy.execute_batch("PRAGMA journal_mode = DELETE")?;
    check_sqlite(&copy, to)
}

/// Refuses a file that is not a sound throng store.
fn check_sqlite(conn: &rusqlite::Connection, path: &Path) -> anyhow::Result<()> {
    let quick: String = conn
        .query_row("PRAGMA quick_check", [], |r| r.get(0))
        .map_err(|e| anyhow::anyhow!("{} is not an SQLite database: {e}", path.display()))?;
    anyhow::ensure!(
        quick == "ok",
        "{} is damaged (SQLite's quick_check: {quick})",
        path.display()
    );
    let versions: i64 = conn
        .query_row("SELECT COUNT(*) FROM schema_versions", [], |r| r.get(0))
        .map_err(|_| anyhow::anyhow!("{} is not a throng store", path.display()))?;
    anyhow::ensure!(versions > 0, "{} is not a throng store", path.display());
    Ok(())
}

fn sqlite_restore(from: &Path, db: &Path, replace: bool) -> anyhow::Result<()> {
    {
        let copy = rusqlite::Connection::open_with_flags(
            from,
            rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY | rusqlite::OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )?;
        check_sqlite(&copy, from)?;
    }
    if db.exists() && !replace {
        anyhow::bail!(
            "a store is already at {}: stop its server, then pass --force to replace it",
            db.display()
        );
    }
    if let Some(dir) = db.parent().filter(|d| !d.as_os_str().is_empty()) {
        crate::base::private_fs::create_dir(dir)?;
    }
    // Held while the file is swapped: no server starts on it meanwhile,
    // and one serving it now refuses the restore.
    let _serving = super::sqlite::lock_for_serving(db).map_err(|_| {
        anyhow::anyhow!(
            "a throng server is serving {}: stop it before restoring",
            db.display()
        )
    })?;
    let partial = partial_name(db);
    crate::base::private_fs::create_file(&partial)?;
    std::fs::copy(from, &partial)?;
    for suffix in ["-wal", "-shm"] {
        let mut side = db.as_os_str().to_os_string();
        side.push(suffix);
        match std::fs::remove_file(PathBuf::from(side)) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e.into()),
            _ => {}
        }
    }
    install(&partial, db)
}

/// A PostgreSQL client program: on the PATH, else in Debian's versioned
/// folders (the newest first).
fn pg_program(name: &str) -> anyhow::Result<PathBuf> {
    if let Some(path) = std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|d| d.join(name))
            .find(|p| p.is_file())
    }) {
        return Ok(path);
    }
    let mut found: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path().join("bin").join(name))
        .filter(|p| p.is_file())
        .collect();
    found.sort();
    found.pop().ok_or_else(|| {
        anyhow::anyhow!(
            "{name} not found: install PostgreSQL's client programs (the server's major version)"
        )
    })
}

async fn run(program: &str, args: &[&std::ffi::OsStr]) -> anyhow::Result<()> {
    let path = pg_program(program)?;
    let out = tokio::process::Command::new(&path)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .await
        .map_err(|e| anyhow::anyhow!("cannot run {}: {e}", path.display()))?;
    anyhow::ensure!(
        out.status.success(),
        "{program} failed ({}): {}",
        out.status,
        String::from_utf8_lossy(&out.stderr).trim()
    );
    Ok(())
}

async fn pg_dump(url: &str, to: &Path) -> anyhow::Result<()> {
    run(
        "pg_dump",
        &[
            "--format=custom".as_ref(),
            "--no-owner".as_ref(),
            "--file".as_ref(),
            to.as_os_str(),
            "--dbname".as_ref(),
            url.as_ref(),
        ],
    )
    .await
}

async fn pg_restore(url: &str, from: &Path, replace: bool) -> anyhow::Result<()> {
    // `pg_restore --list` reads the archive without a server: a file that
    // is not one is refused before anything is touched.
    run("pg_restore", &["--list".as_ref(), from.as_os_str()]).await?;
    let (client, conn) = tokio_postgres::connect(url, tokio_postgres::NoTls).await?;
    let driver = tokio::spawn(conn);
    let occupied: bool = client
        .query_one("SELECT to_regclass('schema_versions') IS NOT NULL", &[])
        .await?
        .get(0);
    drop(client);
    let _ = driver.await;
    if occupied && !replace {
        anyhow::bail!(
            "the database already holds a throng store: stop its servers, then pass --force to \
             replace it"
        );
    }
    let mut args: Vec<&std::ffi::OsStr> = vec![
        "--no-owner".as_ref(),
        "--single-transaction".as_ref(),
        "--exit-on-error".as_ref(),
        "--dbname".as_ref(),
        url.as_ref(),
    ];
    if occupied {
        args.push("--clean".as_ref());
        args.push("--if-exists".as_ref());
    }
    args.push(from.as_os_str());
    run("pg_restore", &args).await
}
