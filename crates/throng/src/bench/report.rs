//! The bench's results: a console table, a JSON file and a markdown table.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Serialize;
use throng_load::measure::Summary;

use super::harness::median_by;
use super::Workload;

#[derive(Serialize, Debug)]
pub struct WorkloadResult {
    pub name: String,
    pub requests_per_s: f64,
    pub latency_us_p50: f64,
    pub latency_us_p99: f64,
    pub ratio_to_ceiling: f64,
    pub target_ratio_min: Option<f64>,
    pub target_met: Option<bool>,
    pub published: String,
    /// Every run's req/s, in order.
    pub runs_requests_per_s: Vec<f64>,
    /// Statuses summed over the measured runs.
    pub status_counts: BTreeMap<u16, u64>,
    /// Answers outside the workload's accepted statuses, plus transport errors.
    pub errors: u64,
    /// Server-side group commit over the measured runs (0 for read workloads).
    pub writer_batches: f64,
    pub writer_commands_per_batch_mean: f64,
    pub writer_commit_ms_mean: f64,
}

impl WorkloadResult {
    pub fn from_runs(w: &Workload, runs: &[Summary], ceiling_rps: f64) -> WorkloadResult {
        let rps = median_by(runs, |s| s.requests_per_s);
        let mut status_counts = BTreeMap::new();
        let mut errors = 0;
        for s in runs {
            for (code, n) in &s.status_counts {
                *status_counts.entry(*code).or_insert(0) += n;
                if !w.ok_statuses.contains(code) {
                    errors += n;
                }
            }
            errors += s.errors.values().sum::<u64>();
        }
        let ratio = if ceiling_rps > 0.0 {
            rps / ceiling_rps
        } else {
            0.0
        };
        WorkloadResult {
            name: w.name.clone(),
            requests_per_s: rps,
            latency_us_p50: median_by(runs, |s| s.latency_us_p50 as f64),
            latency_us_p99: median_by(runs, |s| s.latency_us_p99 as f64),
            ratio_to_ceiling: ratio,
            target_ratio_min: w.target_ratio_min,
            target_met: w.target_ratio_min.map(|t| ratio >= t && errors == 0),
            published: w.published.clone(),
            runs_requests_per_s: runs.iter().map(|s| s.requests_per_s).collect(),
            status_counts,
            errors,
            writer_batches: 0.0,
            writer_commands_per_batch_mean: 0.0,
            writer_commit_ms_mean: 0.0,
        }
    }
}

#[derive(Serialize, Debug)]
pub struct BenchReport {
    pub experiment: String,
    pub about: String,
    pub scale: String,
    pub runs: usize,
    pub duration_s: u64,
    pub connections: usize,
    pub store: String,
    pub seed_s: Option<f64>,
    pub results: Vec<WorkloadResult>,
    pub rss_mib: f64,
    /// Peak while the experiment's own workloads ran (and the ceiling).
    pub rss_mib_peak: f64,
    /// Peak while comparison designs ran, when measured apart.
    pub rss_mib_peak_comparison: Option<f64>,
    /// Heap, stacks: memory the server itself holds.
    pub rss_anon_mib: f64,
    /// Mapped database pages (the kernel's page cache, shared, reclaimable).
    pub rss_file_mib: f64,
    pub rss_mib_max: Option<f64>,
    pub notes: Vec<String>,
    pub cores: usize,
    pub command: String,
}

fn ms(us: f64) -> String {
    format!("{:.2} ms", us / 1000.0)
}

impl BenchReport {
    fn rows(&self) -> Vec<[String; 7]> {
        self.results
            .iter()
            .map(|r| {
                let target = match (r.target_ratio_min, r.target_met) {
                    (Some(t), Some(true)) => format!(">= {t:.2} met"),
                    (Some(t), _) => format!(">= {t:.2} NOT MET"),
                    _ => String::new(),
                };
                [
                    r.name.clone(),
                    format!("{:.0}", r.requests_per_s),
                    ms(r.latency_us_p50),
                    ms(r.latency_us_p99),
                    format!("{:.2}", r.ratio_to_ceiling),
                    target,
                    r.published.clone(),
                ]
            })
            .collect()
    }

    const HEADER: [&'static str; 7] = [
        "workload", "req/s", "p50", "p99", "ratio", "target", "write-up",
    ];

    pub fn print(&self) {
        println!(
            "\nthrong bench {} ({} scale, {} store, {} runs x {} s, {} connections, {} cores; medians)",
            self.experiment, self.scale, self.store, self.runs, self.duration_s, self.connections, self.cores
        );
        let rows = self.rows();
        let mut widths = Self::HEADER.map(|h| h.chars().count());
        for r in &rows {
            for (i, c) in r.iter().enumerate() {
                widths[i] = widths[i].max(c.chars().count());
            }
        }
        let line = |cells: Vec<&str>| {
            cells
                .iter()
                .enumerate()
                .map(|(i, c)| format!("{:<w$}", c, w = widths[i]))
                .collect::<Vec<_>>()
                .join("  ")
        };
        println!("{}", line(Self::HEADER.to_vec()));
        for r in &rows {
            println!("{}", line(r.iter().map(|s| s.as_str()).collect()));
        }
        for r in &self.results {
            if r.writer_batches >= 1.0 {
                println!(
                    "  {}: group commit {:.1} commands/batch, {:.2} ms per batch (apply + fsync)",
                    r.name, r.writer_commands_per_batch_mean, r.writer_commit_ms_mean
                );
            }
            if r.errors > 0 {
                println!(
                    "  {}: {} unexpected answers {:?}",
                    r.name, r.errors, r.status_counts
                );
            }
        }
        println!("{}", self.memory_line());
        if let Some(s) = self.seed_s {
            println!("seeding took {s:.1} s");
        }
        for n in &self.notes {
            println!("note: {n}");
        }
    }

    fn memory_line(&self) -> String {
        let limit = match self.rss_mib_max {
            Some(m) if self.rss_mib_peak <= m => format!(" (limit {m:.0} MiB: met)"),
            Some(m) => format!(" (limit {m:.0} MiB: NOT MET)"),
            None => String::new(),
        };
        let comparison = match self.rss_mib_peak_comparison {
            Some(p) => format!("; {p:.0} MiB peak under the comparison designs"),
            None => String::new(),
        };
        format!(
            "server resident memory: {:.0} MiB now ({:.0} MiB heap and stacks, {:.0} MiB file-backed: the binary and the mapped database), {:.0} MiB peak{limit}{comparison}",
            self.rss_mib, self.rss_anon_mib, self.rss_file_mib, self.rss_mib_peak
        )
    }

    pub fn markdown(&self) -> String {
        let mut md = format!(
            "### throng bench {}\n\n`{}` — {} scale, {} store, median of {} runs x {} s, {} connections, {} cores.\n\n",
            self.experiment, self.command, self.scale, self.store, self.runs, self.duration_s, self.connections, self.cores
        );
        md.push_str(&format!("| {} |\n", Self::HEADER.join(" | ")));
        md.push_str(&format!("|{}\n", "---|".repeat(Self::HEADER.len())));
        for r in self.rows() {
            md.push_str(&format!("| {} |\n", r.join(" | ")));
        }
        md.push_str(&format!("\n{}\n", self.memory_line()));
        if let Some(s) = self.seed_s {
            md.push_str(&format!("\nSeeding took {s:.1} s.\n"));
        }
        for n in &self.notes {
            md.push_str(&format!("\n- {n}"));
        }
        md.push('\n');
        md
    }

    /// Writes `<experiment>-<unix time>.json` and `.md`; returns their paths.
    pub fn write(&self, dir: &Path) -> anyhow::Result<(PathBuf, PathBuf)> {
        std::fs::create_dir_all(dir)?;
        let stamp = crate::base::clock::now_ms() / 1000;
        let json = dir.join(format!("{}-{stamp}.json", self.experiment));
        let md = dir.join(format!("{}-{stamp}.md", self.experiment));
        std::fs::write(&json, serde_json::to_vec_pretty(self)?)?;
        std::fs::write(&md, self.markdown())?;
        Ok((json, md))
    }
}
