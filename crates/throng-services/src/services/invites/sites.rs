//! The sites every node keeps in memory (few, small, read on every request)
//! with the counts gathered since the last flush, and the workers: the
//! flusher of those counts, the reload when another node changed a site
//! (a generation in `meta`, as a seed), and the retention purge.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use arc_swap::ArcSwap;

use super::model::{Site, Targeting};
use super::store::{self as storage, DayCounts, InvitesStore, SiteRow};
use crate::base::clock::Clock;
use crate::store::Store;

/// `meta` key bumped by every change of a site; nodes watch it and reload.
pub const SITES_GENERATION_KEY: &str = "invites_sites_generation";

/// Counts gathered in memory between flushes (a state check writes nothing).
#[derive(Default)]
pub struct Seen {
    /// First visits (new visitor ids made).
    pub visitors: AtomicI64,
    /// First visits sampled in.
    pub invited: AtomicI64,
    /// Popups shown.
    pub displays: AtomicI64,
    /// Shown, yes, no and closed by day and page since the last flush.
    pub daily: Mutex<Daily>,
}

/// Distinct pages a node counts per site and day; the rest are counted
/// under [`OTHER_PAGE`] (a site's results stay bounded whatever paths its
/// pages send).
pub const PAGES_PER_DAY_MAX: usize = 500;
/// Where pages past [`PAGES_PER_DAY_MAX`] are counted.
pub const OTHER_PAGE: &str = "(other)";
/// Where checks and answers that named no page are counted.
pub const NO_PAGE: &str = "(none)";

/// Which of a day's counts an event adds to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Tally {
    Shown = 0,
    Yes = 1,
    No = 2,
    Closed = 3,
}

/// Counts by day, then page.
type DayPages = HashMap<i32, HashMap<Box<str>, DayCounts>>;

/// A site's counts by day and page gathered since the last flush, and the
/// pages this node has counted today.
#[derive(Default)]
pub struct Daily {
    /// By day, then page.
    counts: DayPages,
    pages_day: i32,
    pages: HashSet<Box<str>>,
}

impl Daily {
    /// Counts one event on `day` for `page` (a path, or `None`).
    pub fn add(&mut self, day: i32, page: Option<&str>, tally: Tally) {
        if day != self.pages_day {
            self.pages_day = day;
            self.pages.clear();
        }
        let mut page = page.unwrap_or(NO_PAGE);
        if !self.pages.contains(page) {
            if self.pages.len() >= PAGES_PER_DAY_MAX {
                page = OTHER_PAGE;
            } else {
                self.pages.insert(page.into());
            }
        }
        let pages = self.counts.entry(day).or_default();
        let counts = match pages.get_mut(page) {
            Some(c) => c,
            None => pages.entry(page.into()).or_default(),
        };
        counts[tally as usize] += 1;
    }

    fn take(&mut self) -> DayPages {
        std::mem::take(&mut self.counts)
    }

    fn add_back(&mut self, counts: DayPages) {
        for (day, pages) in counts {
            let into = self.counts.entry(day).or_default();
            for (page, v) in pages {
                let c = into.entry(page).or_default();
                for (sum, n) in c.iter_mut().zip(v) {
                    *sum += n;
                }
            }
        }
    }
}

impl Seen {
    /// Counts one event of the site's day and page.
    pub fn tally(&self, day: i32, page: Option<&str>, tally: Tally) {
        if let Ok(mut d) = self.daily.lock() {
            d.add(day, page, tally);
        }
    }
}

pub struct SiteEntry {
    pub row: SiteRow,
    pub seen: Arc<Seen>,
    /// `,"popup":{..},"trigger":..,"delaySeconds":..,"scrollPercent":..,
    /// "style":..`, rendered once: the part of a state answer that shows
    /// the popup, the same for every visitor (the survey URL aside: a path
    /// is made absolute per request, see `survey_url`).
    pub show_json: String,
    /// The site's page and device rules, compiled once.
    pub targeting: Targeting,
}

impl SiteEntry {
    pub fn site(&self) -> &Site {
        &self.row.site
    }

    /// An invitation's survey link: [`SiteEntry::survey_url`] with its
    /// placeholders filled in: `{visitor}` the visitor's numeric id (the
    /// one `DELETE /api/invites/visitors/{id}` takes), `{display}` the
    /// invitation's displayId, `{page}` the page's path (percent-encoded;
    /// empty without one), `{site}` the site's id. So the survey's answers
    /// join to the invitations.
    pub fn survey_link(
        &self,
        base: &str,
        visitor_id: i64,
        display: &str,
        page: Option<&str>,
    ) -> String {
        let url = self.survey_url(base);
        if !url.contains('{') {
            return url;
        }
        url.replace("{visitor}", itoa::Buffer::new().format(visitor_id))
            .replace("{display}", &percent_encode(display))
            .replace("{page}", &percent_encode(page.unwrap_or("")))
            .replace("{site}", itoa::Buffer::new().format(self.row.site_id))
    }

    /// The survey URL as answers give it: absolute, a `/path` on this
    /// server resolved against `base` (the public URL).
    pub fn survey_url(&self, base: &str) -> String {
        let u = &self.row.site.survey_url;
        if u.starts_with('/') {
            format!("{base}{u}")
        } else {
            u.clone()
        }
    }
}

/// Every byte but an unreserved one (`A-Z a-z 0-9 - . _ ~`) as `%XX`.
pub fn percent_encode(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for b in text.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(b as char);
        } else {
            const HEX: &[u8; 16] = b"0123456789ABCDEF";
            out.push('%');
            out.push(HEX[(b >> 4) as usize] as char);
            out.push(HEX[(b & 15) as usize] as char);
        }
    }
    out
}

#[derive(Default)]
pub struct Sites {
    by_id: HashMap<i64, Arc<SiteEntry>>,
}

impl Sites {
    pub fn get(&self, id: i64) -> Option<&Arc<SiteEntry>> {
        self.by_id.get(&id)
    }

    pub fn len(&self) -> usize {
        self.by_id.len()
    }

    pub fn is_empty(&self) -> bool {
        self.by_id.is_empty()
    }

    /// In id order.
    pub fn list(&self) -> Vec<Arc<SiteEntry>> {
        let mut v: Vec<_> = self.by_id.values().cloned().collect();
        v.sort_by_key(|e| e.row.site_id);
        v
    }

    /// The sites from the store; each keeps `old`'s counts not yet flushed.
    pub async fn load(store: &Store, old: Option<&Sites>) -> anyhow::Result<Sites> {
        let rows = storage::load_sites(store).await?;
        let by_id = rows
            .into_iter()
            .map(|row| {
                let seen = old
                    .and_then(|o| o.by_id.get(&row.site_id))
                    .map(|e| e.seen.clone())
                    .unwrap_or_default();
                let site = &row.site;
                let show_json = format!(
                    ",\"popup\":{},\"trigger\":\"{}\",\"delaySeconds\":{},\"scrollPercent\":{},\"style\":\"{}\"",
                    serde_json::to_string(&site.texts).expect("texts serialize"),
                    site.trigger.name(),
                    site.delay_seconds,
                    site.scroll_percent,
                    site.style.name()
                );
                (
                    row.site_id,
                    Arc::new(SiteEntry {
                        targeting: Targeting::compile(&row.site),
                        row,
                        seen,
                        show_json,
                    }),
                )
            })
            .collect();
        Ok(Sites { by_id })
    }
}

/// Reloads `sites` from the store now (after this node changed a site) and
/// bumps the generation so other nodes reload too.
pub async fn reload_and_announce(store: &Store, sites: &ArcSwap<Sites>) -> anyhow::Result<()> {
    let generation = uuid::Uuid::new_v4().to_string();
    store.meta_set(SITES_GENERATION_KEY, &generation).await?;
    let fresh = Sites::load(store, Some(&sites.load())).await?;
    sites.store(Arc::new(fresh));
    Ok(())
}

/// Writes the counts gathered in memory every `interval`; on failure they
/// are added back and written at the next flush.
pub fn spawn_flusher(
    store: Store,
    sites: Arc<ArcSwap<Sites>>,
    shard: i32,
    interval: Duration,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        loop {
            tokio::time::sleep(interval).await;
            flush(&store, &sites, shard).await;
        }
    })
}

/// Flushes the gathered counts once (also on shutdown of tests' servers).
pub async fn flush(store: &Store, sites: &ArcSwap<Sites>, shard: i32) {
    let current = sites.load();
    let mut taken = Vec::new();
    for e in current.by_id.values() {
        let v = e.seen.visitors.swap(0, Ordering::AcqRel);
        let i = e.seen.invited.swap(0, Ordering::AcqRel);
        let d = e.seen.displays.swap(0, Ordering::AcqRel);
        if v != 0 || i != 0 || d != 0 {
            taken.push((e.clone(), v, i, d));
        }
    }
    flush_daily(store, &current, shard).await;
    if taken.is_empty() {
        return;
    }
    let deltas = taken
        .iter()
        .map(|(e, v, i, d)| (e.row.site_id, *v, *i, *d))
        .collect();
    if let Err(e) = storage::add_seen(store, shard, deltas).await {
        tracing::warn!(error = %e, "invites: could not write the counts; kept for the next flush");
        for (e, v, i, d) in taken {
            e.seen.visitors.fetch_add(v, Ordering::AcqRel);
            e.seen.invited.fetch_add(i, Ordering::AcqRel);
            e.seen.displays.fetch_add(d, Ordering::AcqRel);
        }
    }
}

/// Writes the counts by day and page gathered in memory; on failure they
/// are added back for the next flush.
async fn flush_daily(store: &Store, sites: &Sites, shard: i32) {
    let mut taken = Vec::new();
    for e in sites.by_id.values() {
        let counts = match e.seen.daily.lock() {
            Ok(mut d) => d.take(),
            Err(_) => continue,
        };
        if !counts.is_empty() {
            taken.push((e.clone(), counts));
        }
    }
    if taken.is_empty() {
        return;
    }
    let deltas = taken
        .iter()
        .flat_map(|(e, counts)| {
            counts.iter().flat_map(move |(day, pages)| {
                pages
                    .iter()
                    .map(move |(page, c)| (e.row.site_id, *day, page.to_string(), *c))
            })
        })
        .collect();
    if let Err(err) = storage::add_daily(store, shard, deltas).await {
        tracing::warn!(error = %err, "invites: could not write the daily counts; kept for the next flush");
        for (e, counts) in taken {
            if let Ok(mut d) = e.seen.daily.lock() {
                d.add_back(counts);
            }
        }
    }
}

/// Purges answers older than each site's retention, every `interval`
/// (first after a tenth of it, at most a minute). Every node may run it:
/// deleting a row twice deletes it once.
pub fn spawn_purger(
    storage: InvitesStore,
    sites: Arc<ArcSwap<Sites>>,
    clock: Clock,
    interval: Duration,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        tokio::time::sleep((interval / 10).min(Duration::from_secs(60))).await;
        loop {
            purge_once(&storage, &sites, &clock).await;
            tokio::time::sleep(interval).await;
        }
    })
}

pub async fn purge_once(storage: &InvitesStore, sites: &ArcSwap<Sites>, clock: &Clock) {
    let now = clock.now_ms();
    for e in sites.load().list() {
        let before = now - e.site().retention_days * 86_400_000;
        match storage.purge_before(e.row.site_id, before).await {
            Ok(0) => {}
            Ok(n) => tracing::info!(
                site_id = e.row.site_id,
                purged = n,
                "invites: purged answers past the site's retention"
            ),
            Err(err) => {
                tracing::warn!(site_id = e.row.site_id, error = %err, "invites: retention purge failed; retried at the next round")
            }
        }
    }
}
