//! Standalone `throng-load`: the load generator without the server, same subcommands as
//! `throng load`.

use clap::Parser;

/// mimalloc instead of glibc's malloc, as the `throng` binary: a script's
/// requests allocate and free small buffers on every exchange, and glibc's
/// `malloc`/`free` were 6% of a `run`'s profile (BENCHMARKS.md, load).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[derive(Parser)]
#[command(
    name = "throng-load",
    version,
    about = "Artillery-compatible and wrk2-style HTTP load generator"
)]
struct Cli {
    #[command(subcommand)]
    cmd: throng_load::cli::LoadCommand,
    /// `run`: an Artillery configuration file (YAML, a `config:` section) the script is
    /// merged over, as `artillery run --config`.
    #[arg(long, global = true, value_name = "FILE")]
    config: Option<std::path::PathBuf>,
}

fn main() {
    let mut cli = Cli::parse();
    if let throng_load::cli::LoadCommand::Run(run) = &mut cli.cmd {
        run.config = cli.config.take();
    }
    std::process::exit(throng_load::cli::execute(cli.cmd));
}
