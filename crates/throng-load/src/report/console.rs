//! Console output in Artillery's layout: a dotted `name: ....... value` line per counter and
//! rate, and an indented block per latency summary.

use std::{fmt::Write as _, time::Duration};

use super::{now_ms, Period, SummaryStats};
use crate::ensure::Check;

const LINE_WIDTH: usize = 80;

/// `HH:MM:SS(+0000)` in UTC, as Artillery stamps its periods.
pub fn clock(ms: u64) -> String {
    let secs = ms / 1000;
    let (h, m, s) = ((secs / 3600) % 24, (secs / 60) % 60, secs % 60);
    format!("{h:02}:{m:02}:{s:02}(+0000)")
}

fn dotted(out: &mut String, indent: usize, name: &str, value: &str) {
    let used = indent + name.len() + 2 + value.len() + 1;
    let dots = LINE_WIDTH.saturating_sub(used).max(3);
    let _ = writeln!(
        out,
        "{}{name}: {} {value}",
        " ".repeat(indent),
        ".".repeat(dots)
    );
}

fn number(v: f64) -> String {
    if v.fract() == 0.0 {
        format!("{v:.0}")
    } else {
        format!("{v:.1}")
    }
}

fn summary_block(out: &mut String, name: &str, s: &SummaryStats) {
    let _ = writeln!(out, "{name}:");
    let fields = [
        ("min", s.min),
        ("max", s.max),
        ("mean", s.mean),
        ("median", s.median),
        ("p95", s.p95),
        ("p99", s.p99),
    ];
    for (field, v) in fields {
        dotted(out, 2, field, &number(v));
    }
}

/// The metrics of a period (or the aggregate), sorted by name as Artillery prints them.
pub fn format_metrics(p: &Period) -> String {
    let mut out = String::new();
    let mut lines: Vec<(&str, String, Option<&SummaryStats>)> = Vec::new();
    for (k, v) in &p.counters {
        lines.push((k, v.to_string(), None));
    }
    for (k, v) in &p.rates {
        lines.push((k, format!("{}/sec", number(*v)), None));
    }
    for (k, s) in &p.summaries {
        lines.push((k, String::new(), Some(s)));
    }
    lines.sort_by(|a, b| a.0.cmp(b.0));
    for (name, value, summary) in lines {
        match summary {
            Some(s) => summary_block(&mut out, name, s),
            None => dotted(&mut out, 0, name, &value),
        }
    }
    out
}

fn banner(title: &str) -> String {
    let rule = "-".repeat(title.len());
    format!("{rule}\n{title}\n{rule}\n")
}

pub fn format_period(p: &Period) -> String {
    let end = p.period + p.width_ms;
    let title = format!(
        "Metrics for period to: {} (width: {:.3}s)",
        clock(end),
        p.width_ms as f64 / 1000.0
    );
    format!("{}\n{}", banner(&title), format_metrics(p))
}

/// A short period in one line: requests, rate, latency, codes and errors.
pub fn format_period_line(p: &Period) -> String {
    let end = p.period + p.width_ms;
    let mut line = format!(
        "{}  requests {}  {}/sec",
        clock(end),
        p.counter("http.requests"),
        number(p.rates.get("http.request_rate").copied().unwrap_or(0.0))
    );
    if let Some(s) = p.summaries.get("http.response_time") {
        let _ = write!(
            line,
            "  p50 {} p95 {} p99 {} ms",
            number(s.p50),
            number(s.p95),
            number(s.p99)
        );
    }
    for (k, v) in &p.counters {
        if let Some(code) = k.strip_prefix("http.codes.") {
            let _ = write!(line, "  {code}: {v}");
        } else if let Some(code) = k.strip_prefix("errors.") {
            let _ = write!(line, "  {code}: {v}");
        }
    }
    line
}

/// The per-endpoint table: count, status codes and errors, p50/p95/p99 (ms).
pub fn format_endpoints(rows: &[super::EndpointRow]) -> String {
    if rows.is_empty() {
        return String::new();
    }
    let name_width = rows
        .iter()
        .map(|r| r.name.chars().count())
        .max()
        .unwrap_or(8)
        .clamp(8, 48);
    let mut out = String::from("Endpoints:\n");
    let _ = writeln!(
        out,
        "  {:<name_width$}  {:>8}  {:>8}  {:>8}  {:>8}  codes and errors",
        "endpoint", "count", "p50", "p95", "p99"
    );
    let ms = |v: Option<f64>| v.map_or("-".to_string(), number);
    for r in rows {
        let mut name: String = r.name.chars().take(name_width).collect();
        if r.name.chars().count() > name_width {
            name.pop();
            name.push('~');
        }
        let codes: Vec<String> = r
            .codes
            .iter()
            .chain(r.errors.iter())
            .map(|(k, v)| format!("{k}: {v}"))
            .collect();
        let _ = writeln!(
            out,
            "  {name:<name_width$}  {:>8}  {:>8}  {:>8}  {:>8}  {}",
            r.count,
            ms(r.p50),
            ms(r.p95),
            ms(r.p99),
            codes.join(", ")
        );
    }
    out.push('\n');
    out
}

/// The closing banner: PASSED or FAILED with the exit code, the reasons and the notes.
pub fn format_verdict(v: &super::Verdict) -> String {
    let word = if v.passed { "PASSED" } else { "FAILED" };
    let title = format!(
        "{word} (exit code {}): {}",
        v.exit_code,
        v.reasons.join("; ")
    );
    let rule = "=".repeat(title.chars().count().min(LINE_WIDTH));
    let mut out = format!("\n{rule}\n{title}\n");
    if !v.notes.is_empty() {
        let _ = writeln!(out, "{}", v.notes.join("; "));
    }
    let _ = writeln!(out, "{rule}");
    out
}

pub fn print_period(p: &Period) {
    println!("{}", format_period(p));
}

pub fn print_summary(aggregate: &Period, elapsed: Duration) {
    println!("All VUs finished. Total time: {}\n", human(elapsed));
    let title = format!("Summary report @ {}", clock(now_ms()));
    println!("{}\n{}", banner(&title), format_metrics(aggregate));
}

pub fn print_checks(checks: &[Check]) {
    if checks.is_empty() {
        return;
    }
    println!("Checks:");
    for c in checks {
        let verdict = if c.ok {
            "ok"
        } else if c.strict {
            "fail"
        } else {
            "fail (not strict)"
        };
        println!("{verdict}: {}", c.description);
    }
}

/// `1 minute, 32 seconds` as Artillery words it.
pub fn human(d: Duration) -> String {
    let secs = d.as_secs();
    match (secs / 60, secs % 60) {
        (0, s) => format!("{s} seconds"),
        (1, s) => format!("1 minute, {s} seconds"),
        (m, s) => format!("{m} minutes, {s} seconds"),
    }
}
