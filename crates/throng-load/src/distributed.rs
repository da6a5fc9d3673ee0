//! Many load machines: `throng load agent --listen HOST:PORT` on each, and `throng load run
//! SCRIPT --workers HOST:PORT,...` on one, which splits the phases among the agents, starts
//! them together and merges their reports into one.
//!
//! - The controller reads the script as `run` does (flags, `-e`, `--config` merged), then
//!   sends each agent the merged YAML with its share of every phase (`arrivalRate`, `rampTo`
//!   and `maxVusers` divided; `arrivalCount` and closed-model `vusers` split as whole
//!   numbers, the remainder to the first agents; an agent whose share of a closed phase is no
//!   user pauses through it), the files it names (payloads, processor, CA) and a start time.
//! - Each agent runs it quietly and answers with its report, each period's histograms
//!   included (HDR, so percentiles merge exactly); the controller adds counters and rates
//!   period by period, merges the histograms, and runs the checks, the endpoint table and the
//!   verdict on the merged report as for one machine.
//! - The wire: one TCP connection per run, a JSON line each way. No authentication: run
//!   agents on a private network.

use std::{
    collections::BTreeMap,
    path::{Path, PathBuf},
    sync::Arc,
    time::{Duration, SystemTime, UNIX_EPOCH},
};

use base64::Engine;
use serde::{Deserialize, Serialize};
use tokio::{
    io::{AsyncReadExt, AsyncWriteExt, BufReader},
    net::{TcpListener, TcpStream},
};

use crate::{
    report::{Period, Report},
    runner::{self, RunOptions, RunOutcome},
    script::{self, LoadOptions, Script},
};

/// The most bytes a job or an answer may take (payload files travel in the job).
pub const MESSAGE_BYTES_MAX: usize = 512 << 20;
/// Time given to reach every agent before the common start.
const START_DELAY: Duration = Duration::from_secs(2);

/// What the controller sends an agent.
#[derive(Debug, Serialize, Deserialize)]
pub struct Job {
    /// The merged script (YAML) with this agent's share of the phases.
    pub script: String,
    /// Files the script names, by the names it uses for them (base64).
    pub files: BTreeMap<String, String>,
    pub environment: Option<String>,
    pub scenario_name: Option<String>,
    pub insecure: bool,
    pub period_ms: u64,
    /// When to start, milliseconds since the Unix epoch.
    pub start_at_ms: u64,
}

/// An agent's answer.
#[derive(Debug, Serialize, Deserialize)]
pub struct Answer {
    pub report: Option<Report>,
    pub suggested_exit_code: Option<i32>,
    pub error: Option<String>,
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

async fn read_line(stream: &mut BufReader<TcpStream>) -> Result<String, String> {
    let mut line = Vec::new();
    let mut limited = (&mut *stream).take(MESSAGE_BYTES_MAX as u64 + 1);
    tokio::io::AsyncBufReadExt::read_until(&mut limited, b'\n', &mut line)
        .await
        .map_err(|e| e.to_string())?;
    if line.len() > MESSAGE_BYTES_MAX {
        return Err(format!("message larger than {MESSAGE_BYTES_MAX} bytes"));
    }
    if line.is_empty() {
        return Err("connection closed".into());
    }
    String::from_utf8(line).map_err(|e| e.to_string())
}

/// Serves jobs on `listener` until the process ends (`throng load agent`).
pub async fn serve_agent(listener: TcpListener) {
    loop {
        let Ok((stream, peer)) = listener.accept().await else {
            continue;
        };
        tokio::spawn(async move {
            let mut stream = BufReader::new(stream);
            let answer = match read_line(&mut stream).await {
                Ok(line) => match serde_json::from_str::<Job>(&line) {
                    Ok(job) => {
                        eprintln!("agent: a run from {peer}");
                        run_job(job).await
                    }
                    Err(e) => failed(format!("not a job: {e}")),
                },
                Err(e) => failed(e),
            };
            let mut text = serde_json::to_string(&answer).unwrap_or_else(|e| {
                serde_json::to_string(&failed(e.to_string())).unwrap_or_default()
            });
            text.push('\n');
            let _ = stream.get_mut().write_all(text.as_bytes()).await;
        });
    }
}

fn failed(error: String) -> Answer {
    Answer {
        report: None,
        suggested_exit_code: None,
        error: Some(error),
    }
}

async fn run_job(job: Job) -> Answer {
    let dir = match tempfile::tempdir() {
        Ok(d) => d,
        Err(e) => return failed(format!("agent: {e}")),
    };
    for (name, content) in &job.files {
        let Ok(bytes) = base64::engine::general_purpose::STANDARD.decode(content) else {
            return failed(format!("file {name}: not base64"));
        };
        if name.contains('/') || name.contains("..") {
            return failed(format!("file {name}: not a plain file name"));
        }
        if let Err(e) = std::fs::write(dir.path().join(name), bytes) {
            return failed(format!("file {name}: {e}"));
        }
    }
    let path = dir.path().join("script.yml");
    if let Err(e) = std::fs::write(&path, &job.script) {
        return failed(e.to_string());
    }
    let opts = LoadOptions {
        environment: job.environment.clone(),
        scenario_name: job.scenario_name.clone(),
        insecure: job.insecure,
        ..LoadOptions::default()
    };
    let script = match script::load(&path, &opts) {
        Ok(s) => Arc::new(s),
        Err(e) => return failed(e.0),
    };
    let wait = job.start_at_ms.saturating_sub(now_ms());
    tokio::time::sleep(Duration::from_millis(wait)).await;
    let outcome = runner::run(
        script,
        RunOptions {
            period: Duration::from_millis(job.period_ms.max(1_000)),
            print: false,
            quiet: true,
            keep_histograms: true,
        },
    )
    .await;
    Answer {
        report: Some(outcome.report),
        suggested_exit_code: outcome.suggested_exit_code,
        error: None,
    }
}

/// `index`'s share of `total` split in `n` whole parts (the remainder to the first).
fn share(total: u64, index: usize, n: usize) -> u64 {
    let n = n as u64;
    total / n + u64::from((index as u64) < total % n)
}

/// The phases with agent `index` of `n`'s share of each.
fn split_phases(yaml: &mut serde_yaml::Value, index: usize, n: usize) {
    let Some(serde_yaml::Value::Sequence(phases)) =
        yaml.get_mut("config").and_then(|c| c.get_mut("phases"))
    else {
        return;
    };
    for phase in phases {
        let Some(map) = phase.as_mapping_mut() else {
            continue;
        };
        for key in ["arrivalRate", "rampTo", "maxVusers"] {
            if let Some(v) = map.get_mut(key) {
                if let Some(x) = v.as_f64() {
                    *v = (x / n as f64).into();
                }
            }
        }
        if let Some(v) = map.get_mut("arrivalCount") {
            if let Some(x) = v.as_f64() {
                *v = share(x as u64, index, n).into();
            }
        }
        let vusers = map.get("vusers").and_then(serde_yaml::Value::as_f64);
        if let Some(x) = vusers {
            let mine = share(x as u64, index, n);
            if mine == 0 {
                // No user of this closed phase here: the same time, paused.
                let duration = map.get("duration").cloned().unwrap_or(1.into());
                let name = map.get("name").cloned();
                map.clear();
                map.insert("pause".into(), duration);
                if let Some(name) = name {
                    map.insert("name".into(), name);
                }
            } else {
                map.insert("vusers".into(), mine.into());
            }
        }
    }
}

/// Replaces each file the script names (payloads, processor, CA) by a plain name and
/// collects its content.
fn gather_files(
    yaml: &mut serde_yaml::Value,
    dir: &Path,
) -> Result<BTreeMap<String, String>, String> {
    let mut files = BTreeMap::new();
    let mut take = |v: &mut serde_yaml::Value| -> Result<(), String> {
        let Some(path) = v.as_str().map(PathBuf::from) else {
            return Ok(());
        };
        let full = dir.join(&path);
        let bytes = std::fs::read(&full).map_err(|e| format!("{}: {e}", full.display()))?;
        let base = path
            .file_name()
            .map_or("file".into(), |f| f.to_string_lossy().into_owned());
        let name = format!("f{}-{base}", files.len());
        files.insert(
            name.clone(),
            base64::engine::general_purpose::STANDARD.encode(bytes),
        );
        *v = serde_yaml::Value::String(name);
        Ok(())
    };
    let Some(config) = yaml.get_mut("config") else {
        return Ok(files);
    };
    match config.get_mut("payload") {
        Some(serde_yaml::Value::Sequence(list)) => {
            for p in list {
                if let Some(path) = p.get_mut("path") {
                    take(path)?;
                }
            }
        }
        Some(p) => {
            if let Some(path) = p.get_mut("path") {
                take(path)?;
            }
        }
        None => {}
    }
    if let Some(p) = config.get_mut("processor") {
        take(p)?;
    }
    if let Some(ca) = config.get_mut("tls").and_then(|t| t.get_mut("ca")) {
        match ca {
            serde_yaml::Value::Sequence(list) => {
                for c in list {
                    take(c)?;
                }
            }
            one => take(one)?,
        }
    }
    Ok(files)
}

/// Sends one job and waits for the answer.
async fn ask(agent: &str, job: &Job) -> Result<Answer, String> {
    let stream = TcpStream::connect(agent)
        .await
        .map_err(|e| format!("agent {agent}: {e}"))?;
    let mut stream = BufReader::new(stream);
    let mut text = serde_json::to_string(job).map_err(|e| e.to_string())?;
    text.push('\n');
    stream
        .get_mut()
        .write_all(text.as_bytes())
        .await
        .map_err(|e| format!("agent {agent}: {e}"))?;
    let line = read_line(&mut stream)
        .await
        .map_err(|e| format!("agent {agent}: {e}"))?;
    let answer: Answer = serde_json::from_str(&line).map_err(|e| format!("agent {agent}: {e}"))?;
    match answer.error {
        Some(e) => Err(format!("agent {agent}: {e}")),
        None => Ok(answer),
    }
}

/// Merges the agents' reports: periods by position, the aggregate, the phases (users added).
pub fn merge(reports: &[Report]) -> Report {
    let aggregate =
        crate::metrics::merge_periods(&reports.iter().map(|r| &r.aggregate).collect::<Vec<_>>());
    let periods = reports
        .iter()
        .map(|r| r.intermediate.len())
        .max()
        .unwrap_or(0);
    let intermediate: Vec<Period> = (0..periods)
        .map(|i| {
            let parts: Vec<_> = reports
                .iter()
                .filter_map(|r| r.intermediate.get(i))
                .collect();
            crate::metrics::merge_periods(&parts)
        })
        .collect();
    let mut phases = reports
        .first()
        .map(|r| r.phases.clone())
        .unwrap_or_default();
    for r in reports.iter().skip(1) {
        for (p, q) in phases.iter_mut().zip(&r.phases) {
            p.vusers_concurrent_max += q.vusers_concurrent_max;
            p.vusers_concurrent_mean =
                ((p.vusers_concurrent_mean + q.vusers_concurrent_mean) * 100.0).round() / 100.0;
            p.vusers_created += q.vusers_created;
            p.vusers_target = match (p.vusers_target, q.vusers_target) {
                (Some(a), Some(b)) => Some(a + b),
                (a, b) => a.or(b),
            };
        }
    }
    let strip = |mut p: Period| {
        p.raw.clear();
        p
    };
    Report {
        aggregate: strip(aggregate),
        intermediate: intermediate.into_iter().map(strip).collect(),
        phases,
        ..Report::default()
    }
}

/// `run --workers`: the script split among `agents`, one merged outcome.
pub async fn run(
    script: Arc<Script>,
    text: &str,
    opts: &LoadOptions,
    agents: &[String],
    period: Duration,
) -> Result<RunOutcome, String> {
    let mut yaml = script::effective_yaml(text, opts).map_err(|e| e.0)?;
    let files = gather_files(&mut yaml, &script.dir)?;
    // Already merged: an agent keeps the environment's name (`$environment`) only.
    if let (Some(env), Some(config)) = (&opts.environment, yaml.get_mut("config")) {
        let mut envs = serde_yaml::Mapping::new();
        envs.insert(env.clone().into(), serde_yaml::Mapping::new().into());
        config["environments"] = envs.into();
    }
    let start_at_ms = now_ms() + START_DELAY.as_millis() as u64;
    let started = std::time::Instant::now();
    let mut asks = Vec::new();
    for (i, agent) in agents.iter().enumerate() {
        let mut mine = yaml.clone();
        split_phases(&mut mine, i, agents.len());
        let job = Job {
            script: serde_yaml::to_string(&mine).map_err(|e| e.to_string())?,
            files: files.clone(),
            environment: opts.environment.clone(),
            scenario_name: opts.scenario_name.clone(),
            insecure: opts.insecure,
            period_ms: period.as_millis() as u64,
            start_at_ms,
        };
        let agent = agent.clone();
        asks.push(async move { ask(&agent, &job).await });
    }
    println!("Running on {} agents: {}", agents.len(), agents.join(", "));
    let answers = futures::future::join_all(asks).await;
    let mut reports = Vec::new();
    let mut suggested = None;
    for a in answers {
        let a = a?;
        suggested = suggested.or(a.suggested_exit_code);
        reports.extend(a.report);
    }
    let report = merge(&reports);
    let elapsed = started.elapsed().saturating_sub(START_DELAY);
    Ok(runner::conclude(&script, report, elapsed, suggested, true))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn phases_split_whole_and_fractional() {
        let mut y: serde_yaml::Value = serde_yaml::from_str(
            "config:\n  phases:\n    - {duration: 2, arrivalCount: 5}\n    - {duration: 2, arrivalRate: 9, rampTo: 3}\n    - {duration: 3, vusers: 1, name: h}\n",
        )
        .unwrap();
        let mut a = y.clone();
        split_phases(&mut a, 0, 2);
        split_phases(&mut y, 1, 2);
        let p = |v: &serde_yaml::Value, i: usize, k: &str| v["config"]["phases"][i][k].clone();
        assert_eq!(p(&a, 0, "arrivalCount"), serde_yaml::Value::from(3u64));
        assert_eq!(p(&y, 0, "arrivalCount"), serde_yaml::Value::from(2u64));
        assert_eq!(p(&a, 1, "arrivalRate").as_f64(), Some(4.5));
        assert_eq!(p(&y, 1, "rampTo").as_f64(), Some(1.5));
        assert_eq!(p(&a, 2, "vusers"), serde_yaml::Value::from(1u64));
        assert_eq!(p(&y, 2, "pause"), serde_yaml::Value::from(3));
        assert_eq!(p(&y, 2, "name"), serde_yaml::Value::from("h"));
    }

    #[test]
    fn histograms_survive_the_wire_and_merge() {
        let mut a = crate::metrics::new_histogram(2);
        let mut b = crate::metrics::new_histogram(2);
        for v in 1..=100u64 {
            a.record(v * 1_000).unwrap();
            b.record(v * 10_000).unwrap();
        }
        let period = |h| Period {
            counters: [("http.requests".to_string(), 100u64)].into(),
            raw: [(
                "http.response_time".to_string(),
                crate::metrics::encode(h).unwrap(),
            )]
            .into(),
            ..Period::default()
        };
        let merged = crate::metrics::merge_periods(&[&period(&a), &period(&b)]);
        assert_eq!(merged.counter("http.requests"), 200);
        let s = merged.summaries["http.response_time"];
        assert_eq!(s.count, 200);
        assert!(s.max >= 990.0 && s.min <= 1.1, "{s:?}");
    }
}
