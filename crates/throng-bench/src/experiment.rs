//! What a service's bench experiment implements (`throng bench NAME`): the
//! seed to load, the request streams to measure, the published figure to
//! compare with. The harness that runs them is `crate::harness`; the crate's
//! `experiments()` lists them.

use std::sync::Arc;

use futures::future::BoxFuture;
use throng_load::measure::{RequestFactory, RequestSpec};

/// How big a data set to seed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Scale {
    /// The write-up's size (booking: 5,000,000 slots).
    Full,
    /// A small set for a quick check of the harness itself.
    Quick,
}

/// One measured request stream.
pub struct Workload {
    pub name: String,
    pub factory: RequestFactory,
    /// Statuses that count as a correct answer (anything else is an error).
    pub ok_statuses: Vec<u16>,
    /// The smallest acceptable ratio to the ceiling (the experiment's target).
    pub target_ratio_min: Option<f64>,
    /// The write-up's figure for the comparable system, as printed.
    pub published: String,
    /// Another design a user could pick instead (run side by side for
    /// comparison): its memory peak is reported apart and not held to the
    /// experiment's `rss_mib_max`, which is about the service's own design.
    pub comparison: bool,
    /// Connection counts to measure it with, a row each; empty: the
    /// experiment's `connections()`. `--connections` overrides both.
    pub connections: Vec<usize>,
    /// For a comparison design: the name of the experiment's own workload
    /// it is an alternative to. The report sets the two side by side at each
    /// connection count, with the own one's req/s divided by this one's.
    pub alternative_to: Option<String>,
    /// Why it cannot run here (a server it needs is missing): the report
    /// shows the row with this reason and no figure.
    pub skipped: Option<String>,
    /// Runs before its warm-up and before each measured run, given how long
    /// that run lasts (e.g. empties a comparison design's keys so that every
    /// run registers afresh, or makes the requests the run will send); an
    /// error ends the bench.
    pub before_run: Option<BeforeRun>,
}

/// A workload's `before_run`: called with the length of the run it precedes.
pub type BeforeRun =
    Arc<dyn Fn(std::time::Duration) -> BoxFuture<'static, anyhow::Result<()>> + Send + Sync>;

/// The default workload is the ceiling's request, `GET /health` answered
/// 200, with no target and no published figure: a workload states what
/// differs and ends with `..Workload::default()`.
impl Default for Workload {
    fn default() -> Workload {
        Workload {
            name: String::new(),
            factory: Arc::new(|_| RequestSpec::get("/health")),
            ok_statuses: vec![200],
            target_ratio_min: None,
            published: String::new(),
            comparison: false,
            connections: Vec::new(),
            alternative_to: None,
            skipped: None,
            before_run: None,
        }
    }
}

/// What an experiment starts for its comparison designs outside throng
/// (`Experiment::start_backends`).
#[derive(Default)]
pub struct Backends {
    /// Arguments for every child server (where those servers listen).
    pub serve_args: Vec<String>,
    /// Held until the child servers have stopped, then dropped: dropping
    /// stops what was started.
    pub keep: Vec<Box<dyn std::any::Any + Send>>,
}

pub trait Experiment: Send + Sync {
    fn name(&self) -> &'static str;
    fn about(&self) -> &'static str;
    /// Arguments after `throng seed` (the harness adds the store flags).
    fn seed_args(&self, scale: Scale) -> Vec<String>;
    /// Extra `serve` arguments for the bench's child servers.
    fn serve_args(&self) -> Vec<String> {
        Vec::new()
    }
    /// The comparison designs the bench's child servers run beside the
    /// services (routes, tables made at their start, and `bench-server`
    /// flags): services of their own that only `throng bench` plugs in, so
    /// `throng serve` neither creates, mounts nor accepts anything of theirs.
    fn comparison_services(&self) -> Vec<&'static dyn crate::platform::service::AnyService> {
        Vec::new()
    }
    /// Starts what the comparison designs need outside throng (a database
    /// server of their own) before the child servers start, with the data
    /// directory the store lives in. A design whose server cannot be had
    /// here is not an error: its workload says why it was skipped.
    fn start_backends(&self, _data_dir: &std::path::Path) -> anyhow::Result<Backends> {
        Ok(Backends::default())
    }
    /// Called once before `workloads`, with the server's data directory
    /// (where its generated secrets are) and the address of the first child
    /// server (already serving), for experiments whose requests must be
    /// signed as the server's clients' are, or that make the data a workload
    /// reads through the API first.
    fn prepare(
        &self,
        _data_dir: &std::path::Path,
        _server: std::net::SocketAddr,
    ) -> anyhow::Result<()> {
        Ok(())
    }
    fn workloads(&self, scale: Scale) -> Vec<Workload>;
    /// Closed-model connections by default. Durable writes are bounded by
    /// connections / commit latency (Little's law), so an experiment about a
    /// crowd says how big a crowd it models.
    fn connections(&self) -> usize {
        64
    }
    /// Resident memory the server may use at most with the data set, in MiB.
    fn rss_mib_max(&self, _scale: Scale) -> Option<f64> {
        None
    }
    /// Lines of context printed under the table (the write-up's setup).
    fn notes(&self) -> Vec<String> {
        Vec::new()
    }
    /// Flags of its own after `throng bench NAME` (e.g. `--ballots`), added
    /// to `throng bench`'s; every experiment's must differ from the others'
    /// and the harness's.
    fn args(&self, cmd: clap::Command) -> clap::Command {
        cmd
    }
    /// An experiment measured without a server: when this answers, the
    /// harness neither seeds nor serves nor measures workloads; it prints
    /// the lines answered (or the error). `matches` holds the flags of
    /// [`Experiment::args`].
    fn standalone(&self, _matches: &clap::ArgMatches) -> Option<anyhow::Result<Vec<String>>> {
        None
    }
    /// Measurements that are not HTTP workloads (encodings, a rebuild read
    /// from the store), run after seeding and before the server starts;
    /// their lines are printed and added to the report's notes.
    fn offline(
        &self,
        _store: &crate::store::StoreUrl,
        _scale: Scale,
    ) -> anyhow::Result<Vec<String>> {
        Ok(Vec::new())
    }
}

pub use crate::platform::mix::{mix64, pick};

/// Stops a child process a bench started (its server, or a backend such as
/// a Redis): SIGTERM, so it can finish what it owes the disk, then up to
/// `grace` for it to exit, then SIGKILL.
pub fn stop_child(child: &mut std::process::Child, grace: std::time::Duration) {
    // SAFETY: kill(2) on the child's own pid; no memory is shared.
    unsafe {
        libc::kill(child.id() as i32, libc::SIGTERM);
    }
    let deadline = std::time::Instant::now() + grace;
    while std::time::Instant::now() < deadline {
        if let Ok(Some(_)) = child.try_wait() {
            return;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let _ = child.kill();
    let _ = child.wait();
}
