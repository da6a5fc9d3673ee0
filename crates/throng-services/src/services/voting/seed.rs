//! `throng seed voting`: one election (districts, parties, each district's
//! lists, the roll), bulk-loaded with a progress bar, and optionally the
//! load test's CSV of `voter-id,election-district-id` rows.
//!
//! Voters are numbered 1..=N and assigned to districts by a hash of their
//! id (deterministic, balanced); candidates stand on one party's list in
//! one district. Re-seeding an existing election is refused unless
//! `--force`, which deletes its votes, ballots and tallies too.

use std::io::Write;
use std::time::Instant;

use crate::platform::mix::mix64;
use crate::store::Store;

use super::model::DISTRICTS_PER_ELECTION_MAX;
use super::store::VotingStore;

#[derive(Clone, Debug, clap::Args)]
pub struct SeedVotingArgs {
    /// Voters on the roll (ids 1..=N).
    #[arg(long, default_value_t = 5_000_000)]
    pub voters: i64,
    /// Districts (at most 1,000).
    #[arg(long, default_value_t = 100)]
    pub districts: i64,
    /// Parties, each on every district's ballot.
    #[arg(long, default_value_t = 12)]
    pub parties: i64,
    /// Candidates on each party's list in each district.
    #[arg(long, default_value_t = 20)]
    pub candidates_per_party: i64,
    /// Candidates a vote may name at most.
    #[arg(long, default_value_t = 4)]
    pub candidates_per_vote_max: i64,
    /// The election's id.
    #[arg(long, default_value_t = 1)]
    pub election: i64,
    /// The election's name (default "Election N").
    #[arg(long)]
    pub name: Option<String>,
    /// When voting opens, RFC 3339 (default: now).
    #[arg(long)]
    pub opens_at: Option<String>,
    /// When voting closes, RFC 3339 (default: 30 days after opening).
    #[arg(long)]
    pub closes_at: Option<String>,
    /// Replace an existing election of this id (deletes its votes and tallies).
    #[arg(long)]
    pub force: bool,
    /// Also write `voter-id,election-district-id` rows (every voter, in a
    /// shuffled but deterministic order) for the load test.
    #[arg(long)]
    pub voters_csv: Option<std::path::PathBuf>,
    /// Write the election key's public half and 3 trustees' shares (any 2
    /// open the box) to this directory; without it the private key is
    /// dropped and the election's ballots can never be opened.
    #[arg(long, value_name = "DIR")]
    pub trustees_out: Option<std::path::PathBuf>,
}

/// `meta` key changed by every seed; servers watch it and reload.
pub const SEED_GENERATION_KEY: &str = "voting_seed_generation";

/// Voters per transaction / progress step.
pub(super) const VOTERS_PER_CHUNK: i64 = 250_000;

const PARTIES: &[(&str, &str)] = &[
    ("Civic Alliance", "CA"),
    ("Green Future", "GF"),
    ("Liberal Union", "LU"),
    ("Social Democrats", "SD"),
    ("People's Party", "PP"),
    ("Farmers and Regions", "FR"),
    ("Pirate Party", "PIR"),
    ("Christian Democrats", "CD"),
    ("New Direction", "ND"),
    ("Workers' Front", "WF"),
    ("Citizens for Reform", "CR"),
    ("Independent List", "IL"),
];
const FIRST: &[&str] = &[
    "Anna",
    "Peter",
    "Mária",
    "Ján",
    "Eva",
    "Martin",
    "Zuzana",
    "Tomáš",
    "Jana",
    "Michal",
    "Lucia",
    "Marek",
    "Katarína",
    "Juraj",
    "Monika",
    "Pavol",
];
const LAST: &[&str] = &[
    "Novák", "Horváth", "Kováč", "Varga", "Tóth", "Nagy", "Baláž", "Szabó", "Molnár", "Lukáč",
    "Kráľ", "Mráz", "Hudák", "Polák", "Urban", "Šimko", "Blaho",
];
const REGIONS: &[&str] = &[
    "Bratislava",
    "Trnava",
    "Trenčín",
    "Nitra",
    "Žilina",
    "Banská Bystrica",
    "Prešov",
    "Košice",
];

/// The district of a voter (1..=districts).
pub fn district_of(election: i64, voter: i64, districts: i64) -> i64 {
    1 + (mix64(voter as u64, election as u64) % districts as u64) as i64
}

pub fn candidate_id(args: &SeedVotingArgs, district: i64, party: i64, position: i64) -> i64 {
    ((district - 1) * args.parties + (party - 1)) * args.candidates_per_party + position
}

pub(super) fn district_name(d: i64) -> String {
    format!("{} {d}", REGIONS[(d as usize) % REGIONS.len()])
}

pub(super) fn party_name(p: i64) -> (String, String) {
    match PARTIES.get(p as usize - 1) {
        Some((n, s)) => (n.to_string(), s.to_string()),
        None => (format!("Party {p}"), format!("P{p}")),
    }
}

pub(super) fn candidate_name(id: i64) -> String {
    let h = mix64(id as u64, 7);
    format!(
        "{} {}",
        FIRST[(h % FIRST.len() as u64) as usize],
        LAST[((h >> 16) % LAST.len() as u64) as usize]
    )
}

fn parse_time(flag: &str, s: &str) -> anyhow::Result<i64> {
    let t = time::OffsetDateTime::parse(s, &time::format_description::well_known::Rfc3339)
        .map_err(|e| {
            anyhow::anyhow!("{flag}: an RFC 3339 time such as 2030-01-01T08:00:00Z ({e})")
        })?;
    Ok((t.unix_timestamp_nanos() / 1_000_000) as i64)
}

/// The election's (opens, closes) in ms, after checking every bound.
pub fn validate(args: &SeedVotingArgs) -> anyhow::Result<(i64, i64)> {
    if !(1..=100_000_000).contains(&args.voters) {
        anyhow::bail!("--voters: 1 to 100000000");
    }
    if !(1..=DISTRICTS_PER_ELECTION_MAX).contains(&args.districts) {
        anyhow::bail!("--districts: 1 to {DISTRICTS_PER_ELECTION_MAX}");
    }
    if !(1..=100).contains(&args.parties) || !(1..=100).contains(&args.candidates_per_party) {
        anyhow::bail!("--parties and --candidates-per-party: 1 to 100");
    }
    if !(0..=super::model::CANDIDATES_PER_VOTE_LIMIT).contains(&args.candidates_per_vote_max) {
        anyhow::bail!(
            "--candidates-per-vote-max: 0 to {}",
            super::model::CANDIDATES_PER_VOTE_LIMIT
        );
    }
    if args.election < 1 {
        anyhow::bail!("--election: a positive id");
    }
    let opens = match &args.opens_at {
        Some(s) => parse_time("--opens-at", s)?,
        None => crate::base::clock::now_ms(),
    };
    let closes = match &args.closes_at {
        Some(s) => parse_time("--closes-at", s)?,
        None => opens + 30 * 24 * 3600 * 1000,
    };
    if closes <= opens {
        anyhow::bail!("--closes-at must be after --opens-at");
    }
    Ok((opens, closes))
}

pub struct SeedReport {
    pub voters: i64,
    pub candidates: i64,
    pub elapsed_s: f64,
    pub csv_rows: i64,
}

pub async fn seed(
    store: &Store,
    args: &SeedVotingArgs,
    progress: bool,
) -> anyhow::Result<SeedReport> {
    let (opens, closes) = validate(args)?;
    let started = Instant::now();
    let bar = crate::platform::progress::seed_bar(
        args.voters as u64,
        "voters",
        "seeding voting",
        progress,
    );
    // The election's key: the seed keeps only its public half, and writes
    // the trustees' shares (any 2 of 3) when asked to.
    let ceremony = super::trustee::make_key(2, 3, &mut rand::rngs::OsRng)?;
    let public = super::ballot::from_b64(&ceremony.key.public_key)
        .ok_or_else(|| anyhow::anyhow!("the ceremony's public key is not base64url"))?;
    super::store::seed_election(store, args, opens, closes, &public, &bar).await?;
    if let Some(dir) = &args.trustees_out {
        super::trustee::write_ceremony(dir, &ceremony)?;
        println!(
            "wrote election {}'s public key and 3 trustees' shares (any 2 open the box) to {}",
            args.election,
            dir.display()
        );
    }
    drop(ceremony);
    let csv_rows = match &args.voters_csv {
        Some(path) => {
            let (path, args) = (path.clone(), args.clone());
            let public = public.clone();
            tokio::task::spawn_blocking(move || write_csv(&path, &args, &public)).await??
        }
        None => 0,
    };
    store
        .meta_set(
            SEED_GENERATION_KEY,
            &crate::base::clock::now_ms().to_string(),
        )
        .await?;
    Ok(SeedReport {
        voters: args.voters,
        candidates: args.districts * args.parties * args.candidates_per_party,
        elapsed_s: started.elapsed().as_secs_f64(),
        csv_rows,
    })
}

/// Writes every voter as `voter-id,election-district-id`, shuffled with a
/// fixed seed, so a load test reading rows in order hits random pages.
fn write_csv(
    path: &std::path::Path,
    args: &SeedVotingArgs,
    public_key: &[u8],
) -> anyhow::Result<i64> {
    use rand::seq::SliceRandom;
    use rand::SeedableRng;
    let mut ids: Vec<u32> = (1..=args.voters as u32).collect();
    ids.shuffle(&mut rand::rngs::StdRng::seed_from_u64(
        0x5CA1_EC71_0000 + args.election as u64,
    ));
    // Each voter's ballot sealed ahead of the run, as the page would seal
    // it (a party by the voter's id, its first candidate), on every core.
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let chunk = ids.len().div_ceil(threads).max(1);
    let sealed: Vec<Vec<String>> = std::thread::scope(|scope| {
        let handles: Vec<_> = ids
            .chunks(chunk)
            .map(|part| {
                scope.spawn(move || {
                    let mut rng = rand::rngs::OsRng;
                    part.iter()
                        .map(|&id| {
                            let district = district_of(args.election, id as i64, args.districts);
                            let choice = super::ballot::Choice {
                                list: (1 + id as i64 % args.parties.max(1)) as u8,
                                candidates: if args.candidates_per_party > 0
                                    && args.candidates_per_vote_max > 0
                                {
                                    vec![0]
                                } else {
                                    Vec::new()
                                },
                            };
                            super::ballot::seal(
                                public_key,
                                args.election,
                                district,
                                &choice.encode(),
                                &mut rng,
                            )
                            .map(|b| super::ballot::b64(&b))
                            .unwrap_or_default()
                        })
                        .collect()
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("a sealing thread"))
            .collect()
    });
    let file = std::fs::File::create(path)
        .map_err(|e| anyhow::anyhow!("cannot create {}: {e}", path.display()))?;
    let mut out = std::io::BufWriter::with_capacity(1 << 20, file);
    writeln!(out, "voter-id,election-district-id,sealed")?;
    let mut int = itoa::Buffer::new();
    for (id, sealed) in ids.iter().zip(sealed.iter().flatten()) {
        out.write_all(int.format(*id).as_bytes())?;
        out.write_all(b",")?;
        out.write_all(
            int.format(district_of(args.election, *id as i64, args.districts))
                .as_bytes(),
        )?;
        out.write_all(b",")?;
        out.write_all(sealed.as_bytes())?;
        out.write_all(b"\n")?;
    }
    out.flush()?;
    Ok(ids.len() as i64)
}

/// The demo election: open since an hour ago for ten years, 3 districts,
/// 4 parties x 6 candidates per district list, 300 voters, N = 4.
pub fn demo_args() -> SeedVotingArgs {
    let now = crate::base::clock::now_ms();
    let at = |ms: i64| crate::base::clock::rfc3339_ms(ms);
    SeedVotingArgs {
        voters: 300,
        districts: 3,
        parties: 4,
        candidates_per_party: 6,
        candidates_per_vote_max: 4,
        election: 1,
        name: Some("Demo election".into()),
        opens_at: Some(at(now - 3600 * 1000)),
        closes_at: Some(at(now + 10 * 365 * 24 * 3600 * 1000)),
        force: false,
        voters_csv: None,
        trustees_out: None,
    }
}

/// Where `serve --demo` writes the demo election's key and trustees'
/// shares, inside the data directory.
pub const DEMO_TRUSTEES_DIR: &str = "demo-trustees";

/// `serve --demo`: seeds the demo election when there is no election. Its
/// key's shares (any 2 of 3) go to `DATA_DIR/demo-trustees/election-1`, so
/// the demo's box can be opened as trustees would: a demo's ballots are
/// not secret from whoever holds its data directory, an authority's are
/// (its shares never come near the server).
pub async fn seed_demo_if_empty(store: &Store, data_dir: &std::path::Path) -> anyhow::Result<()> {
    let storage = VotingStore::open(store);
    if !storage.election_rows().await?.elections.is_empty() {
        return Ok(());
    }
    let mut args = demo_args();
    let dir = data_dir
        .join(DEMO_TRUSTEES_DIR)
        .join(format!("election-{}", args.election));
    // A ceremony left by an earlier demo store is not reused: a new key.
    if dir.exists() {
        std::fs::remove_dir_all(&dir)?;
    }
    args.trustees_out = Some(dir);
    let report = seed(store, &args, false).await?;
    tracing::info!(voters = report.voters, "seeded the voting demo election");
    Ok(())
}
