//! `throng seed invites`: survey sites and the answers of N visitors (the
//! write-up's 6,000,000-row table), bulk-loaded with a progress bar, and the
//! demo site of `serve --demo`.
//!
//! Visitor `i` (1..=N) is visitor number `i` of the store's cipher
//! (`visitor_ids.rs`), as the server mints them: ids look random, never
//! collide, the server holds their standings in memory, and the bench (which
//! reads the store's key) can name known visitors without reading them. The
//! counter moves past them, so the server mints new visitors after them.
//! Rows are inserted in key order (SQLite keys rows by visitor number;
//! PostgreSQL by id, sorted first), so every insert
//! appends to the B-tree's rightmost page. Answers spread over the states
//! as a busy site's would: 10% yes, 40% no, 35% one or two closes, 15%
//! closed out.

use std::time::Instant;

use indicatif::ProgressBar;

use super::model::{AnswerState, Site, SiteInput};
use super::visitor_ids::{self, IdCipher};
use crate::platform::experiment::mix64;
use crate::store::Store;

/// A seeded site (both dialects; `pg_placeholders` for PostgreSQL).
const INSERT_SITE: &str =
    "INSERT INTO invites_sites (site_id, config, retention_days, created_at_ms, updated_at_ms)
     VALUES (?1, ?2, ?3, ?4, ?4)";

/// A seeded site's counts, shard 0 (both dialects).
const INSERT_COUNTS: &str = "INSERT INTO invites_counts
     (site_id, shard, visitors, invited, displays, yes, no, closes, closed_out)
     VALUES (?1, 0, ?2, ?3, ?3, ?4, ?5, ?6, ?7)";

#[derive(Clone, Debug, clap::Args)]
pub struct SeedInvitesArgs {
    /// Visitors with answers.
    #[arg(long, default_value_t = 6_000_000)]
    pub visitors: i64,
    /// Sites (campaigns); visitors are spread over them.
    #[arg(long, default_value_t = 1)]
    pub sites: i64,
    /// The pages' origin every seeded site allows.
    #[arg(long, default_value = "http://localhost:8080")]
    pub origin: String,
    /// Replace the stored sites and answers.
    #[arg(long)]
    pub force: bool,
}

/// Rows per progress step and per transaction.
const ROWS_PER_CHUNK: usize = 250_000;
/// Rows per INSERT statement on SQLite (6 parameters each).
const ROWS_PER_INSERT: usize = 128;
/// Sites a seed makes at most.
const SEED_SITES_MAX: i64 = 1000;

const MASK63: u64 = (1 << 63) - 1;

/// An id the server never mints (the bench's answering visitors): an
/// invertible mix of 63 bits (odd multipliers and xor-shifts modulo 2^63),
/// never 0 for `i >= 1`.
pub fn visitor_id(i: u64) -> i64 {
    let mut z = i & MASK63;
    z = z.wrapping_mul(0x9E37_79B9_7F4A_7C15) & MASK63;
    z ^= z >> 31;
    z = z.wrapping_mul(0xBF58_476D_1CE4_E5B9) & MASK63;
    z ^= z >> 29;
    z = z.wrapping_mul(0x94D0_49BB_1331_11EB) & MASK63;
    z ^= z >> 32;
    z as i64
}

/// The site a seeded visitor answered.
pub fn site_of(visitor: i64, sites: i64) -> i64 {
    1 + (mix64(visitor as u64, 0x5173) % sites as u64) as i64
}

/// A seeded visitor's answers: (state, closes).
pub fn seeded_standing(visitor: i64) -> (AnswerState, i64) {
    let r = mix64(visitor as u64, 0xA115) % 100;
    match r {
        0..=9 => (AnswerState::Yes, 0),
        10..=49 => (AnswerState::No, 0),
        50..=84 => (AnswerState::Asking, 1 + (r % 2) as i64),
        _ => (AnswerState::ClosedOut, 3),
    }
}

pub struct SeedReport {
    pub rows: i64,
    pub elapsed_s: f64,
}

fn site_settings(n: i64, origin: &str) -> anyhow::Result<Site> {
    SiteInput {
        name: Some(format!("Survey {n}")),
        survey_url: Some(format!("https://survey.example/s/{n}")),
        allowed_origins: Some(vec![origin.to_string()]),
        ..Default::default()
    }
    .apply(None)
    .map_err(|e| anyhow::anyhow!("--origin: {}", e.message))
}

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

fn check(args: &SeedInvitesArgs) -> anyhow::Result<()> {
    if args.visitors < 0 || !(1..=SEED_SITES_MAX).contains(&args.sites) {
        anyhow::bail!("--visitors: 0 or more; --sites: 1 to {SEED_SITES_MAX}");
    }
    Ok(())
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

pub async fn seed(
    store: &Store,
    args: &SeedInvitesArgs,
    progress: bool,
) -> anyhow::Result<SeedReport> {
    check(args)?;
    let cipher = visitor_ids::load_cipher(store).await?;
    let sites: Vec<Site> = (1..=args.sites)
        .map(|n| site_settings(n, &args.origin))
        .collect::<anyhow::Result<_>>()?;
    let started = Instant::now();
    let bar = crate::platform::progress::seed_bar(
        args.visitors as u64,
        "rows",
        "seeding invites",
        progress,
    );
    super::store::open(store)
        .seed_answers(args, &sites, &bar, &cipher)
        .await?;
    bar.finish();
    // New visitors are numbered after the seeded ones.
    let next = visitor_ids::reserved_end(store)
        .await?
        .max(args.visitors as u64 + 1);
    store
        .meta_set(visitor_ids::NEXT_META, &next.to_string())
        .await?;
    store
        .meta_set(
            super::index::ANSWERS_GENERATION_KEY,
            &uuid::Uuid::new_v4().to_string(),
        )
        .await?;
    store
        .meta_set(
            super::sites::SITES_GENERATION_KEY,
            &uuid::Uuid::new_v4().to_string(),
        )
        .await?;
    Ok(SeedReport {
        rows: args.visitors,
        elapsed_s: started.elapsed().as_secs_f64(),
    })
}

const TABLES: [&str; 3] = ["invites_answers", "invites_counts", "invites_sites"];

/// The bulk load into SQLite (`InvitesStore::seed_answers`): rows in key
/// order on a connection of its own.
pub(super) fn seed_sqlite(
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
        super::index::mark_keys_numbered(&tx)?;
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

/// The bulk load into PostgreSQL (`InvitesStore::seed_answers`): `COPY`,
/// the primary key built after.
pub(super) async fn seed_pg(
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

/// The demo sites: same-origin, every visitor invited, the survey a page of
/// throng's own; one per way of asking (`/invites/demo?site=N` picks one):
/// 1 a modal at once, 2 a slide-in after 3 s, 3 a modal once half the page
/// is scrolled, 4 a slide-in on exit intent.
pub async fn seed_demo_if_empty(store: &Store) -> anyhow::Result<()> {
    use super::model::{Style, Trigger};
    let storage = super::store::open(store);
    if !storage.load_sites().await?.is_empty() {
        return Ok(());
    }
    let demos = [
        ("Demo survey", Trigger::Load, Style::Modal),
        (
            "Demo survey: slide-in after 3 s",
            Trigger::Delay,
            Style::SlideIn,
        ),
        (
            "Demo survey: modal after half the page",
            Trigger::Scroll,
            Style::Modal,
        ),
        (
            "Demo survey: slide-in on exit intent",
            Trigger::ExitIntent,
            Style::SlideIn,
        ),
    ];
    for (n, (name, trigger, style)) in demos.into_iter().enumerate() {
        let site = SiteInput {
            name: Some(name.into()),
            survey_url: Some("/invites/demo/survey".into()),
            allowed_origins: Some(Vec::new()),
            trigger: Some(trigger),
            delay_seconds: Some(3),
            scroll_percent: Some(50),
            style: Some(style),
            ..Default::default()
        }
        .apply(None)
        .map_err(|e| anyhow::anyhow!("the demo site: {}", e.message))?;
        storage
            .create_site(&site, crate::base::clock::now_ms(), n as i64 + 1)
            .await?;
    }
    tracing::info!("seeded the invites demo sites (ids 1 to 4)");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seeded_ids_are_distinct_positive_and_spread() {
        let mut ids: Vec<i64> = (1..=200_000u64).map(visitor_id).collect();
        assert!(ids.iter().all(|&v| v > 0));
        ids.sort_unstable();
        ids.dedup();
        assert_eq!(ids.len(), 200_000);
        // Spread over the whole range, not clustered near small numbers.
        let high = ids.iter().filter(|&&v| v > (1i64 << 62)).count();
        assert!((80_000..120_000).contains(&high), "{high}");
    }
}
