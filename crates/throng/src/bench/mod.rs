//! `throng bench EXPERIMENT`: reproduces a write-up's experiment side by side
//! with its published figure.
//!
//! The harness starts a throng server as a child process on a fresh data
//! directory, seeds it with `throng seed ...`, warms up, then measures the
//! ceiling (`GET /health`) and the experiment's workloads in the same run,
//! alternating (ceiling, workload 1, workload 2, ..., then again), and keeps
//! the median of `--runs` runs of each. Machines here are shared and noisy,
//! so the figure that matters is the ratio to the ceiling measured alongside.
//! Comparison designs (`Workload::comparison`: what a user could pick
//! instead) run after the experiment's own workloads, alternating with the
//! ceiling again (their ratios use that ceiling), so their resident memory
//! is reported apart.
//!
//! The child servers run `throng bench-server EXPERIMENT` (hidden): the
//! same server as `throng serve` plus the experiment's comparison designs
//! (`Experiment::comparison_service`), whose code, routes and tables live
//! with the service's bench and never in what `serve` creates or mounts.
//!
//! A service registers its experiments by implementing
//! [`crate::platform::experiment::Experiment`] in its own folder
//! (`services/<name>/bench.rs`) and returning them from its
//! `Service::experiments`; this module names no service.

pub mod harness;
pub mod report;

pub use crate::platform::experiment::{mix64, pick, Experiment, Scale, Workload};
use crate::platform::service::AnyService;

/// The services a bench child server runs for experiment `name`: every
/// service, then the experiment's comparison designs if it has any.
pub fn child_services(name: &str) -> anyhow::Result<&'static [&'static dyn AnyService]> {
    let exp = experiments()
        .into_iter()
        .find(|e| e.name() == name)
        .ok_or_else(|| {
            anyhow::anyhow!("unknown experiment '{name}'; `throng bench --list` lists them")
        })?;
    let Some(extra) = exp.comparison_service() else {
        return Ok(crate::services::all());
    };
    let mut list = crate::services::all().to_vec();
    list.push(extra);
    // Once per process (a child server, a test).
    Ok(Vec::leak(list))
}

/// Every service's experiments, in the order of `services::all()`.
pub fn experiments() -> Vec<Box<dyn Experiment>> {
    crate::services::all()
        .iter()
        .flat_map(|s| s.experiments())
        .collect()
}
