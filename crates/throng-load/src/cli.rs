//! `throng load run|url`: clap arguments and the glue that runs them on a tokio runtime and
//! turns outcomes into exit codes: `artillery run`'s (0 ok, 1 an `ensure` check failed, 21 an
//! expectation of the `expect` plugin failed) and 2 for bad input (script, flags, files).

use std::{path::PathBuf, sync::Arc, time::Duration};

use bytes::Bytes;
use http::Method;

use crate::{
    http::{resolve, Prepared},
    measure::{self, Engine, Model, Plan, Summary},
    report::{html, PlannedPhase, Report, RunSetup},
    runner::{self, RunOptions},
    schedule::{Arrivals, Phase},
    script::{self, duration, LoadOptions, Target},
};

pub const EXIT_OK: i32 = 0;
pub const EXIT_CHECKS_FAILED: i32 = 1;
pub const EXIT_BAD_INPUT: i32 = 2;

#[derive(Debug, Clone, clap::Subcommand)]
pub enum LoadCommand {
    /// Run an Artillery script (YAML) with Artillery's semantics, plus closed-model phases
    /// (`vusers: N`, optional `rampUp`: N looping virtual users held for the phase).
    Run(RunArgs),
    /// Load one URL: open model at a constant rate (--rate) or closed model (--connections).
    Url(UrlArgs),
    /// Serve `run --workers`: run the share of a script's phases a controller sends, answer
    /// with the report.
    Agent(AgentArgs),
}

#[derive(Debug, Clone, clap::Args)]
pub struct AgentArgs {
    /// Address to listen on (a private network: agents do not authenticate).
    #[arg(long, default_value = "127.0.0.1:7654")]
    pub listen: String,
    /// Runtime worker threads.
    #[arg(long, default_value_t = 1)]
    pub threads: usize,
}

#[derive(Debug, Clone, clap::Args)]
pub struct RunArgs {
    /// The Artillery script; payload paths are relative to its folder.
    pub script: PathBuf,
    /// Environment from config.environments, deep-merged over config.
    #[arg(short = 'e', long = "environment")]
    pub environment: Option<String>,
    /// Target URL, overriding config.target (e.g. http://127.0.0.1:8080).
    #[arg(short = 't', long = "target")]
    pub target: Option<String>,
    /// Accept any TLS certificate (as config.tls.rejectUnauthorized: false).
    #[arg(short = 'k', long)]
    pub insecure: bool,
    /// An Artillery configuration file the script is merged over (`--config FILE`, read by
    /// the command line that runs this one).
    #[arg(skip)]
    pub config: Option<PathBuf>,
    /// A CSV file replacing the path of the script's payload (its fields stay).
    #[arg(short = 'p', long)]
    pub payload: Option<PathBuf>,
    /// Variables as a JSON object, merged into config.variables.
    #[arg(short = 'v', long, value_parser = json_object)]
    pub variables: Option<serde_json::Value>,
    /// A JSON object deep-merged over the whole script.
    #[arg(long, value_parser = json_object)]
    pub overrides: Option<serde_json::Value>,
    /// Environment variables from a dotenv file (KEY=value lines), for {{ $env.KEY }};
    /// variables already set win.
    #[arg(long)]
    pub dotenv: Option<PathBuf>,
    /// Run only the scenario of this name.
    #[arg(long)]
    pub scenario_name: Option<String>,
    /// Print only the summary, not each period.
    #[arg(short = 'q', long)]
    pub quiet: bool,
    /// Split the phases among these agents (`throng load agent`), HOST:PORT,...; one merged
    /// report.
    #[arg(long, value_delimiter = ',')]
    pub workers: Vec<String>,
    /// Write the JSON report (Artillery's shape) to this file.
    #[arg(short = 'o', long)]
    pub output: Option<PathBuf>,
    /// Write a self-contained HTML report to this file.
    #[arg(long)]
    pub report: Option<PathBuf>,
    /// Runtime worker threads (1 leaves the other core to a local server).
    #[arg(long, default_value_t = 1)]
    pub threads: usize,
    /// Length of the intermediate periods printed and kept in the JSON report, from 1s to
    /// 1h; by default chosen for the run's length (1s up to a minute, 10s from 5 to 20
    /// minutes, as Artillery's).
    #[arg(long, value_parser = period)]
    pub period: Option<Duration>,
}

/// A JSON object (`-v '{"id": 7}'`).
fn json_object(s: &str) -> Result<serde_json::Value, String> {
    match serde_json::from_str::<serde_json::Value>(s) {
        Ok(v @ serde_json::Value::Object(_)) => Ok(v),
        Ok(other) => Err(format!("a JSON object ({{...}}), got {other}")),
        Err(e) => Err(format!("not JSON: {e}")),
    }
}

/// Reads a dotenv file: `KEY=value` lines (optionally `export KEY=value`, values optionally
/// quoted), `#` comments and blank lines skipped.
pub fn dotenv(text: &str) -> Result<Vec<(String, String)>, String> {
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let line = line.strip_prefix("export ").unwrap_or(line);
        let (k, v) = line
            .split_once('=')
            .ok_or_else(|| format!("line {}: expected KEY=value", i + 1))?;
        let k = k.trim();
        if k.is_empty() || !k.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
            return Err(format!("line {}: {k:?} is not a variable name", i + 1));
        }
        let v = v.trim();
        let v = match (v.chars().next(), v.chars().last()) {
            (Some(q @ ('"' | '\'')), Some(e)) if v.len() >= 2 && q == e => &v[1..v.len() - 1],
            _ => v.split(" #").next().unwrap_or(v).trim_end(),
        };
        out.push((k.to_string(), v.to_string()));
    }
    Ok(out)
}

/// Periods from 1 s to 1 h.
fn period(s: &str) -> Result<Duration, String> {
    let d = duration::parse(s)?;
    if (Duration::from_secs(1)..=Duration::from_secs(3_600)).contains(&d) {
        Ok(d)
    } else {
        Err(format!("{s:?}: a period from 1s to 1h"))
    }
}

#[derive(Debug, Clone, clap::Args)]
pub struct UrlArgs {
    /// http(s)://host[:port]/path?query
    pub url: String,
    /// Open model: requests per second, latency measured from each intended start.
    #[arg(short = 'R', long)]
    pub rate: Option<f64>,
    /// Closed model: connections, each sending as fast as answered. With --rate: the most
    /// connections the open model may use (default 64).
    #[arg(short = 'c', long)]
    pub connections: Option<usize>,
    /// How long to send, e.g. 10s, 1m.
    #[arg(short = 'd', long, value_parser = duration::parse)]
    pub duration: Duration,
    #[arg(short = 'm', long, default_value = "GET")]
    pub method: String,
    /// Send this file as the request body.
    #[arg(long)]
    pub body_file: Option<PathBuf>,
    /// Extra header, 'Name: value' (repeatable).
    #[arg(short = 'H', long = "header")]
    pub headers: Vec<String>,
    /// Per-request timeout.
    #[arg(long, value_parser = duration::parse, default_value = "10s")]
    pub timeout: Duration,
    /// Write the JSON report (same shape as `run --output`).
    #[arg(short = 'o', long)]
    pub output: Option<PathBuf>,
    /// Write a self-contained HTML report.
    #[arg(long)]
    pub report: Option<PathBuf>,
    /// Runtime worker threads (1 leaves the other core to a local server).
    #[arg(long, default_value_t = 1)]
    pub threads: usize,
    /// HTTPS: accept any certificate (Node's rejectUnauthorized: false).
    #[arg(short = 'k', long)]
    pub insecure: bool,
    /// HTTPS: trust the CA certificates of this PEM file instead of the public roots.
    #[arg(long)]
    pub ca: Option<PathBuf>,
    /// HTTP client: `wire` (minimal, wrk-like CPU cost) or `hyper`.
    #[arg(long, value_enum, default_value_t = Engine::Wire)]
    pub engine: Engine,
}

/// Default connection cap for the open model when --connections is not given.
pub const OPEN_CONNECTIONS_DEFAULT: usize = 64;

/// Runs a command on its own runtime and returns the process exit code.
pub fn execute(cmd: LoadCommand) -> i32 {
    if let LoadCommand::Run(RunArgs {
        dotenv: Some(path), ..
    }) = &cmd
    {
        // Before the runtime starts: one thread still reads and writes the environment.
        let vars = std::fs::read_to_string(path)
            .map_err(|e| e.to_string())
            .and_then(|t| dotenv(&t));
        match vars {
            Ok(vars) => {
                for (k, v) in vars {
                    if std::env::var_os(&k).is_none() {
                        std::env::set_var(k, v);
                    }
                }
            }
            Err(e) => {
                eprintln!("error: --dotenv {}: {e}", path.display());
                return EXIT_BAD_INPUT;
            }
        }
    }
    let threads = match &cmd {
        LoadCommand::Run(a) => a.threads,
        LoadCommand::Url(a) => a.threads,
        LoadCommand::Agent(a) => a.threads,
    };
    let runtime = match build_runtime(threads) {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return EXIT_BAD_INPUT;
        }
    };
    runtime.block_on(async move {
        match cmd {
            LoadCommand::Run(args) => run_script(args).await,
            LoadCommand::Url(args) => run_url(args).await,
            LoadCommand::Agent(args) => run_agent(args).await,
        }
    })
}

fn build_runtime(threads: usize) -> std::io::Result<tokio::runtime::Runtime> {
    if threads <= 1 {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
    } else {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(threads)
            .enable_all()
            .build()
    }
}

async fn run_script(args: RunArgs) -> i32 {
    let opts = LoadOptions {
        environment: args.environment.clone(),
        target: args.target.clone(),
        insecure: args.insecure,
        config_file: args.config.clone(),
        overrides: args.overrides.clone(),
        variables: args.variables.clone(),
        // Relative to where the command runs, as Artillery resolves it.
        payload: args
            .payload
            .as_ref()
            .map(|p| std::path::absolute(p).unwrap_or_else(|_| p.clone())),
        scenario_name: args.scenario_name.clone(),
    };
    let script = match script::load(&args.script, &opts) {
        Ok(s) => Arc::new(s),
        Err(e) => {
            eprintln!("error: {e}");
            return EXIT_BAD_INPUT;
        }
    };
    let length: Duration = script.phases.iter().map(Phase::duration).sum();
    let run_options = RunOptions {
        period: args.period.unwrap_or_else(|| runner::period_for(length)),
        quiet: args.quiet,
        ..RunOptions::default()
    };
    let setup = script_setup(&script);
    let mut outcome = if args.workers.is_empty() {
        runner::run(script, run_options).await
    } else {
        let text = match std::fs::read_to_string(&args.script) {
            Ok(t) => t,
            Err(e) => {
                eprintln!("error: {}: {e}", args.script.display());
                return EXIT_BAD_INPUT;
            }
        };
        match crate::distributed::run(script, &text, &opts, &args.workers, run_options.period).await
        {
            Ok(o) => o,
            Err(e) => {
                eprintln!("error: {e}");
                return EXIT_BAD_INPUT;
            }
        }
    };
    outcome.report.setup = Some(setup);
    let title = command_line();
    if let Err(code) = write_outputs(&outcome.report, &title, &args.output, &args.report) {
        return code;
    }
    outcome.exit_code()
}

async fn run_agent(args: AgentArgs) -> i32 {
    let listener = match tokio::net::TcpListener::bind(&args.listen).await {
        Ok(l) => l,
        Err(e) => {
            eprintln!("error: --listen {}: {e}", args.listen);
            return EXIT_BAD_INPUT;
        }
    };
    match listener.local_addr() {
        Ok(a) => println!("throng load agent listening on {a}"),
        Err(e) => eprintln!("warning: {e}"),
    }
    crate::distributed::serve_agent(listener).await;
    EXIT_OK
}

/// A script's target and phases as written, for the reports.
fn script_setup(script: &script::Script) -> RunSetup {
    let phases: Vec<PlannedPhase> = script
        .phases
        .iter()
        .map(|p| {
            let mut planned = PlannedPhase {
                name: p.name().to_string(),
                duration_s: p.duration().as_secs_f64(),
                ..PlannedPhase::default()
            };
            match p {
                Phase::Arrivals {
                    arrivals,
                    max_vusers,
                    ..
                } => {
                    planned.kind = "arrivals".into();
                    planned.max_vusers = *max_vusers;
                    match arrivals {
                        Arrivals::Count(n) => planned.arrival_count = Some(*n),
                        Arrivals::Rate {
                            from_per_s,
                            to_per_s,
                        } => {
                            planned.arrival_rate = Some(*from_per_s);
                            planned.ramp_to = Some(*to_per_s);
                        }
                    }
                }
                Phase::Pause { .. } => planned.kind = "pause".into(),
                Phase::Closed {
                    vusers, ramp_up, ..
                } => {
                    planned.kind = "closed".into();
                    planned.vusers = Some(*vusers);
                    planned.ramp_up_s = Some(ramp_up.as_secs_f64());
                }
            }
            planned
        })
        .collect();
    RunSetup {
        command: "run".into(),
        command_line: Some(command_line()),
        target: script.target.url.clone(),
        model: "script".into(),
        duration_s: phases.iter().map(|p| p.duration_s).sum(),
        phases,
        ..RunSetup::default()
    }
}

/// This process's command line, each argument quoted for a POSIX shell when it needs it.
pub fn command_line() -> String {
    std::env::args()
        .enumerate()
        .map(|(i, a)| {
            let a = if i == 0 {
                std::path::Path::new(&a)
                    .file_name()
                    .map_or(a.clone(), |f| f.to_string_lossy().into_owned())
            } else {
                a
            };
            let plain = !a.is_empty()
                && a.chars()
                    .all(|c| c.is_ascii_alphanumeric() || "-_./:=@,+%".contains(c));
            if plain {
                a
            } else {
                format!("'{}'", a.replace('\'', "'\\''"))
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// `url`'s arguments, for the reports.
fn url_setup(args: &UrlArgs, model: &Model) -> RunSetup {
    let (name, rate_per_s, connections) = match *model {
        Model::Open {
            rate_per_s,
            connections_max,
        } => ("open", Some(rate_per_s), connections_max),
        Model::Closed { connections } => ("closed", None, connections),
    };
    RunSetup {
        command: "url".into(),
        command_line: Some(command_line()),
        target: args.url.clone(),
        model: name.into(),
        duration_s: args.duration.as_secs_f64(),
        rate_per_s,
        connections: Some(connections),
        method: Some(args.method.to_ascii_uppercase()),
        phases: Vec::new(),
    }
}

fn write_outputs(
    report: &Report,
    title: &str,
    json: &Option<PathBuf>,
    page: &Option<PathBuf>,
) -> Result<(), i32> {
    if let Some(path) = json {
        report.write_json(path).map_err(|e| {
            eprintln!("error: {e}");
            EXIT_BAD_INPUT
        })?;
        println!("Log file: {}", path.display());
    }
    if let Some(path) = page {
        html::write(report, title, path).map_err(|e| {
            eprintln!("error: {e}");
            EXIT_BAD_INPUT
        })?;
        println!("Report: {}", path.display());
    }
    Ok(())
}

/// Everything `url` needs, checked before any request goes out.
struct UrlPlan {
    plan: Plan,
    prepared: Prepared,
}

async fn url_plan(args: &UrlArgs) -> Result<UrlPlan, String> {
    let target = Target::parse(&args.url)?;
    let uri: http::Uri = args
        .url
        .trim()
        .parse()
        .map_err(|e| format!("{:?}: {e}", args.url))?;
    let path = uri
        .path_and_query()
        .map_or("/".to_string(), |p| p.as_str().to_string());
    let method = Method::from_bytes(args.method.to_ascii_uppercase().as_bytes())
        .map_err(|_| format!("--method {:?}: not an HTTP method", args.method))?;
    let mut headers = Vec::new();
    for h in &args.headers {
        let (k, v) = h
            .split_once(':')
            .ok_or_else(|| format!("-H {h:?}: expected 'Name: value'"))?;
        headers.push((k.trim().to_string(), v.trim().to_string()));
    }
    let body = match &args.body_file {
        Some(p) => {
            Bytes::from(std::fs::read(p).map_err(|e| format!("--body-file {}: {e}", p.display()))?)
        }
        None => Bytes::new(),
    };
    let prepared = Prepared::new(method, &path, &target.authority(), &headers, body)?;
    let model = match (args.rate, args.connections) {
        (Some(rate), c) => Model::Open {
            rate_per_s: rate,
            connections_max: c.unwrap_or(OPEN_CONNECTIONS_DEFAULT),
        },
        (None, Some(c)) => Model::Closed { connections: c },
        (None, None) => {
            return Err("give --rate R (open model) or --connections C (closed model)".into())
        }
    };
    let addr = resolve(&target.host, target.port)
        .await
        .map_err(|e| format!("{}: {e}", args.url))?;
    let mut plan = Plan::new(addr, &target.authority(), model, args.duration);
    plan.timeout = args.timeout;
    plan.progress = true;
    plan.engine = args.engine;
    if target.tls {
        let opts = crate::tls::TlsOptions {
            reject_unauthorized: !args.insecure,
            ca_files: args.ca.iter().cloned().collect(),
        };
        plan.tls = Some((crate::tls::Tls::new(&opts)?, target.host.clone()));
    }
    Ok(UrlPlan { plan, prepared })
}

async fn run_url(args: UrlArgs) -> i32 {
    let UrlPlan { plan, prepared } = match url_plan(&args).await {
        Ok(p) => p,
        Err(e) => {
            eprintln!("error: {e}");
            return EXIT_BAD_INPUT;
        }
    };
    println!(
        "Running {:.0}s test @ {}",
        args.duration.as_secs_f64(),
        args.url
    );
    match plan.model {
        Model::Open { rate_per_s, connections_max } => println!(
            "  open model: {rate_per_s} req/s over at most {connections_max} connections, latency from intended start"
        ),
        Model::Closed { connections } => println!("  closed model: {connections} connections"),
    }
    let open = matches!(plan.model, Model::Open { .. });
    let setup = url_setup(&args, &plan.model);
    let mut summary = match measure::run(plan, measure::fixed(prepared)).await {
        Ok(s) => s,
        Err(e) => {
            eprintln!("error: {e}");
            return EXIT_BAD_INPUT;
        }
    };
    print!("{}", format_summary(&summary, open));
    summary.report.setup = Some(setup);
    let title = command_line();
    if let Err(code) = write_outputs(&summary.report, &title, &args.output, &args.report) {
        return code;
    }
    EXIT_OK
}

/// wrk-like summary text.
pub fn format_summary(s: &Summary, open: bool) -> String {
    let ms = |us: u64| format!("{:.2}ms", us as f64 / 1000.0);
    let mut out = String::new();
    let label = if open {
        "Latency (from intended start)"
    } else {
        "Latency"
    };
    out.push_str(&format!(
        "  {label}: p50 {}  p90 {}  p99 {}  p99.9 {}  max {}\n",
        ms(s.latency_us_p50),
        ms(s.latency_us_p90),
        ms(s.latency_us_p99),
        ms(s.latency_us_p999),
        ms(s.latency_us_max)
    ));
    if open {
        out.push_str(&format!(
            "  Service time (uncorrected): p50 {}  p99 {}  max {}\n",
            ms(s.uncorrected_latency_us_p50),
            ms(s.uncorrected_latency_us_p99),
            ms(s.uncorrected_latency_us_max)
        ));
    }
    out.push_str(&format!(
        "  {} requests in {:.2}s, {:.2}MB read\n",
        s.requests,
        s.duration_s,
        s.bytes_received as f64 / 1e6
    ));
    out.push_str(&format!("Requests/sec: {:.2}\n", s.requests_per_s));
    let codes: Vec<String> = s
        .status_counts
        .iter()
        .map(|(c, n)| format!("{c}: {n}"))
        .collect();
    out.push_str(&format!(
        "Status codes: {}\n",
        if codes.is_empty() {
            "none".into()
        } else {
            codes.join(", ")
        }
    ));
    if !s.errors.is_empty() {
        let errs: Vec<String> = s.errors.iter().map(|(c, n)| format!("{c}: {n}")).collect();
        out.push_str(&format!("Errors: {}\n", errs.join(", ")));
    }
    out
}
