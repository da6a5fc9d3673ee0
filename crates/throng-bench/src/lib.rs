//! `throng bench EXPERIMENT`: reproduces a write-up's experiment side by side
//! with its published figure.
//!
//! The harness starts a throng server as a child process on a fresh data
//! directory, seeds it with `throng seed ...`, warms up, then measures the
//! ceiling (`GET /health`) and the experiment's workloads in the same run,
//! alternating (ceiling, workload 1, workload 2, ..., then the ceiling and
//! the workloads in reverse order, and so on), and keeps the median of
//! `--runs` runs of each. Machines here are shared and noisy,
//! so the figure that matters is the ratio to the ceiling measured alongside.
//! A workload may be measured with several connection counts
//! (`Workload::connections`, or `--connections 16,64,256`), a row each; the
//! ceiling is then measured with each count, next to that count's rows, and
//! a row's ratio uses its own count's ceiling.
//! Comparison designs (`Workload::comparison`: what a user could pick
//! instead) run after the experiment's own workloads, alternating with the
//! ceiling again (their ratios use that ceiling), so their resident memory
//! is reported apart. A design that names the own workload it is an
//! alternative to (`Workload::alternative_to`) is set beside it per
//! connection count, with the own one's req/s divided by the design's.
//!
//! The child servers run `throng bench-server EXPERIMENT` (hidden): the
//! same server as `throng serve` plus the experiment's comparison designs
//! (`Experiment::comparison_services`), whose code, routes, tables and flags
//! live with the service's bench and never in what `serve` creates, mounts
//! or accepts. What a design needs outside throng (a database server of its
//! own) is started by `Experiment::start_backends` before the child servers
//! and stopped after them; a design that cannot be had here is reported as
//! skipped, with the reason, and no figure.
//!
//! An experiment that needs no server (`Experiment::standalone`: an offline
//! computation such as the trustees' opening) runs alone with its own flags
//! (`Experiment::args`) and prints its lines.
//!
//! Each experiment implements [`experiment::Experiment`]: the services'
//! in a module named after the service (`booking`, with its comparison
//! designs beside it in `booking/`), the platform's own (`tokens`, `backup`)
//! beside the harness. This crate sits above the services, so none of
//! their production code can reach a comparison design: Cargo refuses the
//! arrow.

pub use throng_services::{base, platform, services, store};

pub mod backup;
pub mod booking;
pub mod comments;
pub mod events;
pub mod experiment;
pub mod harness;
pub mod invites;
pub mod report;
pub mod server_binary;
pub mod token_secret;
pub mod tokens;
pub mod usage;
pub mod voting;

use crate::platform::service::AnyService;
pub use experiment::{mix64, pick, Experiment, Scale, Workload};

/// The services a bench child server runs for experiment `name`: every
/// service, then the experiment's comparison designs if it has any.
pub fn child_services(name: &str) -> anyhow::Result<&'static [&'static dyn AnyService]> {
    let exp = experiments()
        .into_iter()
        .find(|e| e.name() == name)
        .ok_or_else(|| {
            anyhow::anyhow!("unknown experiment '{name}'; `throng bench --list` lists them")
        })?;
    let extra = exp.comparison_services();
    if extra.is_empty() {
        return Ok(crate::services::all());
    }
    let mut list = crate::services::all().to_vec();
    list.extend(extra);
    // Once per process (a child server, a test).
    Ok(Vec::leak(list))
}

/// Every experiment's comparison designs, each once (by name).
fn comparison_services() -> Vec<&'static dyn AnyService> {
    let mut out: Vec<&'static dyn AnyService> = Vec::new();
    for s in experiments().iter().flat_map(|e| e.comparison_services()) {
        if !out.iter().any(|o| o.name() == s.name()) {
            out.push(s);
        }
    }
    out
}

/// The flags of every experiment's comparison designs, which only `throng
/// bench-server` accepts (beside `serve`'s), kept as matches: each design
/// parses its own part at start, as a service does from `serve`'s.
#[derive(Clone, Debug, Default)]
pub struct ComparisonArgs(pub clap::ArgMatches);

impl clap::FromArgMatches for ComparisonArgs {
    fn from_arg_matches(m: &clap::ArgMatches) -> Result<Self, clap::Error> {
        Ok(ComparisonArgs(m.clone()))
    }
    fn update_from_arg_matches(&mut self, m: &clap::ArgMatches) -> Result<(), clap::Error> {
        self.0 = m.clone();
        Ok(())
    }
}

impl clap::Args for ComparisonArgs {
    fn augment_args(cmd: clap::Command) -> clap::Command {
        comparison_services()
            .into_iter()
            .fold(cmd, |c, s| s.serve_args(c))
    }
    fn augment_args_for_update(cmd: clap::Command) -> clap::Command {
        Self::augment_args(cmd)
    }
}

/// The experiments' own flags (`Experiment::args`), kept as matches: the
/// experiment run reads its part.
#[derive(Clone, Debug, Default)]
pub struct ExperimentArgs(pub clap::ArgMatches);

impl clap::FromArgMatches for ExperimentArgs {
    fn from_arg_matches(m: &clap::ArgMatches) -> Result<Self, clap::Error> {
        Ok(ExperimentArgs(m.clone()))
    }
    fn update_from_arg_matches(&mut self, m: &clap::ArgMatches) -> Result<(), clap::Error> {
        self.0 = m.clone();
        Ok(())
    }
}

impl clap::Args for ExperimentArgs {
    fn augment_args(cmd: clap::Command) -> clap::Command {
        experiments().iter().fold(cmd, |c, e| e.args(c))
    }
    fn augment_args_for_update(cmd: clap::Command) -> clap::Command {
        Self::augment_args(cmd)
    }
}

/// Every experiment: the services' in the order of `services::all()`, then
/// the platform's own (`tokens`: the identity provider's tokens;
/// `backup`: a copy of a live store and its restore).
pub fn experiments() -> Vec<Box<dyn Experiment>> {
    vec![
        Box::new(booking::BookingBench::default()),
        Box::new(comments::CommentsBench { cache: true }),
        Box::new(comments::CommentsBench { cache: false }),
        Box::new(voting::VotingBench),
        Box::new(voting::opening::OpeningBench),
        Box::new(invites::InvitesBench::default()),
        Box::new(events::EventsBench),
        Box::new(tokens::TokensBench),
        Box::new(backup::BackupBench),
    ]
}
