//! `throng bench invites`: the survey write-up's measurements on its data set
//! (6,000,000 visitors' answers), each as a ratio to `GET /health` in the
//! same run:
//! - the state check of a known visitor (a signed id, one point lookup on
//!   the 6M rows): the write-up's 4,300 point queries/s and 1,500 req/s;
//! - an answer (a durable write: a new visitor's first answer, yes, no or
//!   close in turn): its 1,300 single-row inserts/s;
//! - a first visit (no visitor id: a new one is made and signed; no read).
//!
//! Requests carry visitor ids signed with the server's key, derived from the
//! token secret in the data directory (`prepare`), as the script would send
//! the ids the server gave it. Known visitors are drawn from the seeded
//! ones (numbers 1..=N under the store's cipher, read in `offline`):
//! `KNOWN_VISITORS_SIGNED` of them at random, signed before the runs, as
//! browsers keep their ids (`KnownChecks`).
//! Answers come from new visitors, one per request, so every answer is a
//! first answer (200): on SQLite visitor numbers the bench reserves past the
//! seeded ones before the server starts, as the server reserves them for
//! the first visits it mints (a visitor answers a popup its first visit
//! showed); on PostgreSQL, whose nodes mint random ids, random ids
//! ([`seed::visitor_id`] past the seeded range).

pub mod baseline;

use std::sync::{Arc, OnceLock};

use bytes::Bytes;
use throng_load::measure::RequestSpec;

use crate::experiment::{mix64, Experiment, Scale, Workload};
use crate::services::invites::seed::{site_of, visitor_id};
use crate::services::invites::signed::{Signer, Visitor, KEY_PURPOSE, VISITOR_CHARS};
use crate::services::invites::visitor_ids::IdCipher;

#[derive(Default)]
pub struct InvitesBench {
    signer: OnceLock<Signer>,
    /// The store's visitor-id cipher, read after seeding (`offline`): the
    /// known visitors are the seeded numbers under it.
    cipher: OnceLock<IdCipher>,
    /// The first of `ANSWERING_VISITORS` visitor numbers reserved for the
    /// answers (SQLite; none on PostgreSQL).
    answering_from: OnceLock<Option<u64>>,
}

/// Visitor numbers reserved for the answer workloads: more than every
/// answer of one bench at the defaults (~30,000/s x 33 s for ours).
const ANSWERING_VISITORS: u64 = 4_000_000;

/// (visitors, sites).
fn size(scale: Scale) -> (i64, i64) {
    match scale {
        Scale::Full => (6_000_000, 1),
        Scale::Quick => (200_000, 1),
    }
}

/// Pages of a known visitor's checks in `1 / EXCLUDED_PAGE_EVERY`: the
/// seeded sites' excluded checkout (the rest are product pages).
const EXCLUDED_PAGE_EVERY: u64 = 8;
/// Product pages the checks name.
const PRODUCT_PAGES: u64 = 1000;

/// The page check `seq` names: a product page (`0..PRODUCT_PAGES`), and
/// every `EXCLUDED_PAGE_EVERY`th the checkout (`PRODUCT_PAGES`).
fn page_of(seq: u64) -> usize {
    if seq.is_multiple_of(EXCLUDED_PAGE_EVERY) {
        PRODUCT_PAGES as usize
    } else {
        (seq % PRODUCT_PAGES) as usize
    }
}

/// The query a check of page `page` (`page_of`) sends, as the snippet
/// does: the checkout the seeded sites exclude, or a product page.
fn page_query(page: usize) -> String {
    if page as u64 == PRODUCT_PAGES {
        "?page=%2Fcheckout%2Fpay&device=desktop".into()
    } else {
        format!("?page=%2Fshop%2Fitem-{page}&device=phone")
    }
}

fn state_path(site: i64, page: usize) -> String {
    format!("/api/invites/sites/{site}/state{}", page_query(page))
}

/// Known visitors signed at most once per bench: `KNOWN_VISITORS_SIGNED`
/// of the seeded visitors, drawn at random.
const KNOWN_VISITORS_SIGNED: u64 = 1 << 20;

/// The known visitors' checks, built before the runs: a browser keeps the
/// signed id the server gave it and sends it back, so the load generator
/// does not sign one per request (that would be the generator's cost, on
/// the cores the server runs on). Each site's check paths are made once.
struct KnownChecks {
    /// Each drawn visitor's site.
    sites: Vec<i64>,
    /// Each drawn visitor's signed id, `VISITOR_CHARS` characters each.
    signed: String,
    /// `paths[site - 1][page]`.
    paths: Vec<Vec<String>>,
}

impl KnownChecks {
    /// `draws` visitors, the `j`th numbered `1 + mix64(j) % visitors` under
    /// the store's cipher.
    fn new(signer: &Signer, cipher: &IdCipher, visitors: i64, sites: i64, draws: u64) -> Self {
        let mut checks = KnownChecks {
            sites: Vec::with_capacity(draws as usize),
            signed: String::with_capacity(draws as usize * VISITOR_CHARS),
            paths: (1..=sites)
                .map(|site| {
                    (0..=PRODUCT_PAGES as usize)
                        .map(|page| state_path(site, page))
                        .collect()
                })
                .collect(),
        };
        for j in 0..draws {
            let visitor = cipher.id_of(1 + mix64(j, 0x5EED) % visitors as u64);
            let site = site_of(visitor, sites);
            checks.sites.push(site);
            checks.signed.push_str(&signer.sign_visitor(
                site,
                Visitor {
                    id: visitor,
                    sampled: true,
                },
            ));
        }
        checks
    }

    /// Check `seq`: a drawn visitor at random, on page `page_of(seq)`.
    fn request(&self, seq: u64) -> RequestSpec {
        let j = (mix64(seq, 0xC4EC) % self.sites.len() as u64) as usize;
        let site = self.sites[j];
        let mut r = RequestSpec::get(self.paths[(site - 1) as usize][page_of(seq)].clone());
        r.headers.push((
            "x-invites-visitor".into(),
            self.signed[j * VISITOR_CHARS..(j + 1) * VISITOR_CHARS].to_string(),
        ));
        r
    }
}

fn answer_request(
    signer: &Signer,
    prefix: &str,
    visitor: i64,
    sites: i64,
    seq: u64,
) -> RequestSpec {
    let site = site_of(visitor, sites);
    let display = signer.sign_display(site, visitor, mix64(seq, 0xD15) as i64);
    let answer = ["close", "no", "yes"][(seq % 3) as usize];
    RequestSpec {
        method: http::Method::POST,
        path_and_query: format!("{prefix}/sites/{site}/answers"),
        headers: vec![
            ("content-type".into(), "application/json".into()),
            (
                "x-invites-visitor".into(),
                signer.sign_visitor(
                    site,
                    Visitor {
                        id: visitor,
                        sampled: true,
                    },
                ),
            ),
        ],
        body: Bytes::from(format!(
            "{{\"answer\":\"{answer}\",\"displayId\":\"{display}\"}}"
        )),
    }
}

impl Experiment for InvitesBench {
    fn name(&self) -> &'static str {
        "invites"
    }
    fn about(&self) -> &'static str {
        "survey invitations: state checks of known visitors, answers, first visits on 6M visitors"
    }
    fn seed_args(&self, scale: Scale) -> Vec<String> {
        let (visitors, sites) = size(scale);
        vec![
            "invites".into(),
            "--visitors".into(),
            visitors.to_string(),
            "--sites".into(),
            sites.to_string(),
        ]
    }
    fn comparison_services(&self) -> Vec<&'static dyn crate::platform::service::AnyService> {
        vec![&baseline::InvitesBaseline]
    }
    fn offline(
        &self,
        store: &crate::store::StoreUrl,
        _scale: Scale,
    ) -> anyhow::Result<Vec<String>> {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        let cipher = rt.block_on(async {
            let store =
                crate::store::Store::open(store, crate::store::StoreLimits::default()).await?;
            let cipher = crate::services::invites::visitor_ids::load_cipher(&store).await?;
            let answering_from = crate::services::invites::store::reserve_visitor_numbers(
                &store,
                ANSWERING_VISITORS,
            )
            .await?;
            anyhow::Ok((cipher, answering_from))
        })?;
        let _ = self.cipher.set(cipher.0);
        let _ = self.answering_from.set(cipher.1);
        Ok(Vec::new())
    }
    fn prepare(
        &self,
        data_dir: &std::path::Path,
        _server: std::net::SocketAddr,
    ) -> anyhow::Result<()> {
        let secrets = crate::platform::secrets::Secrets::load_or_create(data_dir)?;
        let keys = crate::platform::auth::TokenKeys::new(&secrets.token_secret);
        let _ = self.signer.set(Signer::new(keys.derive(KEY_PURPOSE)));
        Ok(())
    }
    fn workloads(&self, scale: Scale) -> Vec<Workload> {
        let (visitors, sites) = size(scale);
        let signer = self
            .signer
            .get()
            .expect("prepare() runs before workloads()")
            .clone();
        let cipher = self
            .cipher
            .get()
            .expect("offline() runs before workloads()")
            .clone();
        let known = {
            let draws = KNOWN_VISITORS_SIGNED.min(visitors as u64);
            let checks = KnownChecks::new(&signer, &cipher, visitors, sites, draws);
            Arc::new(move |seq: u64| checks.request(seq))
        };
        // One new visitor per answer; the counter is shared by the warm-up
        // and every run (the harness restarts seq).
        let next = Arc::new(std::sync::atomic::AtomicU64::new(0));
        let answering_from = *self
            .answering_from
            .get()
            .expect("offline() runs before workloads()");
        let answers_at = |prefix: &'static str| {
            let (signer, next, cipher) = (signer.clone(), next.clone(), cipher.clone());
            Arc::new(move |seq: u64| {
                let k = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let visitor = match answering_from {
                    Some(from) => cipher.id_of(from + k),
                    None => visitor_id(visitors as u64 + 1 + k),
                };
                answer_request(&signer, prefix, visitor, sites, seq)
            })
        };
        let answers = answers_at("/api/invites");
        let baseline_answers = answers_at("/api/invites/baseline");
        let first_visits = Arc::new(move |seq: u64| {
            let site = 1 + (seq % sites as u64) as i64;
            RequestSpec::get(state_path(site, page_of(seq)))
        });
        vec![
            Workload {
                name: "GET state, known visitor, page rules (6M rows)".into(),
                factory: known,
                ok_statuses: vec![200],
                target_ratio_min: Some(0.8),
                published: "4,300 point queries/s (SQL Server Express, 6M rows); 1,500 req/s HTTP"
                    .into(),
                comparison: false,
                ..Workload::default()
            },
            Workload {
                name: "POST answer (durable write)".into(),
                factory: answers,
                ok_statuses: vec![200],
                target_ratio_min: Some(0.4),
                published: "1,300 single-row inserts/s (SQL Server Express)".into(),
                comparison: false,
                ..Workload::default()
            },
            Workload {
                name: "GET state, first visit (new id)".into(),
                factory: first_visits,
                ok_statuses: vec![200],
                target_ratio_min: None,
                published: "1,500 req/s (ASP.NET handler answering one byte)".into(),
                comparison: false,
                ..Workload::default()
            },
            Workload {
                name: "write-up's design: POST answer, a transaction each".into(),
                factory: baseline_answers,
                ok_statuses: vec![200],
                target_ratio_min: None,
                published: "1,300 single-row inserts/s (one connection, sequential)".into(),
                comparison: true,
                ..Workload::default()
            },
        ]
    }
    fn rss_mib_max(&self, scale: Scale) -> Option<f64> {
        (scale == Scale::Full).then_some(64.0)
    }
    fn notes(&self) -> Vec<String> {
        vec![
            "write-up: a two-year-old AMD dual-core laptop, 3 GB RAM, 7200 rpm disk; SQL Server 2008 R2 \
             Express; 10 threads x 1,000 sequential calls; a table of (Id bigint, Response tinyint), 6M rows \
             with a clustered index; the production target was 300-400 req/s, 800-1,000 at peak"
                .into(),
            "here: one process, the load generator beside it; a known visitor's check names its page \
             (one in 8 the checkout the seeded sites exclude, matched by the site's patterns compiled in \
             memory) and is a signed-id check and the visitor's standing (memory on SQLite, one point \
             lookup in the 6M-row table on PostgreSQL); an answer is one durable write (group \
             commit, fsync before the answer) with the site's counts in the same transaction"
                .into(),
            "write-up's design (invites/baseline.rs, same server and data, on the bench's child servers only): the \
             same checks and SQL, but each answer commits alone on a connection of its own (SQLite: \
             one connection behind a mutex, an fsync per answer; PostgreSQL: its own transaction)"
                .into(),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_carry_genuine_ids() {
        let s = Signer::new([3; 32]);
        let r = answer_request(&s, "/api/invites", visitor_id(7), 4, 11);
        let site = site_of(visitor_id(7), 4);
        assert!(r.path_and_query.contains(&format!("/sites/{site}/")));
        let signed = &r
            .headers
            .iter()
            .find(|h| h.0 == "x-invites-visitor")
            .unwrap()
            .1;
        assert_eq!(s.verify_visitor(site, signed).unwrap().id, visitor_id(7));
        let body: serde_json::Value = serde_json::from_slice(&r.body).unwrap();
        let display = body["displayId"].as_str().unwrap();
        assert!(s.verify_display(site, visitor_id(7), display).is_some());
    }

    #[test]
    fn known_checks_carry_genuine_ids_and_the_pages() {
        let s = Signer::new([3; 32]);
        let cipher = IdCipher::new([5; 16]);
        let checks = KnownChecks::new(&s, &cipher, 1000, 4, 64);
        for seq in 0..64 {
            let r = checks.request(seq);
            let signed = &r.headers[0].1;
            let site: i64 = r.path_and_query["/api/invites/sites/".len()..]
                .split('/')
                .next()
                .unwrap()
                .parse()
                .unwrap();
            let v = s
                .verify_visitor(site, signed)
                .expect("a genuine id for its site");
            let number = cipher.number_of(v.id);
            assert!((1..=1000).contains(&number));
            assert_eq!(site, site_of(v.id, 4));
            if seq % 8 == 0 {
                assert!(r
                    .path_and_query
                    .ends_with("/state?page=%2Fcheckout%2Fpay&device=desktop"));
            } else {
                assert!(r.path_and_query.ends_with(&format!(
                    "/state?page=%2Fshop%2Fitem-{}&device=phone",
                    seq % 1000
                )));
            }
        }
    }
}
