//! `throng seed invites`: survey sites and the answers of N visitors (the
//! write-up's 6,000,000-row table), bulk-loaded with a progress bar, and the
//! demo site of `serve --demo`.
//!
//! Visitor `i` (1..=N) is visitor number `i` of the store's cipher
//! (`visitor_ids.rs`), as the server mints them: ids look random, never
//! collide, the server holds their standings in memory, and the bench (which
//! reads the store's key) can name known visitors without reading them. The
//! counter moves past them, so the server mints new visitors after them.
//! Rows are loaded in key order (by visitor number where standings are
//! kept in memory, else by id, sorted first), so every insert appends to
//! the B-tree's rightmost page. Answers spread over the states
//! as a busy site's would: 10% yes, 40% no, 35% one or two closes, 15%
//! closed out.

use std::time::Instant;

use indicatif::ProgressBar;

use super::model::{AnswerState, Site, SiteInput};
use super::store::Standings;
use super::visitor_ids::{self, IdCipher};
use crate::platform::mix::mix64;
use crate::store::bulk::BulkTable;
use crate::store::{Sql, Store};

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

/// The page patterns seeded sites exclude.
pub const SEEDED_PAGES_EXCLUDED: [&str; 2] = ["/checkout/*", "/account/*"];

fn site_settings(n: i64, origin: &str) -> anyhow::Result<Site> {
    SiteInput {
        name: Some(format!("Survey {n}")),
        survey_url: Some(format!("https://survey.example/s/{n}")),
        allowed_origins: Some(vec![origin.to_string()]),
        // A shop's rules: never on its checkout or account pages (the
        // bench's checks name pages, some of them excluded).
        pages_exclude: Some(SEEDED_PAGES_EXCLUDED.map(String::from).to_vec()),
        ..Default::default()
    }
    .apply(None)
    .map_err(|e| anyhow::anyhow!("--origin: {}", e.message))
}

fn check(args: &SeedInvitesArgs) -> anyhow::Result<()> {
    if args.visitors < 0 || !(1..=SEED_SITES_MAX).contains(&args.sites) {
        anyhow::bail!("--visitors: 0 or more; --sites: 1 to {SEED_SITES_MAX}");
    }
    Ok(())
}

/// The seed's tables, each row's columns in order.
static SITES: BulkTable = BulkTable {
    name: "invites_sites",
    columns: &[
        "site_id",
        "config",
        "retention_days",
        "created_at_ms",
        "updated_at_ms",
    ],
    analyze: false,
};
static ANSWERS: BulkTable = BulkTable {
    name: "invites_answers",
    columns: &[
        "visitor_id",
        "site_id",
        "state",
        "closes",
        "displays",
        "updated_at_ms",
    ],
    analyze: false,
};
static COUNTS: BulkTable = BulkTable {
    name: "invites_counts",
    columns: &[
        "site_id",
        "shard",
        "visitors",
        "invited",
        "displays",
        "yes",
        "no",
        "closes",
        "closed_out",
    ],
    analyze: false,
};
static TABLES: &[&BulkTable] = &[&ANSWERS, &COUNTS, &SITES];

/// PostgreSQL's planner statistics for the answers. SQLite keeps none, as
/// before the loader: with STAT4, statements whose plan may depend on bound
/// values are re-prepared every run, and every invites statement is a
/// primary-key lookup.
static GATHER_STATISTICS: Sql = Sql::per_dialect("", "ANALYZE invites_answers");

/// Rows per progress step and per send.
const ROWS_PER_CHUNK: usize = 250_000;

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

/// The seeded visitors' keys in key order: where standings are kept in
/// memory rows are keyed by number (1..=n, already in order); else by id
/// (number `i`'s id under the store's cipher), sorted. Encrypted on two
/// threads.
fn seeded_keys(n: i64, cipher: &IdCipher, by_number: bool) -> Vec<(i64, i64)> {
    let n = n.max(0) as u64;
    let half = n / 2;
    let pair = |i: u64| (i as i64, cipher.id_of(i));
    let (mut rows, upper) = std::thread::scope(|s| {
        let upper = s.spawn(|| (half + 1..=n).map(pair).collect::<Vec<_>>());
        let lower: Vec<(i64, i64)> = (1..=half).map(pair).collect();
        (lower, upper.join().expect("the id thread ran"))
    });
    rows.extend(upper);
    if !by_number {
        rows.sort_unstable_by_key(|&(_, id)| id);
    }
    rows
}

/// Replaces the sites and every answer with `sites` and the answers of
/// `args.visitors` seeded visitors, in bulk (`Store::bulk_load`).
async fn load(
    store: &Store,
    args: &SeedInvitesArgs,
    sites: &[Site],
    bar: &ProgressBar,
    cipher: &IdCipher,
) -> anyhow::Result<()> {
    if !args.force && !super::store::load_sites(store).await?.is_empty() {
        anyhow::bail!(
            "the store holds invitation sites; pass --force to replace them and every answer"
        );
    }
    let by_number = Standings::in_memory(store.writers());
    let keys = seeded_keys(args.visitors, cipher, by_number);
    let now = crate::base::clock::now_ms();
    let mut load = store.bulk_load(TABLES).await?;
    if by_number {
        // The tables are empty now: whatever rows follow are keyed by number.
        store
            .meta_set(super::index::KEYS_META, super::index::KEYS_NUMBERS)
            .await?;
    }
    let mut rows = load.rows(&SITES, sites.len(), 512);
    for (i, s) in sites.iter().enumerate() {
        rows.row()
            .int8(i as i64 + 1)
            .text(&serde_json::to_string(s)?)
            .int4(i32::try_from(s.retention_days)?)
            .int8(now)
            .int8(now);
    }
    load.send(rows).await?;
    let mut counts: SiteCounts = vec![[0; 6]; args.sites as usize];
    for chunk in keys.chunks(ROWS_PER_CHUNK) {
        let mut rows = load.rows(&ANSWERS, chunk.len(), 64);
        for &(number, id) in chunk {
            let site = site_of(id, args.sites);
            let (state, closes) = seeded_standing(id);
            count(&mut counts, site, state, closes);
            rows.row()
                .int8(if by_number { number } else { id })
                .int8(site)
                .int2(state as i16)
                .int2(closes as i16)
                .int8_array(&[])
                .int8(now);
        }
        load.send(rows).await?;
        bar.inc(chunk.len() as u64);
    }
    let mut rows = load.rows(&COUNTS, counts.len(), 128);
    for (i, c) in counts.iter().enumerate() {
        rows.row()
            .int8(i as i64 + 1)
            .int4(0)
            .int8(c[0])
            .int8(c[1])
            .int8(c[1])
            .int8(c[2])
            .int8(c[3])
            .int8(c[4])
            .int8(c[5]);
    }
    load.send(rows).await?;
    bar.set_message("seeding invites: building the indexes");
    load.finish().await?;
    store
        .read_blocking(|c| Box::pin(c.batch(&GATHER_STATISTICS)))
        .await?;
    Ok(())
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
    load(store, args, &sites, &bar, &cipher).await?;
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

/// The demo sites: same-origin, every visitor invited, the survey a page of
/// throng's own; one per way of asking (`/invites/demo?site=N` picks one):
/// 1 a modal at once, 2 a slide-in after 3 s, 3 a modal once half the page
/// is scrolled, 4 a slide-in on exit intent.
pub async fn seed_demo_if_empty(store: &Store) -> anyhow::Result<()> {
    use super::model::{Style, Trigger};
    if !super::store::load_sites(store).await?.is_empty() {
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
        super::store::create_site(store, &site, crate::base::clock::now_ms(), n as i64 + 1).await?;
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
