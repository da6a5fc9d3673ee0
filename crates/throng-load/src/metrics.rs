//! Artillery-named metrics for script runs: counters and latency histograms, collected into
//! a current window (rotated into `intermediate` every period) and a whole-run aggregate.
//!
//! Limits are explicit because names come from user input (URLs, error codes): at most
//! [`NAMES_MAX`] distinct metric names and [`ERROR_CODES_MAX`] distinct error codes; the rest
//! is counted under `throng.metrics_dropped` / `errors.other`. Histograms keep 2 significant
//! digits (1% relative error, like Artillery's sketches) so each costs tens of KB.

use std::{
    collections::{BTreeMap, BTreeSet},
    sync::Mutex,
};

use hdrhistogram::Histogram;

use crate::report::{now_ms, Period, Report, SummaryStats};

pub const NAMES_MAX: usize = 400;
pub const ERROR_CODES_MAX: usize = 32;
/// Highest latency a histogram holds (1 hour in microseconds); longer values saturate.
pub const LATENCY_US_MAX: u64 = 3_600_000_000;

pub fn new_histogram(sigfig: u8) -> Histogram<u64> {
    Histogram::new_with_bounds(1, LATENCY_US_MAX, sigfig).expect("valid histogram bounds")
}

#[derive(Default)]
struct Window {
    start_ms: u64,
    counters: BTreeMap<String, u64>,
    histograms: BTreeMap<String, Histogram<u64>>,
    counter_ms: Option<(u64, u64)>,
    histogram_ms: Option<(u64, u64)>,
}

fn stretch(span: &mut Option<(u64, u64)>, now: u64) {
    *span = Some(match *span {
        None => (now, now),
        Some((first, _)) => (first, now),
    });
}

impl Window {
    fn new(start_ms: u64) -> Self {
        Self {
            start_ms,
            ..Default::default()
        }
    }

    fn count(&mut self, name: &str, n: u64, now: u64) {
        match self.counters.get_mut(name) {
            Some(v) => *v += n,
            None => {
                self.counters.insert(name.to_string(), n);
            }
        }
        stretch(&mut self.counter_ms, now);
    }

    fn record(&mut self, name: &str, value_us: u64, now: u64) {
        let h = match self.histograms.get_mut(name) {
            Some(h) => h,
            None => self
                .histograms
                .entry(name.to_string())
                .or_insert_with(|| new_histogram(2)),
        };
        h.saturating_record(value_us.max(1));
        stretch(&mut self.histogram_ms, now);
    }

    fn to_period(&self, end_ms: u64, raw: bool) -> Period {
        let width_ms = end_ms.saturating_sub(self.start_ms).max(1);
        let mut p = Period {
            counters: self.counters.clone(),
            period: self.start_ms,
            width_ms,
            ..Default::default()
        };
        let requests = p.counter("http.requests");
        if requests > 0 {
            let rate = requests as f64 * 1000.0 / width_ms as f64;
            p.rates
                .insert("http.request_rate".into(), (rate * 10.0).round() / 10.0);
        }
        for (name, h) in &self.histograms {
            if raw {
                if let Some(text) = encode(h) {
                    p.raw.insert(name.clone(), text);
                }
            }
            let s = SummaryStats::from_us(h);
            p.summaries.insert(name.clone(), s);
            p.histograms.insert(name.clone(), s);
        }
        p.set_times(self.counter_ms, self.histogram_ms);
        p
    }
}

/// A histogram as HDR's V2 encoding in base64.
pub fn encode(h: &Histogram<u64>) -> Option<String> {
    use base64::Engine;
    let mut bytes = Vec::new();
    hdrhistogram::serialization::Serializer::serialize(
        &mut hdrhistogram::serialization::V2Serializer::new(),
        h,
        &mut bytes,
    )
    .ok()?;
    Some(base64::engine::general_purpose::STANDARD.encode(bytes))
}

/// The histogram [`encode`] wrote.
pub fn decode(text: &str) -> Option<Histogram<u64>> {
    use base64::Engine;
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(text)
        .ok()?;
    hdrhistogram::serialization::Deserializer::new()
        .deserialize(&mut bytes.as_slice())
        .ok()
}

struct State {
    /// Keep the histograms in each period (for merging agents' reports).
    raw: bool,
    current: Window,
    total: Window,
    intermediate: Vec<Period>,
    names: BTreeSet<String>,
    error_codes: BTreeSet<String>,
}

/// Updates of [`Metrics`] made under one lock, stamped with one time;
/// the lock is held until it is dropped, so nothing else may record
/// meanwhile.
pub struct Batch<'a> {
    state: std::sync::MutexGuard<'a, State>,
    now: u64,
}

impl Batch<'_> {
    /// Adds `n` to the counter `name`.
    pub fn counter(&mut self, name: &str, n: u64) {
        let s = &mut *self.state;
        let name = if Metrics::admit(s, name) {
            name
        } else {
            "throng.metrics_dropped"
        };
        s.current.count(name, n, self.now);
        s.total.count(name, n, self.now);
    }

    /// Records a latency in microseconds into the histogram `name`.
    pub fn histogram_us(&mut self, name: &str, value_us: u64) {
        let s = &mut *self.state;
        if !Metrics::admit(s, name) {
            s.current.count("throng.metrics_dropped", 1, self.now);
            s.total.count("throng.metrics_dropped", 1, self.now);
            return;
        }
        s.current.record(name, value_us, self.now);
        s.total.record(name, value_us, self.now);
    }
}

/// Thread-safe metrics for one run.
pub struct Metrics {
    state: Mutex<State>,
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    pub fn new() -> Self {
        Self::keeping_histograms(false)
    }

    /// With `raw`, every period also carries its histograms ([`Period::raw`]).
    pub fn keeping_histograms(raw: bool) -> Self {
        let now = now_ms();
        Self {
            state: Mutex::new(State {
                raw,
                current: Window::new(now),
                total: Window::new(now),
                intermediate: Vec::new(),
                names: BTreeSet::new(),
                error_codes: BTreeSet::new(),
            }),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Updates under one lock and one clock reading (the counters and
    /// histograms one response moves), for the hot path.
    pub fn batch(&self) -> Batch<'_> {
        Batch {
            state: self.lock(),
            now: now_ms(),
        }
    }

    /// Whether `name` may be recorded under the distinct-name limit.
    fn admit(state: &mut State, name: &str) -> bool {
        if state.names.contains(name) {
            return true;
        }
        if state.names.len() >= NAMES_MAX {
            return false;
        }
        state.names.insert(name.to_string());
        true
    }

    pub fn counter(&self, name: &str, n: u64) {
        self.batch().counter(name, n);
    }

    /// Records a latency in microseconds into the histogram `name`.
    pub fn histogram_us(&self, name: &str, value_us: u64) {
        self.batch().histogram_us(name, value_us);
    }

    /// Counts an error under `errors.<code>`, or `errors.other` past [`ERROR_CODES_MAX`].
    pub fn error(&self, code: &str) {
        let known = {
            let mut s = self.lock();
            if s.error_codes.contains(code) || s.error_codes.len() < ERROR_CODES_MAX {
                s.error_codes.insert(code.to_string());
                true
            } else {
                false
            }
        };
        let name = if known {
            format!("errors.{code}")
        } else {
            "errors.other".to_string()
        };
        self.counter(&name, 1);
    }

    /// A counter's whole-run value so far.
    pub fn total_counter(&self, name: &str) -> u64 {
        self.lock().total.counters.get(name).copied().unwrap_or(0)
    }

    /// Closes the current window, keeps it as an intermediate period and returns it.
    pub fn rotate(&self) -> Period {
        let now = now_ms();
        let mut s = self.lock();
        let closed = std::mem::replace(&mut s.current, Window::new(now));
        let period = closed.to_period(now, s.raw);
        s.intermediate.push(period.clone());
        period
    }

    /// Closes the last window (if it saw anything) and returns the whole report.
    pub fn finish(&self) -> Report {
        let busy = {
            let s = self.lock();
            !s.current.counters.is_empty() || !s.current.histograms.is_empty()
        };
        if busy {
            self.rotate();
        }
        let now = now_ms();
        let s = self.lock();
        let mut aggregate = s.total.to_period(now, s.raw);
        // Artillery's aggregate rate is the mean of the period rates; over uneven periods the
        // whole-run request count over the whole-run time is the honest equivalent.
        if let Some(rate) = aggregate.rates.get_mut("http.request_rate") {
            *rate = rate.round();
        }
        Report {
            aggregate,
            intermediate: s.intermediate.clone(),
            phases: Vec::new(),
            ..Report::default()
        }
    }
}

/// Merges periods of the same window from several agents: counters and rates added,
/// histograms merged from their raw copies (so percentiles are the whole run's), the window
/// spanning them all.
pub fn merge_periods(parts: &[&Period]) -> Period {
    let mut out = Period::default();
    let mut hists: BTreeMap<String, Histogram<u64>> = BTreeMap::new();
    let mut first = true;
    for p in parts {
        for (k, v) in &p.counters {
            *out.counters.entry(k.clone()).or_insert(0) += v;
        }
        for (k, v) in &p.rates {
            *out.rates.entry(k.clone()).or_insert(0.0) += v;
        }
        for (k, text) in &p.raw {
            if let Some(h) = decode(text) {
                match hists.get_mut(k) {
                    Some(m) => {
                        let _ = m.add(&h);
                    }
                    None => {
                        hists.insert(k.clone(), h);
                    }
                }
            }
        }
        if first {
            out.period = p.period;
            out.width_ms = p.width_ms;
            first = false;
        } else {
            let end = (out.period + out.width_ms).max(p.period + p.width_ms);
            out.period = out.period.min(p.period);
            out.width_ms = end - out.period;
        }
        let min = |a: Option<u64>, b: Option<u64>| match (a, b) {
            (Some(x), Some(y)) => Some(x.min(y)),
            (x, y) => x.or(y),
        };
        let max = |a: Option<u64>, b: Option<u64>| a.max(b);
        out.first_counter_at = min(out.first_counter_at, p.first_counter_at);
        out.first_histogram_at = min(out.first_histogram_at, p.first_histogram_at);
        out.first_metric_at = min(out.first_metric_at, p.first_metric_at);
        out.last_counter_at = max(out.last_counter_at, p.last_counter_at);
        out.last_histogram_at = max(out.last_histogram_at, p.last_histogram_at);
        out.last_metric_at = max(out.last_metric_at, p.last_metric_at);
    }
    for (k, h) in &hists {
        let s = SummaryStats::from_us(h);
        out.summaries.insert(k.clone(), s);
        out.histograms.insert(k.clone(), s);
    }
    out
}
