//! Runs one experiment: child server on a fresh data directory, seed, warm-up,
//! alternating measurements, medians, resident memory.

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use throng_load::measure;

use super::report::{BenchReport, WorkloadResult};
use super::usage::Usage;
use super::{experiments, Experiment, Scale, Workload};

#[derive(Clone, Debug, clap::Args)]
pub struct BenchArgs {
    /// Experiment to run (see --list).
    pub experiment: Option<String>,
    /// List the experiments.
    #[arg(long)]
    pub list: bool,
    /// Runs of each workload; the median is reported (at least 3 for BENCHMARKS.md).
    #[arg(long, default_value_t = 3)]
    pub runs: usize,
    /// Seconds per measurement.
    #[arg(long, default_value_t = 10)]
    pub duration_s: u64,
    /// Seconds of warm-up per workload before the first run.
    #[arg(long, default_value_t = 3)]
    pub warmup_s: u64,
    /// Connections of the closed-model load, e.g. `64` or `16,64,256`: every
    /// workload is measured with each count, a row each (default: each
    /// workload's own counts, else the experiment's). The ceiling is
    /// measured with every count in use, and a row's ratio uses the
    /// ceiling of its own count.
    #[arg(long, value_delimiter = ',')]
    pub connections: Vec<usize>,
    /// Data set size.
    #[arg(long, value_enum, default_value_t = Scale::Full)]
    pub scale: Scale,
    /// Store for the child server (default: SQLite in the fresh data directory).
    #[arg(long)]
    pub store: Option<String>,
    /// Data directory (default: a fresh temporary one, deleted afterwards).
    #[arg(long)]
    pub data_dir: Option<PathBuf>,
    /// Skip seeding: reuse the data seeded in --data-dir (required with
    /// it: a fresh directory holds no data, and other secrets than the ones
    /// the store's personal data was sealed with).
    #[arg(long, requires = "data_dir")]
    pub no_seed: bool,
    /// Where the JSON and markdown results go.
    #[arg(long, default_value = "bench-results")]
    pub out_dir: PathBuf,
    /// Only the workloads whose name contains this text (the ceiling always
    /// runs), e.g. `--only try-register` while profiling one workload;
    /// repeated, those that contain any of them.
    #[arg(long)]
    pub only: Vec<String>,
    /// Node counts to measure the experiment's own workloads with, e.g.
    /// `1,2,3` (PostgreSQL stores only: SQLite has one process). Each count
    /// above 1 adds rows "... (N nodes)": that many servers share the store
    /// and the connections are split evenly over them. Their PostgreSQL
    /// writers are sized as README says: `--pg-writers` max(1, 2 / N) each
    /// (unless THRONG_PG_WRITERS is set, which applies to every node).
    #[arg(long, value_delimiter = ',', default_value = "1")]
    pub nodes: Vec<usize>,
    /// The experiments' own flags (each experiment's `about` names them).
    #[command(flatten)]
    pub own: super::ExperimentArgs,
}

/// `bench --list`: one line per experiment, its description in a column as
/// wide as the longest name needs.
fn list_text<'a>(rows: impl Iterator<Item = (&'a str, &'a str)> + Clone) -> String {
    let width = rows.clone().map(|(name, _)| name.len()).max().unwrap_or(0);
    let mut out = String::from("experiments:\n");
    for (name, about) in rows {
        out.push_str(&format!("  {name:<width$}  {about}\n"));
    }
    out
}

pub fn run(args: BenchArgs) -> anyhow::Result<()> {
    let all = experiments();
    if args.list || args.experiment.is_none() {
        print!("{}", list_text(all.iter().map(|e| (e.name(), e.about()))));
        return Ok(());
    }
    let name = args.experiment.clone().unwrap();
    let exp = all.into_iter().find(|e| e.name() == name).ok_or_else(|| {
        anyhow::anyhow!("unknown experiment '{name}'; `throng bench --list` lists them")
    })?;
    if let Some(result) = exp.standalone(&args.own.0) {
        for line in result? {
            println!("{line}");
        }
        return Ok(());
    }
    if args.runs == 0 || args.duration_s == 0 || args.connections.contains(&0) {
        anyhow::bail!("--runs, --duration-s and --connections must be at least 1");
    }
    let nodes_max = args.nodes.iter().copied().max().unwrap_or(1);
    if args.nodes.contains(&0) || nodes_max > NODES_MAX {
        anyhow::bail!("--nodes: counts from 1 to {NODES_MAX}, e.g. 1,2,3");
    }
    if nodes_max > 1
        && !args
            .store
            .as_deref()
            .is_some_and(|s| s.starts_with("postgres"))
    {
        anyhow::bail!(
            "--nodes above 1 needs --store postgres://... (an SQLite store has one process)"
        );
    }
    let temp;
    let data_dir = match &args.data_dir {
        Some(d) => d.clone(),
        None => {
            temp = tempfile::Builder::new().prefix("throng-bench-").tempdir()?;
            temp.path().to_path_buf()
        }
    };
    let exe = std::env::current_exe()?;
    let store_flags = store_flags(&args, &data_dir);
    let seed_s = if args.no_seed {
        None
    } else {
        Some(seed(&exe, exp.as_ref(), &args, &store_flags)?)
    };
    let store_url: crate::store::StoreUrl = match &args.store {
        Some(s) => s.parse().map_err(|e: String| anyhow::anyhow!(e))?,
        None => crate::store::StoreUrl::Sqlite(data_dir.join("throng.db")),
    };
    let offline = exp.offline(&store_url, args.scale)?;
    for line in &offline {
        println!("{line}");
    }
    // What the comparison designs need outside throng, for every node.
    let backends = exp.start_backends(&data_dir)?;
    let serve_args = [exp.serve_args(), backends.serve_args.clone()].concat();
    // Every node shares the data directory (its secrets) and the store.
    // One node runs with the default writers; the rows of k > 1 nodes run on
    // nodes sized as README says (`writers_per_node`), started beside it.
    // Declared before the servers: they stop before their binary goes.
    let server_exe = super::server_binary::ServerBinary::copy_current()?;
    let mut servers = vec![ChildServer::start(
        server_exe.path(),
        exp.name(),
        &store_flags,
        &serve_args,
    )?];
    // The addresses each count of nodes runs on; counts with the same
    // writers per node share their servers (the first k of them).
    let mut node_sets = std::collections::HashMap::from([(1, vec![servers[0].addr])]);
    let mut sized: std::collections::HashMap<usize, Vec<SocketAddr>> = Default::default();
    for &k in args.nodes.iter().filter(|&&k| k > 1) {
        let w = writers_per_node(k);
        let group = sized.entry(w).or_default();
        while group.len() < k {
            let mut extra = serve_args.clone();
            if pg_writers_env().is_none() {
                extra.extend(["--pg-writers".to_string(), w.to_string()]);
            }
            let server = ChildServer::start(server_exe.path(), exp.name(), &store_flags, &extra)?;
            group.push(server.addr);
            servers.push(server);
        }
        node_sets.insert(k, group[..k].to_vec());
    }
    exp.prepare(&data_dir, servers[0].addr)?;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let pids: std::collections::HashMap<SocketAddr, u32> =
        servers.iter().map(|s| (s.addr, s.pid())).collect();
    let mut report = rt.block_on(measure_all(
        exp.as_ref(),
        &args,
        &servers[0],
        &node_sets,
        &pids,
        seed_s,
    ))?;
    report.notes.extend(offline);
    for server in &mut servers {
        server.stop();
    }
    drop(backends);
    report.print();
    let (json, md) = report.write(&args.out_dir)?;
    println!("\nwrote {} and {}", json.display(), md.display());
    Ok(())
}

/// `THRONG_PG_WRITERS` as set for this process (its children inherit it).
fn pg_writers_env() -> Option<String> {
    std::env::var("THRONG_PG_WRITERS")
        .ok()
        .filter(|v| !v.is_empty())
}

/// PostgreSQL writers per node when `nodes` nodes share one database, as
/// README sizes them: the writers of all nodes together about as many as
/// one node's default (PostgreSQL's cores), at least 1 each (BENCHMARKS.md,
/// "Writers per node"). `THRONG_PG_WRITERS`, when set, applies to every node.
fn writers_per_node(nodes: usize) -> usize {
    match pg_writers_env().and_then(|v| v.parse::<usize>().ok()) {
        Some(w) => w,
        None => (crate::store::StoreLimits::default().pg_writers / nodes.max(1)).max(1),
    }
}

fn store_flags(args: &BenchArgs, data_dir: &Path) -> Vec<String> {
    let mut flags = vec!["--data-dir".to_string(), data_dir.display().to_string()];
    if let Some(s) = &args.store {
        flags.push("--store".into());
        flags.push(s.clone());
    }
    flags
}

fn seed(
    exe: &Path,
    exp: &dyn Experiment,
    args: &BenchArgs,
    store_flags: &[String],
) -> anyhow::Result<f64> {
    let started = Instant::now();
    let mut cmd = Command::new(exe);
    cmd.arg("seed")
        .args(store_flags)
        .args(exp.seed_args(args.scale));
    if args.store.is_some() {
        cmd.arg("--force");
    }
    eprintln!("seeding: {:?}", cmd);
    let status = cmd.status()?;
    if !status.success() {
        anyhow::bail!("seeding failed ({status})");
    }
    Ok(started.elapsed().as_secs_f64())
}

/// A `throng bench-server EXPERIMENT` child process: `throng serve` plus the
/// experiment's comparison designs.
pub struct ChildServer {
    child: Child,
    pub addr: SocketAddr,
}

impl ChildServer {
    pub fn start(
        exe: &Path,
        experiment: &str,
        store_flags: &[String],
        extra: &[String],
    ) -> anyhow::Result<ChildServer> {
        let mut child = Command::new(exe)
            .args(["bench-server", experiment])
            .args(["--listen", "127.0.0.1:0", "--in-flight-max", "100000"])
            .args(store_flags)
            .args(extra)
            .env("RUST_LOG", "warn")
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()?;
        let stdout = child.stdout.take().expect("piped stdout");
        let mut lines = BufReader::new(stdout).lines();
        let deadline = Instant::now() + Duration::from_secs(120);
        while Instant::now() < deadline {
            let Some(line) = lines.next() else { break };
            let line = line?;
            if let Some(url) = line.strip_prefix("throng listening on http://") {
                let addr = url.trim().parse()?;
                // Keep draining stdout so the child never blocks on a full pipe.
                std::thread::spawn(move || for _ in lines.by_ref() {});
                return Ok(ChildServer { child, addr });
            }
        }
        let _ = child.kill();
        anyhow::bail!("the server did not report its address")
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Resident memory in MiB (from /proc): (now, peak, anonymous, file-backed).
    /// File-backed pages are mostly the binary's own code and data (~9 MiB),
    /// plus the database file where read connections map it: the kernel's
    /// page cache, reclaimable, shared.
    pub fn rss_mib(&self) -> (f64, f64, f64, f64) {
        let status =
            std::fs::read_to_string(format!("/proc/{}/status", self.pid())).unwrap_or_default();
        let field = |name: &str| {
            status
                .lines()
                .find(|l| l.starts_with(name))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|v| v.parse::<f64>().ok())
                .map(|kib| kib / 1024.0)
                .unwrap_or(0.0)
        };
        (
            field("VmRSS:"),
            field("VmHWM:"),
            field("RssAnon:"),
            field("RssFile:"),
        )
    }

    /// Starts a new peak: the kernel's VmHWM is reset to the current
    /// resident size (`/proc/PID/clear_refs` value 5), so the next
    /// `rss_mib` peak belongs to what ran since. False where that is not
    /// allowed (the peak then spans the whole run).
    pub fn reset_rss_peak(&self) -> bool {
        std::fs::write(format!("/proc/{}/clear_refs", self.pid()), "5").is_ok()
    }

    pub fn stop(&mut self) {
        crate::experiment::stop_child(&mut self.child, Duration::from_secs(10));
    }
}

impl Drop for ChildServer {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// The ceiling: `GET /health`, the default workload.
fn ceiling() -> Workload {
    Workload {
        name: CEILING.into(),
        ..Workload::default()
    }
}

const CEILING: &str = "GET /health (ceiling)";
/// The ceiling's rows in the comparison designs' phase.
const CEILING_OF_COMPARISONS: &str = "GET /health (ceiling, comparison phase)";

/// Nodes one bench may start.
const NODES_MAX: usize = 8;

/// Runs `factory` against `addrs` at once, `connections` split evenly over
/// them, and sums what they answered (latency percentiles: the worst node's).
async fn measure_on(
    addrs: &[SocketAddr],
    connections: usize,
    duration: Duration,
    factory: measure::RequestFactory,
) -> anyhow::Result<measure::Summary> {
    if let [addr] = addrs {
        return measure::closed_loop(*addr, &addr.to_string(), connections, duration, factory)
            .await;
    }
    let per_node = (connections / addrs.len()).max(1);
    let runs =
        addrs.iter().map(|addr| {
            let (addr, factory) = (*addr, factory.clone());
            async move {
                measure::closed_loop(addr, &addr.to_string(), per_node, duration, factory).await
            }
        });
    let mut sum = measure::Summary::default();
    for s in futures::future::try_join_all(runs).await? {
        sum.requests += s.requests;
        sum.requests_per_s += s.requests_per_s;
        sum.duration_s = sum.duration_s.max(s.duration_s);
        sum.latency_us_p50 = sum.latency_us_p50.max(s.latency_us_p50);
        sum.latency_us_p99 = sum.latency_us_p99.max(s.latency_us_p99);
        sum.latency_us_max = sum.latency_us_max.max(s.latency_us_max);
        for (code, n) in s.status_counts {
            *sum.status_counts.entry(code).or_insert(0) += n;
        }
        for (e, n) in s.errors {
            *sum.errors.entry(e).or_insert(0) += n;
        }
        sum.bytes_received += s.bytes_received;
    }
    Ok(sum)
}

async fn scrape_all(addrs: &[SocketAddr]) -> WriterStats {
    let mut total = WriterStats::default();
    for addr in addrs {
        total = total.plus(&WriterStats::scrape(*addr).await);
    }
    total
}

/// One measured line of the report: a workload with one connection count on
/// one count of nodes.
struct Row {
    /// Index into the workloads (0: the ceiling).
    workload: usize,
    name: String,
    connections: usize,
    nodes: usize,
    /// Measured in the second phase, with the comparison designs.
    comparison_phase: bool,
}

/// The order of `rows` in run `run`: as they are on even runs; on odd runs
/// each connection count's workloads reversed, its ceiling still first
/// (A B, then B A). A workload that writes grows the store the next one
/// runs on (a bigger table, a longer WAL), so in one fixed order the later
/// workload always paid for the earlier; with `--runs` even, each is
/// measured as often first as last.
fn run_order(rows: &[Row], run: usize) -> Vec<usize> {
    let mut order: Vec<usize> = (0..rows.len()).collect();
    if run % 2 == 1 {
        order.sort_by_key(|&r| {
            (
                rows[r].connections,
                rows[r].workload != 0,
                std::cmp::Reverse(r),
            )
        });
    }
    order
}

/// Rows of one phase in the order they are measured: by connection count,
/// the ceiling first at each, so a row's ceiling is measured next to it.
fn phase_rows(rows: Vec<Row>, comparison_phase: bool) -> Vec<Row> {
    let mut counts: Vec<usize> = rows.iter().map(|r| r.connections).collect();
    counts.sort_unstable();
    counts.dedup();
    let mut out: Vec<Row> = counts
        .iter()
        .map(|&c| Row {
            workload: 0,
            name: if comparison_phase {
                CEILING_OF_COMPARISONS.into()
            } else {
                CEILING.into()
            },
            connections: c,
            nodes: 1,
            comparison_phase,
        })
        .chain(rows)
        .collect();
    // Stable: within a count, the ceiling, then the workloads in order.
    out.sort_by_key(|r| (r.connections, r.workload != 0));
    out
}

async fn measure_all(
    exp: &dyn Experiment,
    args: &BenchArgs,
    server: &ChildServer,
    node_sets: &std::collections::HashMap<usize, Vec<SocketAddr>>,
    pids: &std::collections::HashMap<SocketAddr, u32>,
    seed_s: Option<f64>,
) -> anyhow::Result<BenchReport> {
    let mut workloads = vec![ceiling()];
    workloads.extend(
        exp.workloads(args.scale)
            .into_iter()
            .filter(|w| args.only.is_empty() || args.only.iter().any(|o| w.name.contains(o))),
    );
    if workloads.len() == 1 {
        anyhow::bail!(
            "--only {:?} matches none of {}'s workloads",
            args.only.join(" or "),
            exp.name()
        );
    }
    let counts_of = |w: &Workload| -> Vec<usize> {
        if !args.connections.is_empty() {
            args.connections.clone()
        } else if !w.connections.is_empty() {
            w.connections.clone()
        } else {
            vec![exp.connections()]
        }
    };
    // A row per workload and connection count; the experiment's own
    // workloads again for every count of nodes above 1 (`--nodes`), as rows
    // "... (N nodes)". Skipped workloads have no row, only their reason.
    let mut own = Vec::new();
    let mut comparisons = Vec::new();
    let mut skipped = Vec::new();
    for (i, w) in workloads.iter().enumerate().skip(1) {
        for c in counts_of(w) {
            if w.skipped.is_some() {
                skipped.push((i, c));
                continue;
            }
            let row = |nodes: usize| Row {
                workload: i,
                name: if nodes == 1 {
                    w.name.clone()
                } else {
                    format!("{} ({nodes} nodes)", w.name)
                },
                connections: c,
                nodes,
                comparison_phase: w.comparison,
            };
            if w.comparison {
                comparisons.push(row(1));
            } else {
                own.push(row(1));
                for &k in args.nodes.iter().filter(|&&k| k > 1) {
                    own.push(row(k));
                }
            }
        }
    }
    // Two phases: the service's own workloads (with the ceiling), then the
    // comparison designs (with the ceiling again). Whatever a comparison
    // leaves resident (a database-per-request design maps pages of the
    // database through the read connections) then cannot count in the
    // service's own peak, which is held to the experiment's limit.
    let mut phases = vec![phase_rows(own, false)];
    if !comparisons.is_empty() {
        phases.push(phase_rows(comparisons, true));
    }
    let duration = Duration::from_secs(args.duration_s);
    let mut runs: Vec<Vec<Vec<measure::Summary>>> =
        phases.iter().map(|p| vec![Vec::new(); p.len()]).collect();
    let mut writer_stats: Vec<Vec<Vec<WriterStats>>> =
        phases.iter().map(|p| vec![Vec::new(); p.len()]).collect();
    let mut usages: Vec<Vec<Vec<Usage>>> =
        phases.iter().map(|p| vec![Vec::new(); p.len()]).collect();
    let mut peak_own_mib: f64 = 0.0;
    let mut peak_comparison_mib: Option<f64> = None;
    let mut peaks_reset = true;
    for (phase, rows) in phases.iter().enumerate() {
        for row in rows {
            let w = &workloads[row.workload];
            eprintln!("warm-up: {} ({} connections)", row.name, row.connections);
            before_run(w, Duration::from_secs(args.warmup_s)).await?;
            measure_on(
                &node_sets[&row.nodes],
                row.connections,
                Duration::from_secs(args.warmup_s),
                w.factory.clone(),
            )
            .await?;
        }
        for run in 0..args.runs {
            for r in run_order(rows, run) {
                let row = &rows[r];
                let w = &workloads[row.workload];
                before_run(w, duration).await?;
                peaks_reset &= server.reset_rss_peak();
                let on = &node_sets[&row.nodes][..];
                let on_pids: Vec<u32> = on.iter().filter_map(|a| pids.get(a).copied()).collect();
                let before = scrape_all(on).await;
                let used_before = Usage::sample(&on_pids);
                let s = measure_on(on, row.connections, duration, w.factory.clone()).await?;
                usages[phase][r].push(Usage::sample(&on_pids).since(&used_before));
                let writer = scrape_all(on).await.since(&before);
                let (_, peak, _, _) = server.rss_mib();
                eprintln!(
                    "run {}/{}: {:<40} {:>4} conns {:>9.0} req/s  p50 {:>6} us  p99 {:>7} us  peak {:.0} MiB{}",
                    run + 1,
                    args.runs,
                    row.name,
                    row.connections,
                    s.requests_per_s,
                    s.latency_us_p50,
                    s.latency_us_p99,
                    peak,
                    writer.describe(duration)
                );
                writer_stats[phase][r].push(writer);
                runs[phase][r].push(s);
                if row.comparison_phase {
                    peak_comparison_mib = Some(peak_comparison_mib.unwrap_or(0.0).max(peak));
                } else {
                    peak_own_mib = peak_own_mib.max(peak);
                }
            }
        }
    }
    let (rss_mib, rss_mib_peak_all, rss_anon_mib, rss_file_mib) = server.rss_mib();
    // Without per-workload peaks, the whole run's peak is all we know.
    let rss_mib_peak = if phases[0].is_empty() {
        None
    } else if peaks_reset {
        Some(peak_own_mib)
    } else {
        Some(rss_mib_peak_all)
    };
    let rss_mib_peak_comparison = if peaks_reset {
        peak_comparison_mib
    } else {
        None
    };
    let mut results = Vec::new();
    for (phase, rows) in phases.iter().enumerate() {
        // Each count's ceiling in this phase: its rows' ratios use it.
        let ceiling_of = |c: usize| {
            rows.iter()
                .position(|r| r.workload == 0 && r.connections == c)
                .map(|i| median_by(&runs[phase][i], |s| s.requests_per_s))
                .unwrap_or(0.0)
        };
        for (r, row) in rows.iter().enumerate() {
            let w = &workloads[row.workload];
            let mut result =
                WorkloadResult::from_runs(w, &runs[phase][r], ceiling_of(row.connections));
            result.name = row.name.clone();
            result.connections = row.connections;
            result.comparison = row.comparison_phase;
            if row.nodes > 1 {
                // The experiment's targets are about one node.
                result.target_ratio_min = None;
                result.target_met = None;
                result.published = String::new();
                result.alternative_to = None;
            }
            let total = writer_stats[phase][r]
                .iter()
                .fold(WriterStats::default(), |a, b| a.plus(b));
            result.set_writer(&total, args.runs as f64 * duration.as_secs_f64());
            let used = usages[phase][r]
                .iter()
                .fold(Usage::default(), |a, b| a.plus(b));
            let requests: f64 = runs[phase][r].iter().map(|s| s.requests as f64).sum();
            result.set_usage(&used, requests, args.runs as f64 * duration.as_secs_f64());
            results.push(result);
        }
    }
    for (i, c) in skipped {
        let mut result = WorkloadResult::skipped(&workloads[i]);
        result.connections = c;
        results.push(result);
    }
    compare_with_own(&mut results);
    let mut connections: Vec<usize> = results.iter().map(|r| r.connections).collect();
    connections.sort_unstable();
    connections.dedup();
    Ok(BenchReport {
        experiment: exp.name().to_string(),
        about: exp.about().to_string(),
        scale: format!("{:?}", args.scale).to_lowercase(),
        runs: args.runs,
        duration_s: args.duration_s,
        connections,
        store: args
            .store
            .clone()
            .map(|s| {
                if s.starts_with("postgres") {
                    "postgres".into()
                } else {
                    s
                }
            })
            .unwrap_or_else(|| "sqlite".into()),
        seed_s,
        results,
        rss_mib,
        rss_mib_peak,
        rss_mib_peak_comparison,
        rss_anon_mib,
        rss_file_mib,
        rss_mib_max: exp.rss_mib_max(args.scale),
        notes: exp.notes(),
        cores: std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(1),
        command: std::env::args().collect::<Vec<_>>().join(" "),
    })
}

async fn before_run(w: &Workload, run: Duration) -> anyhow::Result<()> {
    match &w.before_run {
        Some(hook) => hook(run)
            .await
            .map_err(|e| e.context(format!("before a run of {}", w.name))),
        None => Ok(()),
    }
}

/// Sets each comparison design's figures against the own workload it is an
/// alternative to, measured with the same connection count in the same
/// bench: the own one's req/s divided by the design's, and the same with
/// each first divided by its phase's ceiling (which takes out how much the
/// machine's speed moved between the phases).
fn compare_with_own(results: &mut [WorkloadResult]) {
    let own: Vec<(String, usize, f64, f64)> = results
        .iter()
        .filter(|r| !r.comparison && r.skipped.is_none())
        .map(|r| {
            (
                r.name.clone(),
                r.connections,
                r.requests_per_s,
                r.ratio_to_ceiling,
            )
        })
        .collect();
    for r in results.iter_mut().filter(|r| r.skipped.is_none()) {
        let Some(of) = &r.alternative_to else {
            continue;
        };
        let Some((_, _, rps, ratio)) = own
            .iter()
            .find(|(name, c, _, _)| name == of && *c == r.connections)
        else {
            continue;
        };
        if r.requests_per_s > 0.0 {
            r.own_divided_by_this = Some(rps / r.requests_per_s);
        }
        if r.ratio_to_ceiling > 0.0 {
            r.own_divided_by_this_per_ceiling = Some(ratio / r.ratio_to_ceiling);
        }
    }
}

pub fn median_by(runs: &[measure::Summary], f: impl Fn(&measure::Summary) -> f64) -> f64 {
    let mut v: Vec<f64> = runs.iter().map(f).collect();
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    if v.is_empty() {
        0.0
    } else {
        v[v.len() / 2]
    }
}

/// The server's writer counters and its own time per HTTP request,
/// scraped from `/metrics`.
#[derive(Clone, Debug, Default)]
pub struct WriterStats {
    pub batches: f64,
    pub commands: f64,
    pub commit_s: f64,
    /// Requests answered, every route (`/metrics` itself included).
    pub http_requests: f64,
    /// Their time in the server as admission control measures it: from the
    /// parsed head to the answer made (reading the body, the handler and any
    /// wait for the writer included; parsing the head and writing the
    /// answer to the socket not).
    pub http_s: f64,
}

impl WriterStats {
    pub async fn scrape(addr: SocketAddr) -> WriterStats {
        let Ok(res) = reqwest::get(format!("http://{addr}/metrics")).await else {
            return WriterStats::default();
        };
        let text = res.text().await.unwrap_or_default();
        // The sum over every series of `name` (with labels or without).
        let value = |name: &str| -> f64 {
            text.lines()
                .filter(|l| {
                    l.starts_with(name) && matches!(l.as_bytes().get(name.len()), Some(b' ' | b'{'))
                })
                .filter_map(|l| l.rsplit(' ').next())
                .filter_map(|v| v.parse::<f64>().ok())
                .sum()
        };
        WriterStats {
            batches: value("throng_store_write_batch_commands_count"),
            commands: value("throng_store_write_batch_commands_sum"),
            commit_s: value("throng_store_commit_seconds_sum"),
            http_requests: value("throng_http_request_duration_seconds_count"),
            http_s: value("throng_http_request_duration_seconds_sum"),
        }
    }
    pub fn since(&self, before: &WriterStats) -> WriterStats {
        WriterStats {
            batches: self.batches - before.batches,
            commands: self.commands - before.commands,
            commit_s: self.commit_s - before.commit_s,
            http_requests: self.http_requests - before.http_requests,
            http_s: self.http_s - before.http_s,
        }
    }
    pub fn plus(&self, o: &WriterStats) -> WriterStats {
        WriterStats {
            batches: self.batches + o.batches,
            commands: self.commands + o.commands,
            commit_s: self.commit_s + o.commit_s,
            http_requests: self.http_requests + o.http_requests,
            http_s: self.http_s + o.http_s,
        }
    }
    /// The server's mean time per request, in ms (`None` without requests).
    pub fn server_ms_mean(&self) -> Option<f64> {
        (self.http_requests > 0.0).then(|| self.http_s * 1000.0 / self.http_requests)
    }
    pub fn commands_per_batch(&self) -> f64 {
        if self.batches > 0.0 {
            self.commands / self.batches
        } else {
            0.0
        }
    }
    pub fn commit_ms_mean(&self) -> f64 {
        if self.batches > 0.0 {
            self.commit_s * 1000.0 / self.batches
        } else {
            0.0
        }
    }
    /// Commit time as a share of `over` (how busy the writer was).
    pub fn busy_share(&self, over: Duration) -> f64 {
        if over.is_zero() {
            0.0
        } else {
            self.commit_s / over.as_secs_f64()
        }
    }
    fn describe(&self, over: Duration) -> String {
        let server = match self.server_ms_mean() {
            Some(ms) => format!("  server {ms:.3} ms/request"),
            None => String::new(),
        };
        if self.batches < 1.0 {
            return server;
        }
        format!(
            "{server}  writer: {:.0} batches, {:.1} commands/batch, {:.2} ms/batch, committing {:.0}% of the run",
            self.batches,
            self.commands_per_batch(),
            self.commit_ms_mean(),
            100.0 * self.busy_share(over)
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(workload: usize, connections: usize) -> Row {
        Row {
            workload,
            name: format!("w{workload}"),
            connections,
            nodes: 1,
            comparison_phase: false,
        }
    }

    /// Each count's ceiling is measured first among that count's rows, and
    /// the rows keep the workloads' order within a count.
    #[test]
    fn each_count_runs_its_ceiling_then_its_rows() {
        let rows = phase_rows(
            vec![row(1, 16), row(1, 256), row(2, 256), row(1, 64), row(3, 16)],
            false,
        );
        let order: Vec<(usize, usize)> = rows.iter().map(|r| (r.workload, r.connections)).collect();
        assert_eq!(
            order,
            [
                (0, 16),
                (1, 16),
                (3, 16),
                (0, 64),
                (1, 64),
                (0, 256),
                (1, 256),
                (2, 256)
            ]
        );
        assert!(rows
            .iter()
            .filter(|r| r.workload == 0)
            .all(|r| r.name == CEILING));
        let theirs = phase_rows(vec![row(4, 64)], true);
        assert_eq!(theirs[0].name, CEILING_OF_COMPARISONS);
    }

    /// Odd runs measure each count's workloads in reverse, the ceiling
    /// still first; even runs as the rows are.
    #[test]
    fn odd_runs_reverse_each_counts_workloads() {
        let rows = phase_rows(vec![row(1, 16), row(2, 16), row(1, 64), row(2, 64)], false);
        let in_run = |run| -> Vec<(usize, usize)> {
            run_order(&rows, run)
                .into_iter()
                .map(|r| (rows[r].workload, rows[r].connections))
                .collect()
        };
        let forward = [(0, 16), (1, 16), (2, 16), (0, 64), (1, 64), (2, 64)];
        assert_eq!(in_run(0), forward);
        assert_eq!(in_run(2), forward);
        assert_eq!(
            in_run(1),
            [(0, 16), (2, 16), (1, 16), (0, 64), (2, 64), (1, 64)]
        );
    }

    fn result(name: &str, connections: usize, rps: f64, ratio: f64) -> WorkloadResult {
        let mut r = WorkloadResult::from_runs(&Workload::default(), &[], 0.0);
        r.name = name.into();
        r.connections = connections;
        r.requests_per_s = rps;
        r.ratio_to_ceiling = ratio;
        r
    }

    /// A design is divided into the own workload it replaces at the same
    /// connection count only; a skipped one gets no figure.
    #[test]
    fn designs_are_compared_at_their_own_count() {
        let mut theirs = result("redis", 16, 20_000.0, 0.2);
        theirs.comparison = true;
        theirs.alternative_to = Some("ours".into());
        let mut skipped = result("durable", 16, 0.0, 0.0);
        skipped.comparison = true;
        skipped.alternative_to = Some("ours".into());
        skipped.skipped = Some("redis-server is not on the PATH".into());
        let mut results = vec![
            result("ours", 16, 30_000.0, 0.4),
            result("ours", 64, 60_000.0, 0.5),
            theirs,
            skipped,
        ];
        compare_with_own(&mut results);
        assert_eq!(results[2].own_divided_by_this, Some(1.5));
        assert_eq!(results[2].own_divided_by_this_per_ceiling, Some(2.0));
        assert_eq!(results[3].own_divided_by_this, None);
        assert_eq!(results[0].own_divided_by_this, None);
    }

    /// Every description starts in the same column, whatever the longest
    /// experiment name (e.g. `comments-nocache`).
    #[test]
    fn list_aligns_descriptions_after_the_longest_name() {
        let all = experiments();
        let text = list_text(all.iter().map(|e| (e.name(), e.about())));
        let lines: Vec<&str> = text.lines().skip(1).collect();
        assert_eq!(lines.len(), all.len());
        let columns: Vec<usize> = all
            .iter()
            .zip(&lines)
            .map(|(e, line)| line.find(e.about()).expect("description on its line"))
            .collect();
        assert!(
            columns.windows(2).all(|w| w[0] == w[1]),
            "descriptions start at columns {columns:?}:\n{text}"
        );
        let longest = all.iter().map(|e| e.name().len()).max().unwrap();
        assert!(longest > 12, "a name longer than the old fixed width");
        assert_eq!(columns[0], 2 + longest + 2);
    }
}
