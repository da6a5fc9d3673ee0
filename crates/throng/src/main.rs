use clap::Parser;

/// mimalloc instead of glibc's malloc: request handling allocates on the
/// async workers and frees on the store's writer thread (and back), which
/// glibc serves with per-arena locks and fastbin consolidation (see
/// BENCHMARKS.md for the measured difference).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> std::process::ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .with_writer(std::io::stderr)
        .init();
    throng::cli::run(throng::cli::Cli::parse())
}
