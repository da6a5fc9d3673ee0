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
}

fn main() {
    let cli = Cli::parse();
    std::process::exit(throng_load::cli::execute(cli.cmd));
}
