//! Gives back the pages of the binary the server no longer needs once it
//! serves. One binary holds the server, the command line, seeding, the
//! benches and the load generator: 28 MiB of machine code. On Linux the
//! kernel maps a program's file in large pieces as it runs, so `throng
//! --version` alone is ~18 MiB resident, and a serving process held 24-27
//! MiB of it, about a third of its resident memory, most of it code that
//! only ran at start or never runs while serving.
//!
//! Once the server listens, the binary's read-only mappings are advised
//! `MADV_PAGEOUT` (Linux 5.4+): the kernel reclaims their pages as it would
//! under memory pressure, and a page the server runs again comes back on
//! its first use (from the page cache, or from disk if it was dropped).
//! Pages the process wrote (relocated data) are never dropped: without
//! swap the kernel keeps them, with swap they are swapped out and back.
//! Nor are pages another process maps too (one running the same file): the
//! bench therefore runs its servers from a copy (`throng-bench`'s `server_binary.rs`).
//! Nor the pages of a file not yet written back (a binary copied into
//! place just before it started): the binary is written back first, which
//! costs nothing when it is clean. A server started at once from a fresh
//! copy of its binary (an election's 5M-voter store, twice each,
//! alternated) held 10.3-11.0 MiB of the binary resident 8 s later,
//! against 13.6-15.6 without.
//! Measured with `throng bench voting` (the workflow, 400 connections, two
//! runs each, one build with the advice and one without, back to back):
//! peak 69 / 65 MiB against 75 / 71, the binary's part at the end 20 MiB
//! against 27, the workflow at 0.44 against 0.41 of `/health`.
//!
//! The same mappings are then advised `MADV_RANDOM`: a page that comes back
//! is read alone, where the kernel would read ahead around it (code the
//! server does not run). The voting bench's workflow at 400 connections,
//! alternated, one run each: peak 60 / 59 MiB against 61 / 61, the
//! binary's part at the end 20 MiB against 21, the workflow at 0.38 / 0.49
//! of `/health` against 0.41 / 0.33 (within the machine's swings).

/// Advises the kernel to reclaim the pages of this process's binary that
/// are mapped read-only, and to bring them back one at a time; returns how
/// many mappings it advised. Does nothing where `/proc/self/maps` cannot be
/// read.
pub fn page_out() -> usize {
    let Ok(exe) = std::env::current_exe() else {
        return 0;
    };
    // The kernel reclaims no dirty page of a file this way: a binary just
    // copied into place (and not yet written back) would keep every page
    // it ever mapped. Written back first; nothing to do for a clean file.
    if let Err(e) = std::fs::File::open(&exe).and_then(|f| f.sync_data()) {
        tracing::debug!("cannot write back {}: {e}", exe.display());
    }
    let exe = exe.to_string_lossy().into_owned();
    let Ok(maps) = std::fs::read_to_string("/proc/self/maps") else {
        return 0;
    };
    read_only_mappings_of(&maps, &exe)
        .into_iter()
        .filter(|&(start, end)| {
            // SAFETY: the range is one of this process's own mappings, as
            // the kernel listed it; MADV_PAGEOUT changes no contents (the
            // pages come back as they were), it only frees frames;
            // MADV_RANDOM only changes how much is read per fault.
            unsafe {
                let addr = start as *mut libc::c_void;
                libc::madvise(addr, end - start, libc::MADV_PAGEOUT) == 0
                    && libc::madvise(addr, end - start, libc::MADV_RANDOM) == 0
            }
        })
        .count()
}

/// The address ranges of `path`'s mappings in `maps` (`/proc/self/maps`
/// text) that are not writable.
fn read_only_mappings_of(maps: &str, path: &str) -> Vec<(usize, usize)> {
    maps.lines()
        .filter_map(|line| {
            let mut fields = line.split_whitespace();
            let range = fields.next()?;
            let perms = fields.next()?;
            let mapped = fields.nth(3)?;
            if mapped != path || perms.contains('w') {
                return None;
            }
            let (start, end) = range.split_once('-')?;
            Some((
                usize::from_str_radix(start, 16).ok()?,
                usize::from_str_radix(end, 16).ok()?,
            ))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_binarys_mappings_that_are_not_writable() {
        let maps = "\
55bab28ef000-55bab326f000 r--p 00000000 fd:00 123 /opt/throng
55bab326f000-55bab4d72000 r-xp 00980000 fd:00 123 /opt/throng
55bab4f49000-55bab4f60000 rw-p 02700000 fd:00 123 /opt/throng
7fa567bb3000-7fa567bfe000 r--s 00000000 fd:00 456 /data/throng.db
7fa567c00000-7fa567c10000 r-xp 00000000 fd:00 789 /opt/throng-old
7fa567d00000-7fa567d10000 rw-p 00000000 00:00 0
";
        assert_eq!(
            read_only_mappings_of(maps, "/opt/throng"),
            vec![
                (0x55bab28ef000, 0x55bab326f000),
                (0x55bab326f000, 0x55bab4d72000)
            ]
        );
    }

    #[test]
    fn paging_out_leaves_the_code_running() {
        // The test binary's own code and read-only data are advised out,
        // then run again.
        let advised = page_out();
        assert!(advised >= 1, "the test binary has read-only mappings");
        assert_eq!(format!("{}", 6 * 7), "42");
        assert!(page_out() >= 1);
    }
}
