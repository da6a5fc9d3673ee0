//! The report in Artillery's JSON shape (`aggregate` + `intermediate` periods of `counters`,
//! `rates`, `summaries`), so tools that read Artillery reports read ours.
//!
//! Latency values in reports are milliseconds with one decimal, as Artillery writes them;
//! the library API ([`crate::Summary`]) uses integer microseconds instead.

pub mod console;
pub mod html;

use std::{collections::BTreeMap, path::Path};

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

/// One metrics window: a 10 s period for `run`, 1 s for `url`, or the whole test.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Period {
    pub counters: BTreeMap<String, u64>,
    pub rates: BTreeMap<String, f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub first_counter_at: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub first_histogram_at: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_counter_at: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_histogram_at: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub first_metric_at: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_metric_at: Option<u64>,
    /// Start of the window, milliseconds since the Unix epoch.
    pub period: u64,
    /// Width of the window in milliseconds (not in Artillery's report; used for rates).
    #[serde(default)]
    pub width_ms: u64,
    pub summaries: BTreeMap<String, SummaryStats>,
    /// Artillery writes the same numbers under both keys.
    pub histograms: BTreeMap<String, SummaryStats>,
    /// The histograms themselves (microseconds, HDR V2, base64), so agents' reports merge
    /// exactly; only in an agent's answer to `run --workers`.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub raw: BTreeMap<String, String>,
}

impl Period {
    pub fn counter(&self, name: &str) -> u64 {
        self.counters.get(name).copied().unwrap_or(0)
    }

    /// Fills `first/last*At` from the counter and histogram timestamps.
    pub fn set_times(&mut self, counter: Option<(u64, u64)>, histogram: Option<(u64, u64)>) {
        self.first_counter_at = counter.map(|c| c.0);
        self.last_counter_at = counter.map(|c| c.1);
        self.first_histogram_at = histogram.map(|h| h.0);
        self.last_histogram_at = histogram.map(|h| h.1);
        let firsts = [self.first_counter_at, self.first_histogram_at];
        let lasts = [self.last_counter_at, self.last_histogram_at];
        self.first_metric_at = firsts.iter().flatten().min().copied();
        self.last_metric_at = lasts.iter().flatten().max().copied();
    }
}

/// Artillery's summary of a histogram, in milliseconds.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize, PartialEq)]
pub struct SummaryStats {
    pub min: f64,
    pub max: f64,
    pub count: u64,
    pub mean: f64,
    pub p50: f64,
    pub median: f64,
    pub p75: f64,
    pub p90: f64,
    pub p95: f64,
    pub p99: f64,
    pub p999: f64,
}

impl SummaryStats {
    /// Summarises a histogram of microseconds into milliseconds with one decimal.
    pub fn from_us(h: &Histogram<u64>) -> Self {
        let ms = |us: u64| (us as f64 / 100.0).round() / 10.0;
        let q = |q: f64| ms(h.value_at_quantile(q));
        Self {
            min: ms(h.min()),
            max: ms(h.max()),
            count: h.len(),
            mean: (h.mean() / 100.0).round() / 10.0,
            p50: q(0.5),
            median: q(0.5),
            p75: q(0.75),
            p90: q(0.9),
            p95: q(0.95),
            p99: q(0.99),
            p999: q(0.999),
        }
    }

    /// A named field (`p99`, `median`, `max`, ...), as `ensure` checks refer to them.
    pub fn field(&self, name: &str) -> Option<f64> {
        Some(match name {
            "min" => self.min,
            "max" => self.max,
            "count" => self.count as f64,
            "mean" => self.mean,
            "p50" => self.p50,
            "median" => self.median,
            "p75" => self.p75,
            "p90" => self.p90,
            "p95" => self.p95,
            "p99" => self.p99,
            "p999" => self.p999,
            _ => return None,
        })
    }
}

/// The whole report as `--output` writes it.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct Report {
    pub aggregate: Period,
    pub intermediate: Vec<Period>,
    /// One entry per script phase, in order (not in Artillery's report; absent for `url`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub phases: Vec<PhaseReport>,
    /// How the run was asked for (not in Artillery's report).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub setup: Option<RunSetup>,
    /// The script's `ensure` checks with what was measured (not in Artillery's report).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub thresholds: Vec<Threshold>,
    /// Per endpoint (the `metrics-by-endpoint` metrics gathered in a table; not in
    /// Artillery's report).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub endpoints: Vec<EndpointRow>,
    /// Whether the run passed, its exit code and why (not in Artillery's report).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verdict: Option<Verdict>,
}

/// One endpoint's requests over the run.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct EndpointRow {
    pub name: String,
    /// Responses (any status).
    pub count: u64,
    /// Responses by status code.
    pub codes: BTreeMap<String, u64>,
    /// Failed requests by error code.
    pub errors: BTreeMap<String, u64>,
    /// Response times (ms); absent without responses.
    pub p50: Option<f64>,
    pub p95: Option<f64>,
    pub p99: Option<f64>,
}

/// The run's outcome as the exit code says it, with the reasons.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Verdict {
    pub passed: bool,
    pub exit_code: i32,
    /// What failed (strict checks, expectations), or what passed.
    pub reasons: Vec<String>,
    /// Worth knowing either way: failed virtual users, errors by code.
    pub notes: Vec<String>,
}

/// The per-endpoint table from the aggregate's `{prefix}.response_time.{name}`,
/// `{prefix}.{name}.codes.{code}` and `{prefix}.{name}.errors.{code}` metrics, busiest
/// first.
pub fn endpoint_rows(agg: &Period, prefix: &str) -> Vec<EndpointRow> {
    let mut rows: BTreeMap<String, EndpointRow> = BTreeMap::new();
    let head = format!("{prefix}.");
    let timing = format!("{prefix}.response_time.");
    for (k, v) in &agg.counters {
        let Some(rest) = k.strip_prefix(&head) else {
            continue;
        };
        let (name, map, code) = if let Some((n, c)) = rest.rsplit_once(".codes.") {
            (n, true, c)
        } else if let Some((n, c)) = rest.rsplit_once(".errors.") {
            (n, false, c)
        } else {
            continue;
        };
        let row = rows.entry(name.to_string()).or_insert_with(|| EndpointRow {
            name: name.to_string(),
            ..EndpointRow::default()
        });
        if map {
            row.count += v;
            row.codes.insert(code.to_string(), *v);
        } else {
            row.errors.insert(code.to_string(), *v);
        }
    }
    for (k, s) in &agg.summaries {
        if let Some(name) = k.strip_prefix(&timing) {
            let row = rows.entry(name.to_string()).or_insert_with(|| EndpointRow {
                name: name.to_string(),
                ..EndpointRow::default()
            });
            row.p50 = Some(s.p50);
            row.p95 = Some(s.p95);
            row.p99 = Some(s.p99);
        }
    }
    let mut rows: Vec<EndpointRow> = rows.into_values().collect();
    rows.sort_by(|a, b| {
        let total = |r: &EndpointRow| r.count + r.errors.values().sum::<u64>();
        total(b).cmp(&total(a)).then_with(|| a.name.cmp(&b.name))
    });
    rows
}

/// What a run was asked to do: its target, load model, rate, connections, length and, for a
/// script, its phases as written.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct RunSetup {
    /// `url` or `run`.
    pub command: String,
    /// The whole command line as typed (arguments quoted for a shell).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command_line: Option<String>,
    pub target: String,
    /// `open` (requests started at a constant rate), `closed` (connections each sending as
    /// fast as answered) or `script` (the phases below).
    pub model: String,
    /// Planned length in seconds (a script's: the sum of its phases).
    pub duration_s: f64,
    /// Open model: requests per second.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate_per_s: Option<f64>,
    /// Closed model: the connections; open model: the most it may use.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub connections: Option<usize>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub method: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub phases: Vec<PlannedPhase>,
}

/// One script phase as written.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct PlannedPhase {
    pub name: String,
    /// `arrivals`, `pause` or `closed`.
    pub kind: String,
    pub duration_s: f64,
    /// Arrivals per second at the phase's start (`arrivalRate`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arrival_rate: Option<f64>,
    /// ... and at its end (`rampTo`; the same without one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ramp_to: Option<f64>,
    /// `arrivalCount`: arrivals spread over the phase.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arrival_count: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_vusers: Option<u64>,
    /// A closed phase's looping virtual users.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vusers: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ramp_up_s: Option<f64>,
}

/// One `ensure` check after the run: the rule, the values it read, and whether it passed.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Threshold {
    pub check: String,
    /// Each metric the check reads, with its value over the whole run (`null`: not
    /// measured).
    pub measured: BTreeMap<String, Option<f64>>,
    pub ok: bool,
    /// Whether a failure fails the run (exit code 1); a non-strict one only warns.
    pub strict: bool,
}

/// What one phase of a script run actually did, so the pool size a closed-model phase
/// (`vusers`) held can be checked. Concurrency counts every running virtual user (pool
/// members and arrivals alike) from the phase's start to its end as the runner saw them; a
/// pool member counts from its start until it stops, including between iterations. On a
/// step down, surplus users finishing their last iteration count toward the new phase.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct PhaseReport {
    pub index: usize,
    pub name: String,
    /// `arrivals`, `pause` or `closed`.
    pub kind: String,
    /// Measured length of the phase in seconds.
    pub duration_s: f64,
    /// A closed phase's `vusers`; `null` for other phases.
    pub vusers_target: Option<u64>,
    /// Most virtual users running at once during the phase.
    pub vusers_concurrent_max: u64,
    /// Time-weighted mean of the running virtual users over the phase (two decimals).
    pub vusers_concurrent_mean: f64,
    /// Scenario runs (`vusers.created`: arrivals, or iterations in a closed phase) started
    /// during the phase.
    pub vusers_created: u64,
}

impl From<&crate::ensure::Check> for Threshold {
    fn from(c: &crate::ensure::Check) -> Self {
        Threshold {
            check: c.description.clone(),
            measured: c.measured.iter().cloned().collect(),
            ok: c.ok,
            strict: c.strict,
        }
    }
}

impl Report {
    pub fn write_json(&self, path: &Path) -> anyhow::Result<()> {
        let text = serde_json::to_string_pretty(self)?;
        std::fs::write(path, text)
            .map_err(|e| anyhow::anyhow!("cannot write report {}: {e}", path.display()))
    }
}

/// Milliseconds since the Unix epoch.
pub fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}
