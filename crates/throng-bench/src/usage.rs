//! Where a run's CPU and disk flushes went, sampled from /proc and /sys
//! before and after it: the server processes, this process (the load
//! generator), the whole machine (so the rest is PostgreSQL, Redis and the
//! kernel), and the flushes of the machine's disks (an `fdatasync` ends in
//! at least one cache flush of the device; PostgreSQL's WAL flushes and a
//! durable Redis's count there too). Linux only; elsewhere every figure
//! stays 0 and none is printed.

use std::path::Path;

#[derive(Clone, Debug, Default)]
pub struct Usage {
    pub server_cpu_s: f64,
    pub generator_cpu_s: f64,
    /// Busy time of every CPU of the machine.
    pub machine_cpu_s: f64,
    pub disk_flushes: f64,
    /// Time the disks spent on those flushes.
    pub disk_flush_ms: f64,
}

impl Usage {
    /// The counters now, for the servers `server_pids`.
    pub fn sample(server_pids: &[u32]) -> Usage {
        let (disk_flushes, disk_flush_ms) = disk_flushes();
        Usage {
            server_cpu_s: server_pids
                .iter()
                .map(|p| process_cpu_s(&p.to_string()))
                .sum(),
            generator_cpu_s: process_cpu_s("self"),
            machine_cpu_s: machine_busy_s(),
            disk_flushes,
            disk_flush_ms,
        }
    }

    pub fn since(&self, before: &Usage) -> Usage {
        Usage {
            server_cpu_s: self.server_cpu_s - before.server_cpu_s,
            generator_cpu_s: self.generator_cpu_s - before.generator_cpu_s,
            machine_cpu_s: self.machine_cpu_s - before.machine_cpu_s,
            disk_flushes: self.disk_flushes - before.disk_flushes,
            disk_flush_ms: self.disk_flush_ms - before.disk_flush_ms,
        }
    }

    pub fn plus(&self, o: &Usage) -> Usage {
        Usage {
            server_cpu_s: self.server_cpu_s + o.server_cpu_s,
            generator_cpu_s: self.generator_cpu_s + o.generator_cpu_s,
            machine_cpu_s: self.machine_cpu_s + o.machine_cpu_s,
            disk_flushes: self.disk_flushes + o.disk_flushes,
            disk_flush_ms: self.disk_flush_ms + o.disk_flush_ms,
        }
    }
}

fn clock_ticks_per_s() -> f64 {
    // SAFETY: sysconf reads a constant of the system.
    let ticks = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if ticks > 0 {
        ticks as f64
    } else {
        100.0
    }
}

/// User plus system time of a process, every thread (`/proc/PID/stat`
/// fields 14 and 15, after the command name in parentheses).
fn process_cpu_s(pid: &str) -> f64 {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return 0.0;
    };
    let Some((_, after_name)) = stat.rsplit_once(')') else {
        return 0.0;
    };
    // Fields from the state (field 3) on: utime and stime are 14 and 15.
    let fields: Vec<&str> = after_name.split_whitespace().collect();
    let tick = |i: usize| {
        fields
            .get(i)
            .and_then(|v| v.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    (tick(11) + tick(12)) / clock_ticks_per_s()
}

/// Busy time of all CPUs: every state of `/proc/stat`'s `cpu` line but idle
/// and iowait.
fn machine_busy_s() -> f64 {
    let Ok(stat) = std::fs::read_to_string("/proc/stat") else {
        return 0.0;
    };
    let Some(line) = stat.lines().find(|l| l.starts_with("cpu ")) else {
        return 0.0;
    };
    let v: Vec<f64> = line
        .split_whitespace()
        .skip(1)
        .filter_map(|x| x.parse().ok())
        .collect();
    // user nice system idle iowait irq softirq steal (guest time is in user).
    let busy: f64 = v
        .iter()
        .take(8)
        .enumerate()
        .filter(|(i, _)| *i != 3 && *i != 4)
        .map(|(_, x)| x)
        .sum();
    busy / clock_ticks_per_s()
}

/// Flushes completed and the milliseconds spent on them, summed over the
/// machine's disks (`/sys/block/*/stat` fields 16 and 17, kernels from
/// 5.5; loop and RAM devices skipped).
fn disk_flushes() -> (f64, f64) {
    let Ok(dir) = std::fs::read_dir("/sys/block") else {
        return (0.0, 0.0);
    };
    let mut total = (0.0, 0.0);
    for entry in dir.flatten() {
        let name = entry.file_name().to_string_lossy().to_string();
        if name.starts_with("loop") || name.starts_with("ram") || name.starts_with("zram") {
            continue;
        }
        let Ok(stat) = std::fs::read_to_string(Path::new("/sys/block").join(&name).join("stat"))
        else {
            continue;
        };
        let f: Vec<f64> = stat
            .split_whitespace()
            .filter_map(|x| x.parse().ok())
            .collect();
        if f.len() >= 17 {
            total.0 += f[15];
            total.1 += f[16];
        }
    }
    total
}

#[cfg(test)]
mod tests {
    use super::*;

    /// This process's CPU time moves with work it does, and the machine's
    /// busy time covers it.
    #[test]
    fn a_busy_loop_shows_in_this_process_and_the_machine() {
        let before = Usage::sample(&[]);
        let started = std::time::Instant::now();
        let mut x: u64 = 1;
        while started.elapsed() < std::time::Duration::from_millis(300) {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1);
        }
        std::hint::black_box(x);
        let used = Usage::sample(&[]).since(&before);
        assert!(used.generator_cpu_s >= 0.1, "{used:?}");
        assert!(used.machine_cpu_s >= used.generator_cpu_s * 0.5, "{used:?}");
        assert_eq!(used.server_cpu_s, 0.0);
    }
}
