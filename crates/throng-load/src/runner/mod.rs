//! Runs a loaded script: arrivals follow the phase schedule exactly, each arrival starts one
//! virtual user running one scenario (weighted pick), metrics are printed every period and
//! summarised at the end. Closed-model phases (`vusers`) instead hold a pool of looping
//! virtual users (`pool.rs`). Each phase's concurrency is reported in [`Report::phases`].

mod exchange;
mod pool;
mod vuser;

pub(crate) use exchange::written_path;
pub(crate) use vuser::number;

use std::{
    collections::{BTreeSet, HashMap},
    net::SocketAddr,
    sync::{atomic::AtomicU64, Arc, Mutex},
    time::{Duration, Instant},
};

use rand::Rng;
use tokio::task::JoinSet;

use crate::{
    ensure::{self, Check},
    metrics::Metrics,
    report::{console, PhaseReport, Report},
    schedule::Phase,
    script::Script,
    warn::Warnings,
};

/// Artillery prints and records intermediate metrics every 10 seconds.
pub const PERIOD_DEFAULT: Duration = Duration::from_secs(10);

/// The report's period for a run of `length`: about 30 to 60 points on its charts (1 s up
/// to a minute, 10 s, Artillery's, from 5 to 20 minutes, a minute past an hour).
pub fn period_for(length: Duration) -> Duration {
    let s = length.as_secs_f64();
    let secs = match s {
        s if s <= 60.0 => 1,
        s if s <= 120.0 => 2,
        s if s <= 300.0 => 5,
        s if s <= 1_200.0 => 10,
        s if s <= 3_600.0 => 30,
        _ => 60,
    };
    Duration::from_secs(secs)
}
/// Distinct per-endpoint metric names kept; further endpoints are not broken out.
pub const ENDPOINTS_MAX: usize = 64;

#[derive(Debug, Clone)]
pub struct RunOptions {
    pub period: Duration,
    /// Print intermediate periods and the summary to stdout.
    pub print: bool,
    /// With `print`: the summary only, not each period (`-q`).
    pub quiet: bool,
    /// Keep each period's histograms in the report ([`crate::report::Period::raw`]), as an
    /// agent of `run --workers` sends them.
    pub keep_histograms: bool,
}

impl Default for RunOptions {
    fn default() -> Self {
        Self {
            period: PERIOD_DEFAULT,
            print: true,
            quiet: false,
            keep_histograms: false,
        }
    }
}

#[derive(Debug, Clone)]
pub struct RunOutcome {
    pub report: Report,
    pub checks: Vec<Check>,
    pub elapsed: Duration,
    /// The exit code the processor's JavaScript set, if any.
    pub suggested_exit_code: Option<i32>,
}

/// Artillery's exit code when an `ensure` check fails.
pub const EXIT_CHECKS_FAILED: i32 = 1;
/// Artillery's exit code when an expectation of the `expect` plugin failed.
pub const EXIT_EXPECTATIONS_FAILED: i32 = 21;

impl RunOutcome {
    /// As `artillery run`: 1 when a strict `ensure` check failed, else the code a processor
    /// function set, else 21 when an expectation failed, else 0.
    pub fn exit_code(&self) -> i32 {
        if !ensure::passed(&self.checks) {
            EXIT_CHECKS_FAILED
        } else if let Some(code) = self.suggested_exit_code {
            code
        } else if self.report.aggregate.counter("plugins.expect.failed") > 0 {
            EXIT_EXPECTATIONS_FAILED
        } else {
            0
        }
    }
}

/// The apdex score of the run's `apdex.*` counters and its rating, as Artillery's plugin
/// computes them; `None` without responses.
pub fn apdex_score(agg: &crate::report::Period) -> Option<(f64, &'static str)> {
    let s = agg.counter("apdex.satisfied") as f64;
    let t = agg.counter("apdex.tolerated") as f64;
    let f = agg.counter("apdex.frustrated") as f64;
    let total = s + t + f;
    if total == 0.0 {
        return None;
    }
    let score = (s + t / 2.0) / total;
    let rating = match score {
        x if x >= 0.94 => "excellent",
        x if x >= 0.85 => "good",
        x if x >= 0.7 => "fair",
        x if x >= 0.49 => "poor",
        _ => "unacceptable",
    };
    Some((score, rating))
}

/// State shared by the virtual users of one run.
pub(crate) struct Ctx {
    pub script: Arc<Script>,
    pub metrics: Metrics,
    pub warnings: Warnings,
    /// Virtual users running now (arrivals and pool members).
    pub running: pool::Gauge,
    /// The closed-model pool's size.
    pub pool: pool::Pool,
    pub endpoints: Mutex<BTreeSet<String>>,
    pub addrs: Mutex<HashMap<(String, u16), SocketAddr>>,
    pub regexes: Mutex<HashMap<String, regex::Regex>>,
    pub expect_details: AtomicU64,
    /// `config.http.pool`: idle connections by `host:port`, shared by every virtual user.
    pub idle: Mutex<HashMap<String, Vec<crate::wire::Conn>>>,
    /// When the last phase ends: no `retryAfter` wait starts that would end later.
    pub phases_end: tokio::time::Instant,
    /// The variables the `before` flow left, given to every virtual user.
    pub before_vars: std::sync::OnceLock<crate::template::Vars>,
    /// The exit code a processor function set (`process.exitCode`), or [`NO_EXIT_CODE`].
    pub exit_code: std::sync::atomic::AtomicI32,
}

/// No exit code set by the processor.
pub const NO_EXIT_CODE: i32 = i32::MIN;

/// Runs the script to completion (all phases, then all virtual users finish).
pub async fn run(script: Arc<Script>, opts: RunOptions) -> RunOutcome {
    for w in &script.warnings {
        eprintln!("warning: {w}");
    }
    let ctx = Arc::new(Ctx {
        script: script.clone(),
        metrics: Metrics::keeping_histograms(opts.keep_histograms),
        warnings: Warnings::default(),
        running: pool::Gauge::default(),
        pool: pool::Pool::default(),
        endpoints: Mutex::new(BTreeSet::new()),
        addrs: Mutex::new(HashMap::new()),
        regexes: Mutex::new(HashMap::new()),
        expect_details: AtomicU64::new(0),
        idle: Mutex::new(HashMap::new()),
        phases_end: tokio::time::Instant::now()
            + script.phases.iter().map(Phase::duration).sum::<Duration>(),
        before_vars: std::sync::OnceLock::new(),
        exit_code: std::sync::atomic::AtomicI32::new(NO_EXIT_CODE),
    });
    if let Some(steps) = &script.before {
        let vars = vuser::once(&ctx, steps).await;
        let _ = ctx.before_vars.set(vars);
    }
    let started = Instant::now();
    let ticker = tokio::spawn(print_periods(ctx.clone(), opts.clone()));
    let mut vusers = JoinSet::new();
    let mut phase_start = tokio::time::Instant::now();
    let mut mark = ctx.running.mark();
    let mut created = ctx.metrics.total_counter("vusers.created");
    let mut phases = Vec::with_capacity(script.phases.len());
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
        if !matches!(script.phases.get(i + 1), Some(Phase::Closed { .. })) {
            // Leaving the closed model: pool users finish their iteration and stop.
            ctx.pool.set_target(0);
        }
        let end = ctx.running.mark();
        let created_end = ctx.metrics.total_counter("vusers.created");
        let held = phase_report(i, phase, &mark, &end, created_end - created);
        (mark, created) = (end, created_end);
        if opts.print {
            println!(
                "Phase completed: {} (index: {i}, duration: {}s)",
                phase_label(phase),
                phase.duration().as_secs_f64()
            );
            if let Some(target) = held.vusers_target {
                println!(
                    "  virtual users held: max {}, mean {} (vusers: {target})",
                    held.vusers_concurrent_max, held.vusers_concurrent_mean
                );
            }
        }
        phases.push(held);
    }
    while vusers.join_next().await.is_some() {}
    if let Some(steps) = &script.after {
        vuser::once(&ctx, steps).await;
    }
    ticker.abort();
    let elapsed = started.elapsed();
    let last = ctx.metrics.rotate();
    if opts.print && !opts.quiet && last.counters.values().any(|v| *v > 0) {
        if opts.period < PERIOD_DEFAULT {
            println!("{}", console::format_period_line(&last));
        } else {
            console::print_period(&last);
        }
    }
    let mut report = ctx.metrics.finish();
    report.phases = phases;
    let code = ctx.exit_code.load(std::sync::atomic::Ordering::Relaxed);
    conclude(
        &script,
        report,
        elapsed,
        (code != NO_EXIT_CODE).then_some(code),
        opts.print,
    )
}

/// The end of a run (also of one merged from agents): the checks on the aggregate (with the
/// apdex score), the endpoint table, the verdict; printed when `print`.
pub fn conclude(
    script: &Script,
    mut report: Report,
    elapsed: Duration,
    suggested_exit_code: Option<i32>,
    print: bool,
) -> RunOutcome {
    // Artillery always lists these, even at zero.
    for name in ["vusers.created", "vusers.completed", "vusers.failed"] {
        report
            .aggregate
            .counters
            .entry(name.to_string())
            .or_insert(0);
    }
    let apdex = script
        .apdex
        .as_ref()
        .filter(|a| a.score)
        .and_then(|_| apdex_score(&report.aggregate));
    let checks = match apdex {
        // `config.apdex` makes the score a metric the checks can read (`apdex > 0.9`).
        Some((score, _)) => {
            let mut with_score = report.aggregate.clone();
            with_score.rates.insert("apdex".into(), score);
            ensure::evaluate(&script.ensure, &with_score)
        }
        None => ensure::evaluate(&script.ensure, &report.aggregate),
    };
    report.thresholds = checks.iter().map(Into::into).collect();
    report.endpoints = crate::report::endpoint_rows(&report.aggregate, &script.endpoints.prefix);
    let mut outcome = RunOutcome {
        report,
        checks,
        elapsed,
        suggested_exit_code,
    };
    let verdict = verdict(&outcome);
    outcome.report.verdict = Some(verdict);
    if print {
        let report = &outcome.report;
        console::print_summary(&report.aggregate, elapsed);
        if let Some((score, rating)) = apdex {
            println!("Apdex score: {score} ({rating})\n");
        }
        print!("{}", console::format_endpoints(&report.endpoints));
        console::print_checks(&outcome.checks);
        if let Some(v) = &report.verdict {
            print!("{}", console::format_verdict(v));
        }
    }
    outcome
}

/// Pass or fail as the exit code says, with the failed checks and expectations, and notes on
/// failed virtual users and errors either way.
fn verdict(outcome: &RunOutcome) -> crate::report::Verdict {
    let agg = &outcome.report.aggregate;
    let exit_code = outcome.exit_code();
    let mut reasons = Vec::new();
    for c in outcome.checks.iter().filter(|c| !c.ok && c.strict) {
        reasons.push(format!("check failed: {}", c.description));
    }
    let expectations = agg.counter("plugins.expect.failed");
    if expectations > 0 {
        reasons.push(format!("{expectations} expectations failed"));
    }
    if reasons.is_empty() {
        let checks = outcome.checks.iter().filter(|c| c.strict).count();
        reasons.push(match checks {
            0 => "no ensure checks".to_string(),
            n => format!("{n} checks passed"),
        });
    }
    let mut notes = Vec::new();
    let (created, failed) = (agg.counter("vusers.created"), agg.counter("vusers.failed"));
    if failed > 0 {
        notes.push(format!("{failed} of {created} virtual users failed"));
    }
    for (k, v) in agg
        .counters
        .iter()
        .filter(|(k, _)| k.starts_with("errors."))
    {
        notes.push(format!("{}: {v}", &k["errors.".len()..]));
    }
    crate::report::Verdict {
        passed: exit_code == 0,
        exit_code,
        reasons,
        notes,
    }
}

fn phase_report(
    index: usize,
    phase: &Phase,
    start: &pool::Mark,
    end: &pool::Mark,
    created: u64,
) -> PhaseReport {
    let kind = match phase {
        Phase::Arrivals { .. } => "arrivals",
        Phase::Pause { .. } => "pause",
        Phase::Closed { .. } => "closed",
    };
    PhaseReport {
        index,
        name: phase.name().to_string(),
        kind: kind.to_string(),
        duration_s: (end.at.saturating_duration_since(start.at).as_secs_f64() * 1000.0).round()
            / 1000.0,
        vusers_target: phase.vusers(),
        vusers_concurrent_max: end.max,
        vusers_concurrent_mean: (end.mean_since(start) * 100.0).round() / 100.0,
        vusers_created: created,
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
    match phase {
        Phase::Pause { .. } => {}
        Phase::Arrivals { max_vusers, .. } => {
            for k in 0..phase.arrival_count() {
                tokio::time::sleep_until(start + phase.arrival_offset(k)).await;
                // Reap finished users so the set does not grow with the run.
                while vusers.try_join_next().is_some() {}
                if max_vusers.is_some_and(|max| ctx.running.get() >= max) {
                    ctx.metrics.counter("vusers.skipped", 1);
                    continue;
                }
                ctx.running.enter();
                let scenario = pick_scenario(&ctx.script);
                vusers.spawn(vuser::run(ctx.clone(), scenario));
            }
        }
        Phase::Closed { vusers: n, .. } => {
            while vusers.try_join_next().is_some() {}
            // The pool's target is the previous closed phase's size, or 0 after any other.
            let from = ctx.pool.target().min(*n);
            let added = n - from;
            if added == 0 {
                // Same size or a step down: surplus users stop after their iteration.
                ctx.pool.set_target(*n);
                return;
            }
            for j in 0..added {
                let offset = phase.closed_start_offset(j, added);
                if !offset.is_zero() {
                    tokio::time::sleep_until(start + offset).await;
                }
                for _ in 0..ctx.pool.set_target(from + j + 1) {
                    ctx.running.enter();
                    vusers.spawn(pool::closed_user(ctx.clone()));
                }
            }
        }
    }
}

/// Weighted random pick, as Artillery does.
pub(crate) fn pick_scenario(script: &Script) -> usize {
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
        if opts.print && !opts.quiet {
            if opts.period < PERIOD_DEFAULT {
                // Short periods: a line each, not a block each.
                println!("{}", console::format_period_line(&period));
            } else {
                console::print_period(&period);
            }
        }
    }
}
