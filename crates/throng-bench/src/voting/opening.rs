//! `throng bench voting-opening --ballots N`: the trustees' opening,
//! offline. Makes a key split 3 of 5, seals N ballots into a box over a few
//! districts (as voters' browsers would, on every core), writes it, then
//! times what `throng voting open` does with 3 shares (read and parse the
//! box, check its digests, open, shuffle and count, write the results) and
//! what `throng voting recount --box` does, and prints ballots/s.
//!
//! The choices are drawn from the ballot's number (`mix64`): one in a
//! hundred blank (spoiled), the rest a list of four and up to four of its
//! twenty candidates. One district of eight holds few ballots and has a
//! region, so the opening groups units as it does in an election.

use std::time::Instant;

use rand::rngs::OsRng;

use crate::experiment::{mix64, Experiment, Scale, Workload};
use crate::services::voting::ballot::{self, Choice};
use crate::services::voting::opening::{self, BoxBallot, BoxDistrict, BoxFile, BoxList};
use crate::services::voting::trustee;

pub struct OpeningBench;

const ELECTION: i64 = 1;
const DISTRICTS: i64 = 8;
const LISTS: i64 = 4;
const CANDIDATES: i64 = 20;
const CANDIDATES_PER_VOTE: i64 = 4;
/// Board periods the ballots are spread over (half-hours of a day).
const PERIODS: i64 = 48;
const DEFAULT_BALLOTS: usize = 100_000;
/// The targets the opening is held to (ballots, seconds).
const TARGETS: [(u64, f64); 2] = [(100_000, 10.0), (5_000_000, 300.0)];

impl Experiment for OpeningBench {
    fn name(&self) -> &'static str {
        "voting-opening"
    }
    fn about(&self) -> &'static str {
        "the trustees' opening, offline: seal --ballots N into a box, open it with 3 of 5 \
         shares, recount (no server)"
    }
    fn seed_args(&self, _scale: Scale) -> Vec<String> {
        Vec::new()
    }
    fn workloads(&self, _scale: Scale) -> Vec<Workload> {
        Vec::new()
    }
    fn args(&self, cmd: clap::Command) -> clap::Command {
        cmd.arg(
            clap::Arg::new("ballots")
                .long("ballots")
                .value_name("N")
                .value_parser(clap::value_parser!(usize))
                .help(format!(
                    "voting-opening: ballots sealed into the box [default: {DEFAULT_BALLOTS}]"
                )),
        )
    }
    fn standalone(&self, matches: &clap::ArgMatches) -> Option<anyhow::Result<Vec<String>>> {
        let ballots = matches
            .get_one::<usize>("ballots")
            .copied()
            .unwrap_or(DEFAULT_BALLOTS);
        Some(run(ballots))
    }
}

/// District of ballot `i`: district 8 gets one ballot in a thousand.
fn district_of(i: u64) -> i64 {
    let r = mix64(i, 1) % 1000;
    if r == 0 {
        DISTRICTS
    } else {
        1 + (r % (DISTRICTS as u64 - 1)) as i64
    }
}

fn choice_of(i: u64) -> Choice {
    let r = mix64(i, 2);
    if r.is_multiple_of(100) {
        return Choice {
            list: 0,
            candidates: Vec::new(),
        };
    }
    let list = 1 + (r / 100 % LISTS as u64) as u8;
    let wanted = (mix64(i, 3) % (CANDIDATES_PER_VOTE as u64 + 1)) as usize;
    let mut candidates: Vec<u16> = Vec::new();
    let mut k = 0;
    while candidates.len() < wanted {
        let c = (mix64(i, 4 + k) % CANDIDATES as u64) as u16;
        if !candidates.contains(&c) {
            candidates.push(c);
        }
        k += 1;
    }
    candidates.sort_unstable();
    Choice { list, candidates }
}

fn districts() -> Vec<BoxDistrict> {
    (1..=DISTRICTS)
        .map(|d| BoxDistrict {
            id: d,
            code: Some(format!("D{d}")),
            name: format!("District {d}"),
            region: (d >= DISTRICTS - 1).then(|| "Islands".to_string()),
            lists: (1..=LISTS)
                .map(|l| BoxList {
                    party_id: l,
                    candidate_ids: (0..CANDIDATES).map(|c| l * 1000 + c).collect(),
                })
                .collect(),
            ballots: Vec::new(),
            digest: String::new(),
        })
        .collect()
}

fn rate(n: usize, s: f64) -> String {
    format!("{:.0} ballots/s", n as f64 / s.max(1e-9))
}

fn run(n: usize) -> anyhow::Result<Vec<String>> {
    if n == 0 {
        anyhow::bail!("--ballots must be at least 1");
    }
    let mut lines = Vec::new();
    let mut say = |line: String| lines.push(line);
    let threads = std::thread::available_parallelism().map_or(1, |p| p.get());
    say(format!(
        "voting-opening: {n} ballots, {DISTRICTS} districts, {LISTS} lists of {CANDIDATES}, \
         {threads} threads"
    ));

    let t = Instant::now();
    let ceremony = trustee::make_key(3, 5, &mut OsRng)?;
    let public = ballot::from_b64(&ceremony.key.public_key).expect("the ceremony's key");
    say(format!(
        "key: made and split 3 of 5 in {:.1} ms",
        t.elapsed().as_secs_f64() * 1e3
    ));

    let t = Instant::now();
    let chunk = n.div_ceil(threads);
    let sealed: Vec<(i64, BoxBallot)> = std::thread::scope(|s| {
        let workers: Vec<_> = (0..threads)
            .map(|w| {
                let public = &public;
                s.spawn(move || {
                    let range = (w * chunk).min(n)..((w + 1) * chunk).min(n);
                    range
                        .map(|i| {
                            let i = i as u64;
                            let d = district_of(i);
                            let plain = choice_of(i).encode();
                            let bytes = ballot::seal(public, ELECTION, d, &plain, &mut OsRng)
                                .expect("a valid public key");
                            let period = i as i64 * PERIODS / n as i64;
                            (
                                d,
                                BoxBallot {
                                    period,
                                    sealed: ballot::b64(&bytes),
                                },
                            )
                        })
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        workers
            .into_iter()
            .flat_map(|w| w.join().expect("a sealing thread"))
            .collect()
    });
    let seal_s = t.elapsed().as_secs_f64();
    say(format!(
        "sealed {n} ballots in {seal_s:.2} s ({}; the voters' browsers' work, for reference)",
        rate(n, seal_s)
    ));

    let mut b = BoxFile {
        format: opening::BOX_FORMAT.into(),
        election_id: ELECTION,
        election_name: "Bench".into(),
        public_key: ceremony.key.public_key.clone(),
        candidates_per_vote_max: CANDIDATES_PER_VOTE,
        ballots_min: 100,
        districts: districts(),
        digest: String::new(),
    };
    for (d, x) in sealed {
        b.districts[d as usize - 1].ballots.push(x);
    }
    opening::seal_digests(&mut b);
    let dir = tempfile::Builder::new()
        .prefix("throng-opening-")
        .tempdir()?;
    let box_path = dir.path().join("box.json");
    std::fs::write(&box_path, serde_json::to_vec(&b)?)?;
    let box_mb = std::fs::metadata(&box_path)?.len() as f64 / 1e6;
    drop(b);
    say(format!("box: {box_mb:.1} MB written"));

    // What `throng voting open --box --share x3 --out` does.
    let t = Instant::now();
    let bytes = std::fs::read(&box_path)?;
    let b: BoxFile = serde_json::from_slice(&bytes)?;
    drop(bytes);
    let read_s = t.elapsed().as_secs_f64();
    let t2 = Instant::now();
    let results = opening::open_box_with_shares(&b, &ceremony.shares[1..4], None, &|_| {})?;
    let open_s = t2.elapsed().as_secs_f64();
    let t3 = Instant::now();
    let results_path = dir.path().join("results.json");
    std::fs::write(&results_path, serde_json::to_vec(&results)?)?;
    let write_s = t3.elapsed().as_secs_f64();
    let total_s = t.elapsed().as_secs_f64();
    let spoiled: i64 = results.units.iter().map(|u| u.spoiled).sum();
    say(format!(
        "open (3 of 5 shares): {total_s:.2} s, {} (read and parse the box {read_s:.2} s; check \
         digests, open, shuffle and count {open_s:.2} s = {}; write the results {write_s:.2} s); \
         {} units, {spoiled} spoiled",
        rate(n, total_s),
        rate(n, open_s),
        results.units.len()
    ));
    drop(results);

    // What `throng voting recount RESULTS --box BOX` does.
    let t = Instant::now();
    let r: opening::ResultsFile = serde_json::from_slice(&std::fs::read(&results_path)?)?;
    let parse_s = t.elapsed().as_secs_f64();
    let t2 = Instant::now();
    let recounted = opening::recount(&r).and_then(|()| opening::check_against_box(&r, &b));
    let recount_s = t.elapsed().as_secs_f64();
    if let Err(p) = recounted {
        anyhow::bail!("the recount differs: {}", p.join("; "));
    }
    say(format!(
        "recount (with the box check): {recount_s:.2} s, {} (read the results {parse_s:.2} s; \
         recount and check {:.2} s): matches",
        rate(n, recount_s),
        t2.elapsed().as_secs_f64()
    ));

    let per_ballot = total_s / n as f64;
    for (ballots, target) in TARGETS {
        let at = per_ballot * ballots as f64;
        say(format!(
            "target: {ballots} ballots opened under {target:.0} s; at this rate {at:.1} s ({})",
            if at <= target { "met" } else { "missed" }
        ));
    }
    Ok(lines)
}
