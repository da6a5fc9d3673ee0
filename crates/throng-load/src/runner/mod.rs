//! Runs a loaded script: arrivals follow the phase schedule exactly, each arrival starts one
//! virtual user running one scenario (weighted pick), metrics are printed every period and
//! summarised at the end.

mod exchange;
mod vuser;

use std::{
    collections::{BTreeSet, HashMap},
    net::SocketAddr,
    sync::{
        atomic::{AtomicU64, Ordering},
        Arc, Mutex,
    },
    time::{Duration, Instant},
};

use rand::Rng;
use tokio::task::JoinSet;

use crate::{
    ensure::{self, Check},
    metrics::Metrics,
    report::{console, Report},
    schedule::Phase,
    script::Script,
    warn::Warnings,
};

/// Artillery prints and records intermediate metrics every 10 seconds.
pub const PERIOD_DEFAULT: Duration = Duration::from_secs(10);
/// Distinct per-endpoint metric names kept; further endpoints are not broken out.
pub const ENDPOINTS_MAX: usize = 64;

#[derive(Debug, Clone)]
pub struct RunOptions {
    pub period: Duration,
    /// Print intermediate periods and the summary to stdout.
    pub print: bool,
}

impl Default for RunOptions {
    fn default() -> Self {
        Self {
            period: PERIOD_DEFAULT,
            print: true,
        }
    }
}

#[derive(Debug, Clone)]
pub struct RunOutcome {
    pub report: Report,
    pub checks: Vec<Check>,
    pub elapsed: Duration,
}

impl RunOutcome {
    /// 0 when every strict `ensure` check passed, else 1.
    pub fn exit_code(&self) -> i32 {
        if ensure::passed(&self.checks) {
            0
        } else {
            1
        }
    }
}

/// State shared by the virtual users of one run.
pub(crate) struct Ctx {
    pub script: Arc<Script>,
    pub metrics: Metrics,
    pub warnings: Warnings,
    pub active_vusers: AtomicU64,
    pub endpoints: Mutex<BTreeSet<String>>,
    pub addrs: Mutex<HashMap<(String, u16), SocketAddr>>,
    pub regexes: Mutex<HashMap<String, regex::Regex>>,
    pub expect_details: AtomicU64,
}

/// Runs the script to completion (all phases, then all virtual users finish).
pub async fn run(script: Arc<Script>, opts: RunOptions) -> RunOutcome {
    for w in &script.warnings {
        eprintln!("warning: {w}");
    }
    let ctx = Arc::new(Ctx {
        script: script.clone(),
        metrics: Metrics::new(),
        warnings: Warnings::default(),
        active_vusers: AtomicU64::new(0),
        endpoints: Mutex::new(BTreeSet::new()),
        addrs: Mutex::new(HashMap::new()),
        regexes: Mutex::new(HashMap::new()),
        expect_details: AtomicU64::new(0),
    });
    let started = Instant::now();
    let ticker = tokio::spawn(print_periods(ctx.clone(), opts.clone()));
    let mut vusers = JoinSet::new();
    let mut phase_start = tokio::time::Instant::now();
    for (i, phase) in script.phases.iter().enumerate() {
        if opts.print {
            println!(
                "Phase started: {} (index: {i}, duration: {}s)",
                phase_label(phase),
                phase.duration().as_secs_f64()
            );
        }
        run_phase(&ctx, phase, phase_start, &mut vusers).await;
        phase_start += phase.duration();
        tokio::time::sleep_until(phase_start).await;
        if opts.print {
            println!(
                "Phase completed: {} (index: {i}, duration: {}s)",
                phase_label(phase),
                phase.duration().as_secs_f64()
            );
        }
    }
    while vusers.join_next().await.is_some() {}
    ticker.abort();
    let elapsed = started.elapsed();
    let last = ctx.metrics.rotate();
    if opts.print && last.counters.values().any(|v| *v > 0) {
        console::print_period(&last);
    }
    let mut report = ctx.metrics.finish();
    // Artillery always lists these, even at zero.
    for name in ["vusers.created", "vusers.completed", "vusers.failed"] {
        report
            .aggregate
            .counters
            .entry(name.to_string())
            .or_insert(0);
    }
    let checks = ensure::evaluate(&script.ensure, &report.aggregate);
    if opts.print {
        console::print_summary(&report.aggregate, elapsed);
        console::print_checks(&checks);
    }
    RunOutcome {
        report,
        checks,
        elapsed,
    }
}

fn phase_label(phase: &Phase) -> String {
    if phase.name().is_empty() {
        "unnamed".into()
    } else {
        phase.name().to_string()
    }
}

async fn run_phase(
    ctx: &Arc<Ctx>,
    phase: &Phase,
    start: tokio::time::Instant,
    vusers: &mut JoinSet<()>,
) {
    let Phase::Arrivals { max_vusers, .. } = phase else {
        return;
    };
    for k in 0..phase.arrival_count() {
        tokio::time::sleep_until(start + phase.arrival_offset(k)).await;
        // Reap finished users so the set does not grow with the run.
        while vusers.try_join_next().is_some() {}
        let active = ctx.active_vusers.load(Ordering::Relaxed);
        if max_vusers.is_some_and(|max| active >= max) {
            ctx.metrics.counter("vusers.skipped", 1);
            continue;
        }
        ctx.active_vusers.fetch_add(1, Ordering::Relaxed);
        let scenario = pick_scenario(&ctx.script);
        vusers.spawn(vuser::run(ctx.clone(), scenario));
    }
}

/// Weighted random pick, as Artillery does.
fn pick_scenario(script: &Script) -> usize {
    let total: f64 = script.scenarios.iter().map(|s| s.weight).sum();
    let mut x = rand::thread_rng().gen_range(0.0..total);
    for (i, s) in script.scenarios.iter().enumerate() {
        if x < s.weight {
            return i;
        }
        x -= s.weight;
    }
    script
        .scenarios
        .iter()
        .rposition(|s| s.weight > 0.0)
        .unwrap_or(0)
}

async fn print_periods(ctx: Arc<Ctx>, opts: RunOptions) {
    let mut next = tokio::time::Instant::now() + opts.period;
    loop {
        tokio::time::sleep_until(next).await;
        next += opts.period;
        let period = ctx.metrics.rotate();
        if opts.print {
            console::print_period(&period);
        }
    }
}
