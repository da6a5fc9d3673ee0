//! `throng bench voting`: the election write-up's load test ("Scalection",
//! part 3) on its data set (5,000,000 voters in 100 districts, 12 parties of 20
//! candidates on every district's ballot): the workflow's mix of `GET
//! ballot` and `POST vote` by a fresh voter each time, and each of the two
//! alone, beside `GET /health` in the same run.
//!
//! The write-up's JMeter users loop "GET ballot, POST vote" with the next row
//! of a CSV; here request `seq` of the mix is a GET when even and a POST when
//! odd, so the server sees the same 1:1 mix. Every POST takes the next voter
//! from one counter shared by the warm-up, every run and both voting
//! workloads (the harness restarts `seq` at 0 for each measurement), so no
//! voter votes twice in one bench; the voters are visited in a fixed
//! permutation of `1..=voters`, so consecutive votes land in scattered
//! districts as the write-up's shuffled CSV does. The pool is sized so it
//! cannot run out at the rates this machine reaches (see [`size`]); a rerun
//! with `--no-seed` meets voters who already voted (409s, counted as errors),
//! so it needs a fresh seed.
//!
//! The server runs with `--voting-identity headers`, as the write-up's did
//! behind its gateway, and the board at its default period.
//!
//! Each of our POSTs carries a ballot sealed to the election's public key
//! (read from the store after seeding, [`Experiment::offline`]) as the vote
//! page seals it in the browser: fresh HPKE per vote, sealed by the load
//! generator before the run that sends it ([`sealed_ahead`]), so the run
//! measures the server's path, not the generator's sealing on the same
//! cores. The write-up's design takes its choice in clear, as it did.
//!
//! The write-up's own design (`voting/baseline.rs`: the database read on every
//! GET ballot, the vote validated by database reads then inserted, with the
//! voter, into a table keyed by the voter) runs beside ours on the same
//! server and data (plugged into the bench's child servers only, see
//! [`Experiment::comparison_services`]): the same mix and POST alone,
//! drawing voters from the same counter, so every POST of the bench is a
//! different voter and a 201.

pub mod baseline;
pub mod opening;
pub mod sealed_ahead;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use bytes::Bytes;
use throng_load::measure::RequestSpec;

use crate::experiment::{mix64, pick, BeforeRun, Experiment, Scale, Workload};
use crate::services::voting::seed::{district_of, SeedVotingArgs};
use sealed_ahead::{Sealed, SealedAhead};

pub struct VotingBench;

/// The seeded election.
const ELECTION: i64 = 1;
/// The election-night setting of `serve --commit-delay-us`.
pub const VOTING_COMMIT_DELAY_US: u64 = 1000;
/// Candidates named by each vote (of at most 4).
const CANDIDATES_PER_VOTE: i64 = 2;

/// (voters, districts, parties, candidates per party). The POSTs of one bench
/// (warm-up + runs, mix and POST-alone, ours and the write-up's design) must
/// stay below `voters`: at the defaults (3 runs of 10 s + 3 s warm-up) that
/// is 49.5 s of votes per design, half of the mix's and all of POST-alone's:
/// ~2,000,000 at 40,000 votes/s for ours, far fewer for the write-up's
/// (database reads per vote). Quick is meant for `--runs 1`.
fn size(scale: Scale) -> (i64, i64, i64, i64) {
    match scale {
        Scale::Full => (5_000_000, 100, 12, 20),
        Scale::Quick => (1_000_000, 10, 4, 6),
    }
}

fn seed_args(scale: Scale) -> SeedVotingArgs {
    let (voters, districts, parties, cpp) = size(scale);
    SeedVotingArgs {
        voters,
        districts,
        parties,
        candidates_per_party: cpp,
        candidates_per_vote_max: 4,
        election: ELECTION,
        name: None,
        opens_at: None,
        closes_at: None,
        force: false,
        voters_csv: None,
        trustees_out: None,
    }
}

/// Visits `1..=n` once each in a scattered order: `i -> (a*i + b) mod n`
/// with `a` coprime to `n`.
struct Permutation {
    n: u64,
    a: u64,
    b: u64,
}

impl Permutation {
    fn new(n: u64) -> Permutation {
        fn gcd(x: u64, y: u64) -> u64 {
            if y == 0 {
                x
            } else {
                gcd(y, x % y)
            }
        }
        let mut a = (0x9E37_79B9_7F4A_7C15 % n.max(2)) | 1;
        while gcd(a, n) != 1 {
            a += 2;
        }
        Permutation { n, a, b: n / 3 }
    }

    /// The `i`-th voter id (1-based), for `i < n`.
    fn voter(&self, i: u64) -> u64 {
        ((self.a as u128 * (i % self.n) as u128 + self.b as u128) % self.n as u128) as u64 + 1
    }
}

/// Whom the workflow-with-logins row signs in: voters of a second election
/// whose roll the bench imports through the API before the workloads
/// ([`VotingBench::prepare`]), with the credentials the import answered; or
/// why the row cannot run.
static LOGINS: std::sync::OnceLock<Result<Arc<Logins>, String>> = std::sync::OnceLock::new();

struct Logins {
    /// `/api/voting/elections/{id}/login`.
    path: String,
    /// (voter id, credential), as the authority handed them out.
    voters: Vec<(String, String)>,
    /// Logins made so far (warm-up and runs): which voter and which client
    /// address comes next.
    next: AtomicU64,
}

/// Voters on the login election's roll: at one login per
/// [`LOGIN_EVERY_REQUESTS`] requests, each voter signs in about once a
/// minute at most, under `LOGIN_ATTEMPTS_PER_VOTER_MAX`.
const LOGIN_VOTERS: usize = 20_000;
/// One login in this many requests of the workflow: votes are every other
/// request, so a login for 1% of the votes.
const LOGIN_EVERY_REQUESTS: u64 = 200;
const WORKFLOW: &str = "GET ballot + POST vote, 1:1 (the workflow)";
const WORKFLOW_LOGINS: &str =
    "the workflow with credential logins at 1% of the votes (each from its own address)";

impl Logins {
    /// The next login: the next voter, from the next client address (behind
    /// the loopback proxy the bench's server trusts), so the per-address
    /// limit meets a crowd of people, as it would, not one machine.
    fn request(&self) -> RequestSpec {
        let i = self.next.fetch_add(1, Ordering::Relaxed);
        let (voter, credential) = &self.voters[(i % self.voters.len() as u64) as usize];
        let address = format!("10.{}.{}.{}", (i >> 16) & 0xff, (i >> 8) & 0xff, i & 0xff);
        RequestSpec {
            method: http::Method::POST,
            path_and_query: self.path.clone(),
            headers: vec![
                ("content-type".into(), "application/json".into()),
                ("x-forwarded-for".into(), address),
            ],
            body: Bytes::from(format!(
                r#"{{"voterId":"{voter}","credential":"{credential}"}}"#
            )),
        }
    }
}

/// Makes the login election through the API, as an authority does: a
/// draft from a definition, then a roll of [`LOGIN_VOTERS`] voters whose
/// credentials the import answers once.
async fn login_election(
    server: std::net::SocketAddr,
    keys: &crate::platform::auth::TokenKeys,
) -> anyhow::Result<Logins> {
    use anyhow::Context;
    let base = format!("http://{server}");
    let http = reqwest::Client::new();
    let admin = keys.issue("bench", crate::platform::auth::Role::ADMIN, 24 * 3600);
    let now = crate::base::clock::now_ms();
    let definition = serde_json::json!({
        "name": "Bench logins",
        "opensAt": crate::base::clock::rfc3339_ms(now + 86_400_000),
        "closesAt": crate::base::clock::rfc3339_ms(now + 2 * 86_400_000),
        "candidatesPerVoteMax": 1,
        "parties": [{"code": "A", "name": "Party A", "colour": "#2e8b57"}],
        "districts": [{"code": "L", "name": "Logins", "lists": [{"party": "A", "candidates": ["Ana Horvat"]}]}],
    });
    let r = http
        .post(format!("{base}/api/voting/elections"))
        .bearer_auth(&admin)
        .json(&definition)
        .send()
        .await?;
    let status = r.status();
    let drafted: serde_json::Value = r.json().await?;
    anyhow::ensure!(
        status.is_success(),
        "drafting the login election: {status} {drafted}"
    );
    let election = drafted["electionId"]
        .as_i64()
        .with_context(|| format!("no electionId in {drafted}"))?;
    let mut roll = String::from("voter_id,district\n");
    for v in 1..=LOGIN_VOTERS {
        roll.push_str(&format!("L-{v:06},L\n"));
    }
    let r = http
        .put(format!("{base}/api/voting/elections/{election}/roll"))
        .bearer_auth(&admin)
        .header("content-type", "text/csv")
        .body(roll)
        .send()
        .await?;
    let status = r.status();
    let text = r.text().await?;
    anyhow::ensure!(
        status.is_success(),
        "importing the login roll: {status} {text}"
    );
    let voters: Vec<(String, String)> = text
        .lines()
        .skip(1)
        .filter_map(|line| {
            let (voter, credential) = line.split_once(',')?;
            Some((voter.to_string(), credential.to_string()))
        })
        .collect();
    anyhow::ensure!(
        voters.len() == LOGIN_VOTERS,
        "the roll import answered {} credentials, not {LOGIN_VOTERS}",
        voters.len()
    );
    Ok(Logins {
        path: format!("/api/voting/elections/{election}/login"),
        voters,
        next: AtomicU64::new(0),
    })
}

/// What the bench's votes were sealed ahead with, for its notes.
static SEALING: std::sync::OnceLock<Arc<SealedAhead>> = std::sync::OnceLock::new();
/// Votes a second the workflows' runs are sealed ahead for: above the
/// fastest workflow this machine has run (37,859 req/s, half of them votes).
const WORKFLOW_VOTES_PER_S_AHEAD: u64 = 30_000;
/// The same for POST vote alone (29,566 votes/s at its fastest).
const POST_VOTES_PER_S_AHEAD: u64 = 45_000;

/// The seeded election's public key, read after the seed
/// ([`VotingBench::offline`]).
static ELECTION_KEY: std::sync::OnceLock<Vec<u8>> = std::sync::OnceLock::new();

static PUBLIC_KEY: crate::store::Sql =
    crate::store::Sql::new("SELECT public_key FROM voting_elections WHERE id = ?1");

/// Builds votes by fresh voters: valid party and candidates of each voter's
/// district's ballot; sealed to the election's key where `sealed`, from the
/// ballots sealed ahead of the run ([`sealed_ahead`]).
struct Votes {
    args: SeedVotingArgs,
    order: Permutation,
    next: Arc<AtomicU64>,
    /// `/api/voting/elections/1/votes`.
    path: String,
    /// Seal the choice (ours) or send it in clear (the write-up's design).
    sealed: bool,
    ahead: Arc<SealedAhead>,
}

/// Vote `i`: its voter, the voter's district, a party and two different
/// list positions (1-based) of that party in that district.
struct Vote {
    voter: i64,
    district: i64,
    party: i64,
    positions: Vec<i64>,
}

impl Votes {
    fn vote(&self, i: u64) -> Vote {
        let voter = self.order.voter(i) as i64;
        let a = &self.args;
        let first = pick(i, 32, 1, a.candidates_per_party);
        let second = 1 + (first % a.candidates_per_party);
        Vote {
            voter,
            district: district_of(ELECTION, voter, a.districts),
            party: pick(i, 31, 1, a.parties),
            positions: [first, second]
                .into_iter()
                .take(CANDIDATES_PER_VOTE.min(a.candidates_per_party) as usize)
                .collect(),
        }
    }

    /// Vote `i` sealed to the election's key, as the vote page seals it.
    fn seal(&self, i: u64) -> Sealed {
        let v = self.vote(i);
        // The seeded lists are in party order and candidates in list
        // order: positions are (party, pos - 1).
        let choice = crate::services::voting::ballot::Choice {
            list: v.party as u8,
            candidates: v.positions.iter().map(|&pos| (pos - 1) as u16).collect(),
        };
        let key = ELECTION_KEY
            .get()
            .expect("the election's key is read before the workloads run");
        crate::services::voting::ballot::seal(
            key,
            ELECTION,
            v.district,
            &choice.encode(),
            &mut rand::rngs::OsRng,
        )
        .expect("the seeded key is valid")
        .try_into()
        .expect("a sealed choice is SEALED_BYTES")
    }

    /// A before-run hook that seals the votes the run may send at
    /// `votes_per_s`, on every core, before it starts.
    fn sealing_ahead(self: &Arc<Self>, votes_per_s: u64) -> BeforeRun {
        let votes = self.clone();
        Arc::new(move |run: std::time::Duration| {
            let votes = votes.clone();
            Box::pin(async move {
                tokio::task::spawn_blocking(move || {
                    let next = votes.next.load(Ordering::Relaxed);
                    let until = (next + (votes_per_s as f64 * run.as_secs_f64()) as u64)
                        .min(votes.args.voters as u64);
                    let threads = std::thread::available_parallelism().map_or(1, |p| p.get());
                    votes.ahead.extend(next, until, threads, |i| votes.seal(i));
                })
                .await?;
                Ok(())
            })
        })
    }

    fn request(&self) -> RequestSpec {
        let i = self.next.fetch_add(1, Ordering::Relaxed);
        let v = self.vote(i);
        let body = if self.sealed {
            let sealed = self.ahead.take(i, |i| self.seal(i));
            format!(
                r#"{{"sealed":"{}"}}"#,
                crate::services::voting::ballot::b64(&sealed)
            )
        } else {
            let ids: Vec<String> = v
                .positions
                .iter()
                .map(|&pos| {
                    crate::services::voting::seed::candidate_id(
                        &self.args, v.district, v.party, pos,
                    )
                    .to_string()
                })
                .collect();
            format!(
                r#"{{"partyId":{},"candidateIds":[{}]}}"#,
                v.party,
                ids.join(",")
            )
        };
        RequestSpec {
            method: http::Method::POST,
            path_and_query: self.path.clone(),
            headers: vec![
                ("content-type".into(), "application/json".into()),
                ("voter-id".into(), v.voter.to_string()),
                ("election-district-id".into(), v.district.to_string()),
            ],
            body: Bytes::from(body),
        }
    }
}

/// The ballot paths under `prefix` (`/api/voting` or the baseline's), one
/// per district, made once.
fn ballot_paths(prefix: &str, districts: i64) -> Arc<Vec<String>> {
    Arc::new(
        (1..=districts)
            .map(|d| format!("{prefix}/elections/{ELECTION}/districts/{d}/ballot"))
            .collect(),
    )
}

/// What a browser sends (Chromium's value); the ballot comes gzip-compressed.
const BROWSER_ACCEPT_ENCODING: &str = "gzip, deflate, br, zstd";

/// A GET of a random district's ballot, as a browser asks for it or with no
/// `Accept-Encoding` (the plain JSON).
fn ballot_get(ballots: &[String], seq: u64, browser: bool) -> RequestSpec {
    let mut r = RequestSpec::get(ballots[(mix64(seq, 30) % ballots.len() as u64) as usize].clone());
    if browser {
        r.headers
            .push(("accept-encoding".into(), BROWSER_ACCEPT_ENCODING.into()));
    }
    r
}

/// Requests `seq` of the 1:1 workflow: a GET of a random district's ballot
/// (as a browser asks) when even, a vote by the next fresh voter when odd.
fn workflow(ballots: Arc<Vec<String>>, votes: Arc<Votes>) -> impl Fn(u64) -> RequestSpec {
    move |seq: u64| {
        if seq.is_multiple_of(2) {
            ballot_get(&ballots, seq, true)
        } else {
            votes.request()
        }
    }
}

impl Experiment for VotingBench {
    fn name(&self) -> &'static str {
        "voting"
    }
    fn about(&self) -> &'static str {
        "election night: the load test's GET ballot + POST vote (fresh voter, durable) on 5,000,000 voters, vs GET /health"
    }
    fn seed_args(&self, scale: Scale) -> Vec<String> {
        let (voters, districts, parties, cpp) = size(scale);
        [
            "voting".to_string(),
            "--voters".into(),
            voters.to_string(),
            "--districts".into(),
            districts.to_string(),
            "--parties".into(),
            parties.to_string(),
            "--candidates-per-party".into(),
            cpp.to_string(),
        ]
        .into()
    }
    fn comparison_services(&self) -> Vec<&'static dyn crate::platform::service::AnyService> {
        vec![&baseline::VotingBaseline]
    }
    fn serve_args(&self) -> Vec<String> {
        vec![
            "--voting-identity".into(),
            "headers".into(),
            // Election night writes on every other request: under load the
            // writer waits up to 1 ms for more votes before it commits, so a
            // batch carries ~25-30 votes instead of ~10 (BENCHMARKS.md,
            // voting: 0.41-0.46 -> 0.46-0.53 of /health, alternated).
            "--commit-delay-us".into(),
            VOTING_COMMIT_DELAY_US.to_string(),
            // The login row's requests come through the loopback as from
            // a proxy naming each person's address.
            "--trusted-proxies".into(),
            "127.0.0.1/32".into(),
        ]
    }
    fn prepare(
        &self,
        data_dir: &std::path::Path,
        server: std::net::SocketAddr,
    ) -> anyhow::Result<()> {
        let secrets = crate::platform::secrets::Secrets::load_or_create(data_dir)?;
        let keys = crate::platform::auth::TokenKeys::new(&secrets.token_secret);
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        let logins = rt.block_on(login_election(server, &keys))?;
        eprintln!("logins: {LOGIN_VOTERS} voters at {}", logins.path);
        let _ = LOGINS.set(Ok(Arc::new(logins)));
        Ok(())
    }
    fn workloads(&self, scale: Scale) -> Vec<Workload> {
        let args = seed_args(scale);
        let districts = args.districts;
        // One counter for every voting workload, ours and the baseline's.
        let next = Arc::new(AtomicU64::new(0));
        let ahead = SEALING.get_or_init(Default::default).clone();
        let votes_at = |prefix: &str, sealed: bool| {
            Arc::new(Votes {
                order: Permutation::new(args.voters as u64),
                args: args.clone(),
                next: next.clone(),
                path: format!("{prefix}/elections/{ELECTION}/votes"),
                sealed,
                ahead: ahead.clone(),
            })
        };
        let votes = votes_at("/api/voting", true);
        let baseline_votes = votes_at("/api/voting/baseline", false);
        let ballots = ballot_paths("/api/voting", districts);
        let ballot = |browser: bool| {
            let ballots = ballots.clone();
            Arc::new(move |seq: u64| ballot_get(&ballots, seq, browser))
        };
        let mix = Arc::new(workflow(ballots.clone(), votes.clone()));
        let baseline_mix = Arc::new(workflow(
            ballot_paths("/api/voting/baseline", districts),
            baseline_votes.clone(),
        ));
        let workflow_sealing = votes.sealing_ahead(WORKFLOW_VOTES_PER_S_AHEAD);
        let post_sealing = votes.sealing_ahead(POST_VOTES_PER_S_AHEAD);
        let logins = LOGINS.get().cloned().unwrap_or_else(|| {
            Err("the bench made no login election (prepare did not run)".into())
        });
        let (with_logins, logins_skipped): (throng_load::measure::RequestFactory, _) = match logins
        {
            Ok(logins) => {
                let mix = mix.clone();
                (
                    Arc::new(move |seq: u64| {
                        if seq % LOGIN_EVERY_REQUESTS == 1 {
                            logins.request()
                        } else {
                            mix(seq)
                        }
                    }),
                    None,
                )
            }
            Err(why) => (Arc::new(|_| RequestSpec::get("/health")), Some(why)),
        };
        vec![
            Workload {
                name: WORKFLOW_LOGINS.into(),
                factory: with_logins,
                ok_statuses: vec![200, 201],
                published: "-".into(),
                skipped: logins_skipped,
                before_run: Some(workflow_sealing.clone()),
                ..Workload::default()
            },
            Workload {
                name: WORKFLOW.into(),
                factory: mix,
                ok_statuses: vec![200, 201],
                target_ratio_min: Some(0.5),
                published: "3,300 req/s measured, 11,000 req/s goal (the election write-up)".into(),
                comparison: false,
                before_run: Some(workflow_sealing),
                ..Workload::default()
            },
            Workload {
                name: "GET ballot, random district (gzip, as a browser asks)".into(),
                factory: ballot(true),
                ok_statuses: vec![200],
                target_ratio_min: None,
                published: "~1,650 (GET Parties, half of the 3,300)".into(),
                comparison: false,
                ..Workload::default()
            },
            Workload {
                name: "GET ballot, random district (no Accept-Encoding: plain JSON)".into(),
                factory: ballot(false),
                ok_statuses: vec![200],
                target_ratio_min: None,
                published: "~1,650 (GET Parties, half of the 3,300)".into(),
                comparison: false,
                ..Workload::default()
            },
            Workload {
                name: "POST vote, fresh voter (durable)".into(),
                factory: Arc::new(move |_| votes.request()),
                ok_statuses: vec![201],
                target_ratio_min: None,
                published: "~1,650 (POST Vote, half of the 3,300)".into(),
                comparison: false,
                before_run: Some(post_sealing),
                ..Workload::default()
            },
            Workload {
                name: "write-up's design: GET ballot + POST vote, database per request".into(),
                factory: baseline_mix,
                ok_statuses: vec![200, 201],
                target_ratio_min: None,
                published: "3,300 req/s (write-up, Azure SQL 2 vCores)".into(),
                comparison: true,
                ..Workload::default()
            },
            Workload {
                name: "write-up's design: POST vote alone".into(),
                factory: Arc::new(move |_| baseline_votes.request()),
                ok_statuses: vec![201],
                target_ratio_min: None,
                published: "~1,650 (POST Vote, write-up, Azure SQL 2 vCores)".into(),
                comparison: true,
                ..Workload::default()
            },
        ]
    }
    fn offline(
        &self,
        store: &crate::store::StoreUrl,
        _scale: Scale,
    ) -> anyhow::Result<Vec<String>> {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        let key: Option<Vec<u8>> = rt.block_on(async {
            let s = crate::store::Store::open(store, Default::default()).await?;
            let key = s
                .read(|c| {
                    Box::pin(async move {
                        c.query_opt(&PUBLIC_KEY, &[&ELECTION], |r| {
                            crate::store::Columns::col::<Option<Vec<u8>>>(r, 0)
                        })
                        .await
                    })
                })
                .await?;
            anyhow::Ok(key.flatten())
        })?;
        let key = key.ok_or_else(|| anyhow::anyhow!("the seeded election has no public key"))?;
        let _ = ELECTION_KEY.set(key);
        Ok(Vec::new())
    }
    fn connections(&self) -> usize {
        // The write-up's crowd: 400 virtual users (4 engines x 100).
        400
    }
    fn rss_mib_max(&self, scale: Scale) -> Option<f64> {
        (scale == Scale::Full).then_some(64.0)
    }
    fn notes(&self) -> Vec<String> {
        vec![
            "write-up: ASP.NET Core + EF Core in Azure Container Apps (up to 10 instances), Azure SQL \
             Standard Gen5 2 vCores; Azure Load Testing (JMeter), 4 engines x 100 = 400 virtual users \
             ramped in 4 steps over 3 minutes, 5 minutes: ~1.65k req/s of each request, ~3.3k req/s in \
             all, the database's CPU at 100%; goal 11,000 req/s"
                .into(),
            "here: one process on this machine, the load generator beside it; 400 connections; \
             `--commit-delay-us 1000` (under load the writer waits up to 1 ms for more votes per fsync); \
             `--voting-identity headers` (the write-up's gateway authenticated voters); each POST is a \
             fresh voter (201), durable before the answer; the GETs are 200s (no If-None-Match) with \
             a browser's Accept-Encoding (gzip, ~2 KB of the ~14 KB ballot), and once more without it"
                .into(),
            "write-up's design (voting/baseline.rs, same server, data and voters): every GET ballot reads \
             the election, district, parties and candidates from the database; every POST reads the \
             election, the voter and the party's list, then inserts (voter, choice) keyed by the voter \
             through the same group-committing writer"
                .into(),
            format!(
                "the workflow with logins: every {LOGIN_EVERY_REQUESTS}th request of the workflow is \
                 a credential login (voter id + credential, checked against the keyed hash, a \
                 voter's token signed) by one of {LOGIN_VOTERS} voters of a second election whose \
                 roll the bench imported through the API, each from an address of its own behind \
                 the trusted loopback proxy; set beside the workflow alone in the same runs"
            ),
            "the shipped JMeter-style script (closed-model phases, CSV): \
             crates/throng-services/src/services/voting/artillery/scalection.yml"
                .into(),
            sealing_note(SEALING.get().map(|s| s.summary())),
        ]
    }
}

/// How the votes were sealed, in the bench's notes.
fn sealing_note(summary: Option<sealed_ahead::SealingSummary>) -> String {
    let s = summary.unwrap_or_default();
    format!(
        "ballots: every vote carries a ballot sealed to the election's key (HPKE) as the vote \
         page seals it; {} were sealed before the runs that sent them, on every core while the \
         server idled ({:.1} s in all), and {} during the runs (more votes than sealed ahead)",
        s.sealed_ahead, s.sealing_s, s.sealed_live
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_permutation_visits_every_voter_once() {
        for n in [1u64, 2, 3, 10, 97, 1000, 1024, 5000] {
            let p = Permutation::new(n);
            let mut seen: Vec<u64> = (0..n).map(|i| p.voter(i)).collect();
            seen.sort_unstable();
            assert_eq!(seen, (1..=n).collect::<Vec<_>>(), "n = {n}");
        }
    }

    #[test]
    fn votes_are_valid_for_the_voters_district_and_never_repeat_a_voter() {
        let args = seed_args(Scale::Quick);
        let votes = Votes {
            order: Permutation::new(args.voters as u64),
            args,
            next: Arc::new(AtomicU64::new(0)),
            path: "/v".into(),
            sealed: false,
            ahead: Default::default(),
        };
        let mut voters = std::collections::HashSet::new();
        for _ in 0..10_000 {
            let r = votes.request();
            let h = |n: &str| r.headers.iter().find(|(k, _)| k == n).unwrap().1.clone();
            let voter: i64 = h("voter-id").parse().unwrap();
            let district: i64 = h("election-district-id").parse().unwrap();
            assert!(voters.insert(voter), "voter {voter} twice");
            assert_eq!(district, district_of(ELECTION, voter, votes.args.districts));
            let body: serde_json::Value = serde_json::from_slice(&r.body).unwrap();
            let party = body["partyId"].as_i64().unwrap();
            assert!((1..=votes.args.parties).contains(&party));
            let cands: Vec<i64> = body["candidateIds"]
                .as_array()
                .unwrap()
                .iter()
                .map(|c| c.as_i64().unwrap())
                .collect();
            assert_eq!(cands.len(), CANDIDATES_PER_VOTE as usize);
            assert_ne!(cands[0], cands[1]);
            let a = &votes.args;
            let first = crate::services::voting::seed::candidate_id(a, district, party, 1);
            for c in cands {
                assert!(
                    (first..first + a.candidates_per_party).contains(&c),
                    "{c} on the list"
                );
            }
        }
    }

    #[test]
    fn sealed_votes_open_to_a_choice_on_the_voters_ballot() {
        let (private, public) =
            crate::services::voting::ballot::generate_key(&mut rand::rngs::OsRng);
        let key = ELECTION_KEY.get_or_init(|| public.to_vec());
        if key[..] != public[..] {
            return; // another test of this process set its key first
        }
        let args = seed_args(Scale::Quick);
        let votes = Votes {
            order: Permutation::new(args.voters as u64),
            args,
            next: Arc::new(AtomicU64::new(0)),
            path: "/v".into(),
            sealed: true,
            ahead: Default::default(),
        };
        let opener = crate::services::voting::ballot::Opener::new(&private).unwrap();
        let a = votes.args.clone();
        let lists = vec![a.candidates_per_party as usize; a.parties as usize];
        for _ in 0..200 {
            let r = votes.request();
            let h = |n: &str| r.headers.iter().find(|(k, _)| k == n).unwrap().1.clone();
            let district: i64 = h("election-district-id").parse().unwrap();
            let body: serde_json::Value = serde_json::from_slice(&r.body).unwrap();
            let sealed =
                crate::services::voting::ballot::from_b64(body["sealed"].as_str().unwrap())
                    .unwrap();
            assert_eq!(sealed.len(), crate::services::voting::ballot::SEALED_BYTES);
            let plain = opener.open(ELECTION, district, &sealed).expect("it opens");
            let choice =
                crate::services::voting::ballot::Choice::decode(&plain, &lists, 4).expect("a vote");
            assert_eq!(choice.candidates.len(), CANDIDATES_PER_VOTE as usize);
        }
    }
}
