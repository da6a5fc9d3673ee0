//! Standalone `throng-load`: the load generator without the server, same subcommands as
//! `throng load`.

use clap::Parser;

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
