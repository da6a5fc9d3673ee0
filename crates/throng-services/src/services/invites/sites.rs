//! The sites every node keeps in memory (few, small, read on every request)
//! with the counts gathered since the last flush, and the workers: the
//! flusher of those counts, the reload when another node changed a site
//! (a generation in `meta`, as a seed), and the retention purge.

use std::collections::HashMap;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use arc_swap::ArcSwap;

use super::model::Site;
use super::store::{self as storage, InvitesStore, SiteRow};
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
}

pub struct SiteEntry {
    pub row: SiteRow,
    pub seen: Arc<Seen>,
    /// `,"popup":{..},"trigger":..,"delaySeconds":..,"scrollPercent":..,
    /// "style":..`, rendered once: the part of a state answer that shows
    /// the popup, the same for every visitor (the survey URL aside: a path
    /// is made absolute per request, see `survey_url`).
    pub show_json: String,
}

impl SiteEntry {
    pub fn site(&self) -> &Site {
        &self.row.site
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

/// Purges answers older than each site's retention, every `interval`
/// (first after a tenth of it, at most a minute). Every node may run it:
/// deleting a row twice deletes it once.
pub fn spawn_purger(
    storage: InvitesStore,
    sites: Arc<ArcSwap<Sites>>,
    interval: Duration,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        tokio::time::sleep((interval / 10).min(Duration::from_secs(60))).await;
        loop {
            purge_once(&storage, &sites).await;
            tokio::time::sleep(interval).await;
        }
    })
}

pub async fn purge_once(storage: &InvitesStore, sites: &ArcSwap<Sites>) {
    let now = crate::base::clock::now_ms();
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
