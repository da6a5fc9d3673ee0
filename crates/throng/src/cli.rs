//! The `throng` command line: thin glue over `app`, the services' seeds, the
//! token issuer, the load generator and the bench harness.

use std::process::ExitCode;

use clap::{Parser, Subcommand};

use crate::app::{self, ServeArgs, StoreArgs};
use crate::platform::auth::{Role, TokenKeys};
use crate::platform::secrets::Secrets;
use crate::services::{booking, comments};

#[derive(Parser, Debug)]
#[command(
    name = "throng",
    version,
    about = "Public web services that hold under a launch-day crowd"
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Run the HTTP server.
    Serve(ServeArgs),
    /// Load a data set into the store.
    Seed(SeedArgs),
    /// Print a signed bearer token.
    Token(TokenArgs),
    /// Generate load: Artillery scripts (`run`) or one URL, wrk2-style (`url`).
    Load {
        #[command(subcommand)]
        command: throng_load::cli::LoadCommand,
    },
    /// Reproduce a write-up's experiment against a child server.
    Bench(crate::bench::harness::BenchArgs),
}

#[derive(clap::Args, Debug)]
pub struct SeedArgs {
    #[command(flatten)]
    pub store: StoreArgs,
    #[command(subcommand)]
    pub what: SeedWhat,
}

#[derive(Subcommand, Debug)]
pub enum SeedWhat {
    /// Places x days x time slots (5,000,000 slots with the defaults).
    Booking(booking::seed::SeedBookingArgs),
    /// Users, courses, comments with replies (2,000,000 comments with the defaults).
    Comments(comments::seed::SeedCommentsArgs),
}

#[derive(clap::Args, Debug)]
pub struct TokenArgs {
    /// Subject: the user's or provider's id.
    #[arg(long)]
    pub sub: String,
    #[arg(long, value_enum)]
    pub role: Role,
    /// Lifetime in seconds.
    #[arg(long, default_value_t = 24 * 3600)]
    pub ttl_s: u64,
    /// Folder holding the token secret (as for `serve`).
    #[arg(long, env = "THRONG_DATA_DIR", default_value = "./throng-data")]
    pub data_dir: std::path::PathBuf,
}

pub fn run(cli: Cli) -> ExitCode {
    let result = match cli.command {
        Command::Serve(args) => runtime().block_on(serve(args)),
        Command::Seed(args) => runtime().block_on(seed(args)),
        Command::Token(args) => token(args),
        Command::Load { command } => {
            return ExitCode::from(throng_load::cli::execute(command).clamp(0, 255) as u8)
        }
        Command::Bench(args) => crate::bench::harness::run(args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("tokio runtime")
}

async fn serve(args: ServeArgs) -> anyhow::Result<()> {
    let mut running = app::start(args).await?;
    println!("throng listening on http://{}", running.addr);
    let stop = running.shutdown_handle();
    tokio::spawn(async move {
        let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
            .expect("signal handler");
        tokio::select! {
            _ = tokio::signal::ctrl_c() => {}
            _ = term.recv() => {}
        }
        tracing::info!("shutting down");
        if let Some(tx) = stop {
            let _ = tx.send(());
        }
    });
    running.wait().await;
    Ok(())
}

async fn seed(args: SeedArgs) -> anyhow::Result<()> {
    let (store, _) = app::open_store(&args.store).await?;
    match args.what {
        SeedWhat::Booking(b) => {
            let report = booking::seed::seed(&store, &b, true).await?;
            println!(
                "seeded {} places, {} slots in {:.1} s ({:.0} slots/s)",
                report.places,
                report.slots,
                report.elapsed_s,
                report.slots as f64 / report.elapsed_s.max(1e-9)
            );
        }
        SeedWhat::Comments(c) => {
            let r = comments::seed::seed(&store, &c, true).await?;
            if r.seeded {
                println!(
                    "seeded {} users, {} courses, {} comments, {} replies, {} snapshots in {:.1} s",
                    r.users, r.courses, r.comments, r.replies, r.snapshots, r.elapsed_s
                );
            }
            if let Some(path) = &c.testdata_csv {
                println!("wrote {} rows to {}", r.testdata_rows, path.display());
            }
        }
    }
    Ok(())
}

fn token(args: TokenArgs) -> anyhow::Result<()> {
    let secrets = Secrets::load_or_create(&args.data_dir)?;
    let keys = TokenKeys::new(&secrets.token_secret);
    println!("{}", keys.issue(&args.sub, args.role, args.ttl_s));
    Ok(())
}
