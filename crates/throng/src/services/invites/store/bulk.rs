//! The seed's bulk loads, each database's own way (the seam runs one
//! statement at a time; these load millions of rows): on SQLite batched
//! inserts on a connection of its own, in key order; on PostgreSQL `COPY`,
//! the primary key built after.

use indicatif::ProgressBar;

use crate::services::invites::index::{KEYS_META, KEYS_NUMBERS};
use crate::services::invites::model::{AnswerState, Site};
use crate::services::invites::seed::{seeded_standing, site_of, SeedInvitesArgs};
use crate::services::invites::visitor_ids::IdCipher;
use crate::store::Store;

/// A seeded site (both dialects; `pg_placeholders` for PostgreSQL).
const INSERT_SITE: &str =
    "INSERT INTO invites_sites (site_id, config, retention_days, created_at_ms, updated_at_ms)
     VALUES (?1, ?2, ?3, ?4, ?4)";

/// A seeded site's counts, shard 0 (both dialects).
const INSERT_COUNTS: &str = "INSERT INTO invites_counts
     (site_id, shard, visitors, invited, displays, yes, no, closes, closed_out)
     VALUES (?1, 0, ?2, ?3, ?3, ?4, ?5, ?6, ?7)";

/// Rows per progress step and per transaction.
const ROWS_PER_CHUNK: usize = 250_000;
/// Rows per INSERT statement on SQLite (6 parameters each).
const ROWS_PER_INSERT: usize = 128;

/// Per site: (visitors, invited, yes, no, closes, closed out), for the counts.
type SiteCounts = Vec<[i64; 6]>;

fn count(counts: &mut SiteCounts, site: i64, state: AnswerState, closes: i64) {
    let c = &mut counts[(site - 1) as usize];
    c[0] += 1;
    c[1] += 1;
    match state {
        AnswerState::Yes => c[2] += 1,
        AnswerState::No => c[3] += 1,
        AnswerState::ClosedOut => c[5] += 1,
        AnswerState::Asking => {}
    }
    c[4] += closes;
}

/// The seeded visitors (numbers 1..=n) and their ids under the store's
/// cipher, in number order, encrypted on two threads.
fn numbered_ids(n: i64, cipher: &IdCipher) -> Vec<(i64, i64)> {
    let n = n.max(0) as u64;
    let half = n / 2;
    let pair = |i: u64| (i as i64, cipher.id_of(i));
    let (mut rows, upper) = std::thread::scope(|s| {
        let upper = s.spawn(|| (half + 1..=n).map(pair).collect::<Vec<_>>());
        let lower: Vec<(i64, i64)> = (1..=half).map(pair).collect();
        (lower, upper.join().expect("the id thread ran"))
    });
    rows.extend(upper);
    rows
}

/// The seeded ids in key order, for PostgreSQL (keyed by id).
fn sorted_ids(n: i64, cipher: &IdCipher) -> Vec<i64> {
    let mut ids: Vec<i64> = numbered_ids(n, cipher)
        .into_iter()
        .map(|(_, id)| id)
        .collect();
    ids.sort_unstable();
    ids
}

/// Replaces the sites and every answer with `sites` and the answers of
/// `args.visitors` seeded visitors (visitor `i` is number `i` under
/// `cipher`), in bulk.
pub async fn seed_answers(
    store: &Store,
    args: &SeedInvitesArgs,
    sites: &[Site],
    bar: &ProgressBar,
    cipher: &IdCipher,
) -> anyhow::Result<()> {
    if let Some(s) = store.sqlite() {
        let path = s.path().to_path_buf();
        let (args, sites, bar, cipher) =
            (args.clone(), sites.to_vec(), bar.clone(), cipher.clone());
        return tokio::task::spawn_blocking(move || {
            seed_sqlite(&path, &args, &sites, &bar, &cipher)
        })
        .await?;
    }
    let p = store.postgres().expect("a store not SQLite is PostgreSQL");
    seed_pg(p, args, sites, bar, cipher).await
}

const TABLES: [&str; 3] = ["invites_answers", "invites_counts", "invites_sites"];

/// The bulk load into SQLite: rows in key order on a connection of its
/// own.
fn seed_sqlite(
    path: &std::path::Path,
    args: &SeedInvitesArgs,
    sites: &[Site],
    bar: &ProgressBar,
    cipher: &IdCipher,
) -> anyhow::Result<()> {
    let mut conn = crate::store::sqlite::open_connection(path, 64 * 1024, false)?;
    let existing: i64 = conn.query_row("SELECT COUNT(*) FROM invites_sites", [], |r| r.get(0))?;
    if existing > 0 && !args.force {
        anyhow::bail!(
            "the store holds invitation sites; pass --force to replace them and every answer"
        );
    }
    let now = crate::base::clock::now_ms();
    {
        let tx = conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
        for t in TABLES {
            tx.execute(&format!("DELETE FROM {t}"), [])?;
        }
        tx.execute(
            super::numbers::MARK_KEYS_NUMBERED.sqlite(),
            [KEYS_META, KEYS_NUMBERS],
        )?;
        for (i, s) in sites.iter().enumerate() {
            tx.execute(
                INSERT_SITE,
                rusqlite::params![
                    i as i64 + 1,
                    serde_json::to_string(s)?,
                    s.retention_days,
                    now
                ],
            )?;
        }
        tx.commit()?;
    }
    // Keyed by visitor number (index.rs): already in key order.
    let rows = numbered_ids(args.visitors, cipher);
    let mut counts: SiteCounts = vec![[0; 6]; args.sites as usize];
    conn.execute_batch("PRAGMA synchronous = OFF")?;
    let many = format!(
        "INSERT INTO invites_answers (visitor_id, site_id, state, closes, displays, updated_at_ms) VALUES {}",
        vec!["(?, ?, ?, ?, x'', ?)"; ROWS_PER_INSERT].join(", ")
    );
    for chunk in rows.chunks(ROWS_PER_CHUNK) {
        let tx = conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
        {
            let mut stmt_many = tx.prepare_cached(&many)?;
            let mut one = tx.prepare_cached(
                "INSERT INTO invites_answers (visitor_id, site_id, state, closes, displays, updated_at_ms)
                 VALUES (?, ?, ?, ?, x'', ?)",
            )?;
            let mut params: Vec<i64> = Vec::with_capacity(ROWS_PER_INSERT * 5);
            for group in chunk.chunks(ROWS_PER_INSERT) {
                params.clear();
                for &(key, v) in group {
                    let site = site_of(v, args.sites);
                    let (state, closes) = seeded_standing(v);
                    count(&mut counts, site, state, closes);
                    params.extend_from_slice(&[key, site, state as i64, closes, now]);
                }
                if group.len() == ROWS_PER_INSERT {
                    stmt_many.execute(rusqlite::params_from_iter(params.iter()))?;
                } else {
                    for row in params.chunks(5) {
                        one.execute(rusqlite::params_from_iter(row.iter()))?;
                    }
                }
            }
        }
        tx.commit()?;
        bar.inc(chunk.len() as u64);
    }
    {
        let tx = conn.transaction()?;
        for (i, c) in counts.iter().enumerate() {
            tx.execute(
                INSERT_COUNTS,
                rusqlite::params![i as i64 + 1, c[0], c[1], c[2], c[3], c[4], c[5]],
            )?;
        }
        tx.commit()?;
    }
    conn.execute_batch("PRAGMA synchronous = FULL; PRAGMA wal_checkpoint(TRUNCATE);")?;
    Ok(())
}

/// The bulk load into PostgreSQL: `COPY`,
/// the primary key built after.
async fn seed_pg(
    store: &crate::store::postgres::PgStore,
    args: &SeedInvitesArgs,
    sites: &[Site],
    bar: &ProgressBar,
    cipher: &IdCipher,
) -> anyhow::Result<()> {
    use futures::SinkExt;
    let mut client = store.client().await?;
    let existing: i64 = client
        .query_one("SELECT COUNT(*) FROM invites_sites", &[])
        .await?
        .get(0);
    if existing > 0 && !args.force {
        anyhow::bail!(
            "the store holds invitation sites; pass --force to replace them and every answer"
        );
    }
    let now = crate::base::clock::now_ms();
    let tx = client.transaction().await?;
    // TRUNCATE, not DELETE: 6M rows would leave 6M dead tuples behind.
    tx.batch_execute("TRUNCATE invites_answers, invites_counts, invites_sites")
        .await?;
    for (i, s) in sites.iter().enumerate() {
        tx.execute(
            &crate::store::pg_placeholders(INSERT_SITE),
            &[
                &(i as i64 + 1),
                &serde_json::to_string(s)?,
                &(s.retention_days as i32),
                &now,
            ],
        )
        .await?;
    }
    // The primary key is built once after the load (a sorted build per
    // partition) instead of row by row: both in this transaction.
    tx.batch_execute("ALTER TABLE invites_answers DROP CONSTRAINT invites_answers_pkey")
        .await?;
    let ids = sorted_ids(args.visitors, cipher);
    let mut counts: SiteCounts = vec![[0; 6]; args.sites as usize];
    for chunk in ids.chunks(ROWS_PER_CHUNK) {
        let mut text = String::with_capacity(chunk.len() * 40);
        for &v in chunk {
            use std::fmt::Write;
            let site = site_of(v, args.sites);
            let (state, closes) = seeded_standing(v);
            count(&mut counts, site, state, closes);
            let _ = writeln!(text, "{v}\t{site}\t{}\t{closes}\t{{}}\t{now}", state as i64);
        }
        let sink = tx
            .copy_in(
                "COPY invites_answers (visitor_id, site_id, state, closes, displays, updated_at_ms) FROM STDIN",
            )
            .await?;
        futures::pin_mut!(sink);
        sink.send(bytes::Bytes::from(text)).await?;
        sink.finish().await?;
        bar.inc(chunk.len() as u64);
    }
    bar.set_message("seeding invites: building the primary key");
    tx.batch_execute(
        "ALTER TABLE invites_answers ADD CONSTRAINT invites_answers_pkey PRIMARY KEY (visitor_id, site_id)",
    )
    .await?;
    for (i, c) in counts.iter().enumerate() {
        tx.execute(
            &crate::store::pg_placeholders(INSERT_COUNTS),
            &[&(i as i64 + 1), &c[0], &c[1], &c[2], &c[3], &c[4], &c[5]],
        )
        .await?;
    }
    tx.commit().await?;
    client.batch_execute("ANALYZE invites_answers").await?;
    Ok(())
}
