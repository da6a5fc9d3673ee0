//! The bench's results: a console table, a JSON file and a markdown table.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Serialize;
use throng_load::measure::Summary;

use super::harness::{median_by, WriterStats};
use super::usage::Usage;
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
    /// The writer's commit time as a share of the measured time.
    pub writer_busy_share: f64,
    /// The server's own mean time per request over the measured runs
    /// (`throng_http_request_duration_seconds`: from the parsed head to the
    /// answer made), in ms; the rest of the client's latency is parsing the
    /// head, writing the answer, the kernels and the client.
    pub server_ms_mean: Option<f64>,
    /// CPU per answered request over the measured runs, in microseconds:
    /// the server processes, the load generator (this process), and the
    /// rest of the machine (PostgreSQL, Redis, the kernel; see `usage`).
    pub server_cpu_us_per_request: Option<f64>,
    pub generator_cpu_us_per_request: Option<f64>,
    pub other_cpu_us_per_request: Option<f64>,
    /// The machine's disk cache flushes per second of the measured runs,
    /// and their mean time (each `fdatasync` ends in at least one).
    pub disk_flushes_per_s: Option<f64>,
    pub disk_flush_ms_mean: Option<f64>,
    /// Closed-model connections it was measured with.
    pub connections: usize,
    /// Measured in the comparison designs' phase (its ratio uses that
    /// phase's ceiling).
    pub comparison: bool,
    /// The experiment's own workload this design is an alternative to.
    pub alternative_to: Option<String>,
    /// That own workload's req/s divided by this one's, with the same
    /// connections in the same bench.
    pub own_divided_by_this: Option<f64>,
    /// The same with each first divided by its phase's ceiling.
    pub own_divided_by_this_per_ceiling: Option<f64>,
    /// Why it was not measured (no figure is given).
    pub skipped: Option<String>,
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
            writer_busy_share: 0.0,
            server_ms_mean: None,
            server_cpu_us_per_request: None,
            generator_cpu_us_per_request: None,
            other_cpu_us_per_request: None,
            disk_flushes_per_s: None,
            disk_flush_ms_mean: None,
            connections: 0,
            comparison: w.comparison,
            alternative_to: w.alternative_to.clone(),
            own_divided_by_this: None,
            own_divided_by_this_per_ceiling: None,
            skipped: None,
        }
    }

    /// A workload that could not run here: its reason and no figure.
    pub fn skipped(w: &Workload) -> WorkloadResult {
        WorkloadResult {
            target_met: None,
            skipped: w.skipped.clone(),
            ..WorkloadResult::from_runs(w, &[], 0.0)
        }
    }

    /// The writer's counters summed over the runs, `measured_s` long in all.
    pub fn set_writer(&mut self, total: &WriterStats, measured_s: f64) {
        self.writer_batches = total.batches;
        self.writer_commands_per_batch_mean = total.commands_per_batch();
        self.writer_commit_ms_mean = total.commit_ms_mean();
        self.writer_busy_share = if measured_s > 0.0 {
            total.commit_s / measured_s
        } else {
            0.0
        };
        self.server_ms_mean = total.server_ms_mean();
    }

    /// CPU and disk flushes summed over the runs: `requests` answers in
    /// `measured_s` seconds in all.
    pub fn set_usage(&mut self, total: &Usage, requests: f64, measured_s: f64) {
        if requests < 1.0 || total.machine_cpu_s <= 0.0 {
            return;
        }
        let per_request_us = |s: f64| Some(s.max(0.0) * 1e6 / requests);
        self.server_cpu_us_per_request = per_request_us(total.server_cpu_s);
        self.generator_cpu_us_per_request = per_request_us(total.generator_cpu_s);
        self.other_cpu_us_per_request =
            per_request_us(total.machine_cpu_s - total.server_cpu_s - total.generator_cpu_s);
        if measured_s > 0.0 {
            self.disk_flushes_per_s = Some(total.disk_flushes / measured_s);
        }
        if total.disk_flushes >= 1.0 {
            self.disk_flush_ms_mean = Some(total.disk_flush_ms / total.disk_flushes);
        }
    }

    /// The share of answers that were 2xx (the rest were accepted statuses
    /// such as 409, or errors).
    pub fn share_2xx(&self) -> f64 {
        let all: u64 = self.status_counts.values().sum();
        let ok: u64 = self
            .status_counts
            .iter()
            .filter(|(code, _)| (200..300).contains(*code))
            .map(|(_, n)| n)
            .sum();
        if all == 0 {
            0.0
        } else {
            ok as f64 / all as f64
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
    /// Every connection count measured (each row states its own).
    pub connections: Vec<usize>,
    pub store: String,
    pub seed_s: Option<f64>,
    pub results: Vec<WorkloadResult>,
    pub rss_mib: f64,
    /// Peak while the experiment's own workloads ran (and the ceiling);
    /// `None` when none of them was selected.
    pub rss_mib_peak: Option<f64>,
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

/// "1.23x", or "-" when there is nothing to divide.
fn times(x: Option<f64>) -> String {
    x.map(|x| format!("{x:.2}x")).unwrap_or_else(|| "-".into())
}

/// Cells of one table, printed aligned or as markdown.
struct Table {
    header: Vec<&'static str>,
    rows: Vec<Vec<String>>,
}

impl Table {
    fn text(&self) -> String {
        let mut widths: Vec<usize> = self.header.iter().map(|h| h.chars().count()).collect();
        for r in &self.rows {
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
                .trim_end()
                .to_string()
        };
        let mut out = line(self.header.clone());
        for r in &self.rows {
            out.push('\n');
            out.push_str(&line(r.iter().map(|s| s.as_str()).collect()));
        }
        out
    }

    fn markdown(&self) -> String {
        let mut md = format!("| {} |\n", self.header.join(" | "));
        md.push_str(&format!("|{}\n", "---|".repeat(self.header.len())));
        for r in &self.rows {
            md.push_str(&format!("| {} |\n", r.join(" | ")));
        }
        md
    }
}

impl BenchReport {
    /// More than one connection count: rows say theirs.
    fn several_counts(&self) -> bool {
        self.connections.len() > 1
    }

    fn connections_text(&self) -> String {
        let counts: Vec<String> = self.connections.iter().map(|c| c.to_string()).collect();
        format!("{} connections", counts.join(", "))
    }

    /// Every row: the measured ones in the order they ran (by phase, then
    /// connections), a skipped one with its reason instead of figures.
    fn table(&self) -> Table {
        let several = self.several_counts();
        let mut header = vec!["workload"];
        if several {
            header.push("conns");
        }
        header.extend(["req/s", "p50", "p99", "ratio", "target", "write-up"]);
        let rows = self
            .results
            .iter()
            .map(|r| {
                let mut row = vec![r.name.clone()];
                if several {
                    row.push(r.connections.to_string());
                }
                if r.skipped.is_some() {
                    row.extend(["skipped".into(), "-".into(), "-".into(), "-".into()]);
                    row.extend([String::new(), r.published.clone()]);
                    return row;
                }
                let target = match (r.target_ratio_min, r.target_met) {
                    (Some(t), Some(true)) => format!(">= {t:.2} met"),
                    (Some(t), _) => format!(">= {t:.2} NOT MET"),
                    _ => String::new(),
                };
                row.extend([
                    format!("{:.0}", r.requests_per_s),
                    ms(r.latency_us_p50),
                    ms(r.latency_us_p99),
                    format!("{:.2}", r.ratio_to_ceiling),
                    target,
                    r.published.clone(),
                ]);
                row
            })
            .collect();
        Table { header, rows }
    }

    /// The own workloads that comparison designs are alternatives to, each
    /// with its designs side by side per connection count: req/s, the share
    /// of fresh answers (2xx), the ratio to the phase's ceiling, and the own
    /// workload's req/s divided by each design's (and per ceiling).
    fn side_by_side(&self) -> Vec<(String, Table)> {
        let mut owns: Vec<&str> = Vec::new();
        for r in &self.results {
            if let Some(of) = r.alternative_to.as_deref() {
                if !owns.contains(&of) {
                    owns.push(of);
                }
            }
        }
        owns.into_iter()
            .map(|own| {
                let mut rows = Vec::new();
                for &c in &self.connections {
                    let at_c = |r: &&WorkloadResult| r.connections == c;
                    let mine = self
                        .results
                        .iter()
                        .filter(at_c)
                        .filter(|r| r.name == own && !r.comparison);
                    let designs = self
                        .results
                        .iter()
                        .filter(at_c)
                        .filter(|r| r.alternative_to.as_deref() == Some(own));
                    for r in mine.chain(designs) {
                        let mut row = vec![c.to_string(), r.name.clone()];
                        if let Some(why) = &r.skipped {
                            row.extend(["skipped".into(), "-".into(), "-".into(), "-".into()]);
                            row.extend(["-".into(), why.clone()]);
                        } else {
                            row.extend([
                                format!("{:.0}", r.requests_per_s),
                                ms(r.latency_us_p50),
                                format!("{:.0}%", 100.0 * r.share_2xx()),
                                format!("{:.2}", r.ratio_to_ceiling),
                                times(r.own_divided_by_this),
                                times(r.own_divided_by_this_per_ceiling),
                            ]);
                        }
                        rows.push(row);
                    }
                }
                let table = Table {
                    header: vec![
                        "conns",
                        "design",
                        "req/s",
                        "p50",
                        "2xx",
                        "ratio",
                        "ours / this",
                        "ours / this, per ceiling",
                    ],
                    rows,
                };
                (own.to_string(), table)
            })
            .filter(|(_, t)| !t.rows.is_empty())
            .collect()
    }

    /// Group commit, unexpected answers and skipped rows, a line each.
    fn row_notes(&self) -> Vec<String> {
        let mut out = Vec::new();
        for r in &self.results {
            let at = if self.several_counts() {
                format!(" at {} connections", r.connections)
            } else {
                String::new()
            };
            if r.writer_batches >= 1.0 {
                let server = match r.server_ms_mean {
                    Some(ms) => format!("; {ms:.3} ms mean in the server per request"),
                    None => String::new(),
                };
                out.push(format!(
                    "{}{at}: group commit {:.1} commands/batch, {:.2} ms per batch (apply + fsync), committing {:.0}% of the time{server}",
                    r.name,
                    r.writer_commands_per_batch_mean,
                    r.writer_commit_ms_mean,
                    100.0 * r.writer_busy_share,
                ));
            }
            if let (Some(server), Some(generator), Some(other)) = (
                r.server_cpu_us_per_request,
                r.generator_cpu_us_per_request,
                r.other_cpu_us_per_request,
            ) {
                let flushes = match (r.disk_flushes_per_s, r.disk_flush_ms_mean) {
                    (Some(n), Some(ms)) => {
                        format!("; the disks flushed {n:.0} times a second, {ms:.2} ms each")
                    }
                    _ => String::new(),
                };
                out.push(format!(
                    "{}{at}: CPU per request: {server:.1} us in the server, {generator:.1} us in the load generator, {other:.1} us elsewhere (database, kernel){flushes}",
                    r.name,
                ));
            }
            if r.errors > 0 {
                out.push(format!(
                    "{}{at}: {} unexpected answers {:?}",
                    r.name, r.errors, r.status_counts
                ));
            }
            if let Some(why) = &r.skipped {
                out.push(format!("{}{at}: skipped: {why}", r.name));
            }
        }
        out
    }

    pub fn print(&self) {
        println!(
            "\nthrong bench {} ({} scale, {} store, {} runs x {} s, {}, {} cores; medians)",
            self.experiment,
            self.scale,
            self.store,
            self.runs,
            self.duration_s,
            self.connections_text(),
            self.cores
        );
        println!("{}", self.table().text());
        for line in self.row_notes() {
            println!("  {line}");
        }
        for (own, table) in self.side_by_side() {
            println!("\n{own}, against the comparison designs (ours / this: req/s over req/s; per ceiling: each ratio to its phase's /health first):");
            println!("{}", table.text());
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
        let limit = match (self.rss_mib_max, self.rss_mib_peak) {
            (Some(m), Some(p)) if p <= m => format!(" (limit {m:.0} MiB: met)"),
            (Some(m), Some(_)) => format!(" (limit {m:.0} MiB: NOT MET)"),
            _ => String::new(),
        };
        let peak = match self.rss_mib_peak {
            Some(p) => format!("{p:.0} MiB peak"),
            None => "no peak of the service's own workloads (none ran)".into(),
        };
        let comparison = match self.rss_mib_peak_comparison {
            Some(p) => format!("; {p:.0} MiB peak under the comparison designs"),
            None => String::new(),
        };
        format!(
            "server resident memory: {:.0} MiB now ({:.0} MiB heap and stacks, {:.0} MiB file-backed: the binary and the mapped database), {peak}{limit}{comparison}",
            self.rss_mib, self.rss_anon_mib, self.rss_file_mib
        )
    }

    pub fn markdown(&self) -> String {
        let mut md = format!(
            "### throng bench {}\n\n`{}` — {} scale, {} store, median of {} runs x {} s, {}, {} cores.\n\n",
            self.experiment,
            self.command,
            self.scale,
            self.store,
            self.runs,
            self.duration_s,
            self.connections_text(),
            self.cores
        );
        md.push_str(&self.table().markdown());
        for line in self.row_notes() {
            md.push_str(&format!("\n- {line}"));
        }
        for (own, table) in self.side_by_side() {
            md.push_str(&format!(
                "\n\n{own}, against the comparison designs (ours / this: req/s over req/s; per ceiling: each ratio to its phase's `/health` first):\n\n"
            ));
            md.push_str(&table.markdown());
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

#[cfg(test)]
mod tests {
    use super::*;

    fn result(name: &str, connections: usize, rps: f64) -> WorkloadResult {
        let mut r = WorkloadResult::from_runs(&Workload::default(), &[], 0.0);
        r.name = name.into();
        r.connections = connections;
        r.requests_per_s = rps;
        r.status_counts = BTreeMap::from([(201, 3), (409, 1)]);
        r
    }

    fn report(results: Vec<WorkloadResult>) -> BenchReport {
        let mut connections: Vec<usize> = results.iter().map(|r| r.connections).collect();
        connections.sort_unstable();
        connections.dedup();
        BenchReport {
            experiment: "x".into(),
            about: String::new(),
            scale: "quick".into(),
            runs: 1,
            duration_s: 1,
            connections,
            store: "sqlite".into(),
            seed_s: None,
            results,
            rss_mib: 0.0,
            rss_mib_peak: Some(0.0),
            rss_mib_peak_comparison: None,
            rss_anon_mib: 0.0,
            rss_file_mib: 0.0,
            rss_mib_max: None,
            notes: Vec::new(),
            cores: 2,
            command: "throng bench x".into(),
        }
    }

    /// Per connection count: the own workload, then its designs with the
    /// own one's req/s divided by theirs; a skipped design says why, with
    /// no figure.
    #[test]
    fn designs_sit_beside_the_own_workload_per_count() {
        let mut redis = result("redis", 16, 20_000.0);
        redis.comparison = true;
        redis.alternative_to = Some("ours".into());
        redis.own_divided_by_this = Some(1.5);
        redis.own_divided_by_this_per_ceiling = Some(1.25);
        let mut durable = result("durable", 16, 0.0);
        durable.comparison = true;
        durable.alternative_to = Some("ours".into());
        durable.skipped = Some("redis-server is not on the PATH".into());
        let r = report(vec![
            result("ours", 16, 30_000.0),
            result("ours", 256, 50_000.0),
            redis,
            durable,
        ]);
        let sides = r.side_by_side();
        assert_eq!(sides.len(), 1);
        let (own, table) = &sides[0];
        assert_eq!(own, "ours");
        let rows: Vec<Vec<&str>> = table
            .rows
            .iter()
            .map(|r| r.iter().map(|c| c.as_str()).collect())
            .collect();
        assert_eq!(rows[0][..3], ["16", "ours", "30000"]);
        assert_eq!(rows[0][4], "75%");
        assert_eq!(rows[1][..3], ["16", "redis", "20000"]);
        assert_eq!(rows[1][6..], ["1.50x", "1.25x"]);
        assert_eq!(rows[2][..3], ["16", "durable", "skipped"]);
        assert_eq!(rows[2][7], "redis-server is not on the PATH");
        assert_eq!(rows[3][..2], ["256", "ours"]);
        let text = r.table().text();
        assert!(text.starts_with("workload  conns"), "{text}");
        assert!(text.contains("skipped"), "{text}");
        let md = r.markdown();
        assert!(md.contains("16, 256 connections"), "{md}");
        assert!(
            md.contains("durable at 16 connections: skipped: redis-server is not on the PATH"),
            "{md}"
        );
    }

    /// One connection count: no column for it.
    #[test]
    fn one_count_has_no_connections_column() {
        let text = report(vec![result("ours", 64, 1.0)]).table().text();
        assert!(text.starts_with("workload  req/s"), "{text}");
    }
}
