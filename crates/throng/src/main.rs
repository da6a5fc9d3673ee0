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
    let cli = throng::cli::Cli::parse();
    if matches!(cli.command, throng::cli::Command::Serve(_)) {
        no_transparent_huge_pages();
        purge_freed_memory_promptly();
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
/// Why: mimalloc (v3) reserves its arena with `madvise(MADV_HUGEPAGE)`, so
/// where the kernel allows THP (`madvise` or `always`) every 2 MiB of the
/// arena that holds one live block is resident whole, and mimalloc's purges
/// of freed 64 KiB pages inside it return nothing. Under the voting bench
/// (400 connections) that was ~20 MiB of the server's resident memory (peak
/// 99 -> 79 MiB), with no measurable change in its throughput: requests
/// touch a few small blocks each, not megabytes, so TLB reach is not what
/// bounds them. The same effect as `MIMALLOC_ALLOW_THP=0`,
/// which is read before `main` and so cannot be set from here.
fn no_transparent_huge_pages() {
    // SAFETY: prctl with integer arguments; failure (an old kernel) only
    // leaves THP as the system set it.
    let rc = unsafe { libc::prctl(libc::PR_SET_THP_DISABLE, 1, 0, 0, 0) };
    if rc != 0 {
        tracing::debug!(error = %std::io::Error::last_os_error(), "PR_SET_THP_DISABLE failed");
    }
}

/// Has mimalloc return freed pages to the OS 10 ms after they empty, not
/// mimalloc v3's default 1 s (10 ms was v2's default).
///
/// Why: under load the server frees as fast as it allocates (request and
/// response buffers of 400 connections, write commands, the mixer's rounds),
/// and with a 1 s delay a second's worth of emptied pages stayed resident:
/// measured under the voting bench's POST vote (400 connections), peak
/// resident memory 82 MiB at 1 s, 54 MiB at 10 ms, 50 MiB at 0, at the same
/// throughput (33.3k, 35.8k, 31.7k req/s, one run each). Not 0: every empty
/// page would cost an `madvise` at once. `MIMALLOC_PURGE_DELAY` still wins
/// when set.
fn purge_freed_memory_promptly() {
    extern "C" {
        fn mi_option_set(option: std::os::raw::c_int, value: std::os::raw::c_long);
    }
    /// `mi_option_purge_delay` in mimalloc v3's `mimalloc.h` (libmimalloc-sys
    /// 0.1.49 builds v3 unless its `v2` feature is on).
    const MI_OPTION_PURGE_DELAY: std::os::raw::c_int = 15;
    if std::env::var_os("MIMALLOC_PURGE_DELAY").is_none() {
        // SAFETY: mimalloc's option setter takes plain integers and may be
        // called at any time; the option is read on every purge decision.
        unsafe { mi_option_set(MI_OPTION_PURGE_DELAY, 10) };
    }
}
