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
        .with_ansi(log_colours())
        .init();
    // The configuration file's keys become their flags' variables before
    // the flags are read (one thread still: nothing else reads the
    // environment yet).
    let args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    if let Some(path) = throng::config::named(&args) {
        match throng::config::variables(&path) {
            Ok(vars) => vars.into_iter().for_each(|(k, v)| std::env::set_var(k, v)),
            Err(e) => {
                eprintln!("error: {e:#}");
                return std::process::ExitCode::FAILURE;
            }
        }
    }
    let cli = throng::cli::Cli::parse();
    // The bench's child servers are `serve` plus the comparison designs:
    // they run with the same memory settings, so the bench measures what
    // `serve` does.
    if matches!(
        cli.command,
        throng::cli::Command::Serve(_) | throng::cli::Command::BenchServer(_)
    ) {
        no_transparent_huge_pages();
        purge_freed_memory_promptly();
        one_c_malloc_arena();
    }
    throng::cli::run(cli)
}

/// Colours in the log only on a terminal: a log written to a file or a pipe
/// stays plain text (no escape sequences), and `NO_COLOR` (set, not empty)
/// turns them off everywhere (no-color.org).
fn log_colours() -> bool {
    use std::io::IsTerminal;
    let no_color = std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty());
    std::io::stderr().is_terminal() && !no_color
}

/// Turns transparent huge pages off for the server process (`prctl`, this
/// process and its children only; the machine's setting is untouched).
///
/// Why: mimalloc takes memory in large aligned regions (4 MiB segments;
/// mimalloc v3 even marks its arena `MADV_HUGEPAGE`), so where the kernel
/// backs them with huge pages every 2 MiB that holds one live block is
/// resident whole, and mimalloc's purges of freed 64 KiB pages inside it
/// return nothing. Under the voting bench (400 connections, mimalloc v3)
/// that was ~20 MiB of the server's resident memory (peak 99 -> 79 MiB),
/// with no measurable change in its throughput: requests touch a few small
/// blocks each, not megabytes, so TLB reach is not what bounds them.
fn no_transparent_huge_pages() {
    // SAFETY: prctl with integer arguments; failure (an old kernel) only
    // leaves THP as the system set it.
    let rc = unsafe { libc::prctl(libc::PR_SET_THP_DISABLE, 1, 0, 0, 0) };
    if rc != 0 {
        tracing::debug!(error = %std::io::Error::last_os_error(), "PR_SET_THP_DISABLE failed");
    }
}

/// Has the C library's `malloc`, which SQLite allocates through (its page
/// caches, statements, sorts), keep one arena instead of one per thread
/// that calls it (glibc's default: up to 8 per core).
///
/// Why: SQLite runs on the async workers (reads), the writer, the
/// checkpointer and blocking threads (scans), and each arena keeps what its
/// threads freed for their next allocations, so the same few megabytes of
/// SQLite's memory were held resident several times over. Each thread's
/// cache of small blocks (tcache) still serves most calls without the
/// arena's lock. `throng bench voting` (full table, 3 runs, SQLite) peaked
/// at 63 MiB with one arena against 65 without, in back-to-back runs of the
/// same build, rates within the runs' noise. `MALLOC_ARENA_MAX` still wins
/// when set.
fn one_c_malloc_arena() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    if std::env::var_os("MALLOC_ARENA_MAX").is_none() {
        // SAFETY: mallopt takes plain integers; it is called before the
        // server starts its threads.
        unsafe { libc::mallopt(libc::M_ARENA_MAX, 1) };
    }
}

/// Has mimalloc return freed pages to the OS as soon as they empty (its
/// default is 10 ms).
///
/// Why: under load the server frees as fast as it allocates (request and
/// response buffers of hundreds of connections, write commands, the voting
/// mixer's rounds), so pages empty and fill again all the time, and a delay
/// keeps that churn resident. Live heap is small: heaptrack under the
/// voting workflow (400 connections) peaked at 29 MB, 5 MB of it the roll,
/// while the allocator held 69 MiB resident. Peak resident memory of the
/// bench's child server (`throng bench`, `--only` the workload, one run
/// each, alternated; figures in MiB):
///
/// | allocator, purge delay | voting workflow (400) | booking try-register (16-256) |
/// |---|---|---|
/// | mimalloc v3, 10 ms | 76, 80, 81 | 72, 72 |
/// | mimalloc v3, 0 | 77, 78, 76 | |
/// | mimalloc v2, 10 ms | 73, 78, 76, 75, 75 | |
/// | mimalloc v2, 0 | 61, 62, 60, 64, 63 | 63, 63 |
///
/// (Those child servers still had transparent huge pages on. With them off
/// as well, as now: v2 at 10 ms 64 and 62 MiB, at 2 ms 58 and 60, at 0 52
/// and 53, voting workflow.) The price is an `madvise` per emptied page and
/// the page faults that refill it: ~6% of the server's CPU under booking's
/// try-register at 64 connections (perf), which the rates do not show
/// beyond the runs' noise: voting workflow 0.52, 0.53,
/// 0.55, 0.45, 0.46 of `/health` with v2 at 0 against 0.53, 0.48, 0.50
/// with v3 at 10 ms; booking try-register 24.4k/34.3k/35.5k and
/// 23.6k/44.8k/49.6k req/s at 16/64/256 connections against 24.6k/37.8k/
/// 38.3k and 25.3k/47.8k/39.6k. (v2 is the `v2` feature of the `mimalloc`
/// crate.) `MIMALLOC_PURGE_DELAY` still wins when set.
fn purge_freed_memory_promptly() {
    extern "C" {
        fn mi_option_set(option: std::os::raw::c_int, value: std::os::raw::c_long);
    }
    /// `mi_option_purge_delay` in mimalloc v2's `mimalloc.h` (the same
    /// index in v3).
    const MI_OPTION_PURGE_DELAY: std::os::raw::c_int = 15;
    if std::env::var_os("MIMALLOC_PURGE_DELAY").is_none() {
        // SAFETY: mimalloc's option setter takes plain integers and may be
        // called at any time; the option is read on every purge decision.
        unsafe { mi_option_set(MI_OPTION_PURGE_DELAY, 0) };
    }
}
