//! Files only this user may read: the data directory is created 0700 and
//! the database and secrets 0600, and what already exists with wider modes
//! is reported (the caller refuses or warns). A leaf: the store and the
//! secrets both use it.

use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::Path;

/// Creates `dir` (and missing parents) with mode 0700; an existing one is
/// kept as it is (see `readable_by_others`).
pub fn create_dir(dir: &Path) -> std::io::Result<()> {
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
}

/// Creates `path` empty with mode 0600 unless it exists. SQLite then gives
/// its `-wal` and `-shm` files the database's mode.
pub fn create_file(path: &Path) -> std::io::Result<()> {
    match std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
    {
        Ok(_) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
        Err(e) => Err(e),
    }
}

/// `Some(description)` when the group or others may read, write or enter
/// `path`, or another user owns it: what to tell the operator.
pub fn exposed(path: &Path) -> Option<String> {
    let meta = std::fs::metadata(path).ok()?;
    let mode = meta.permissions().mode() & 0o777;
    // SAFETY: geteuid has no preconditions.
    let me = unsafe { libc::geteuid() };
    if mode & 0o077 != 0 {
        return Some(format!(
            "{} has mode {mode:04o}: other users may read it (chmod {} {})",
            path.display(),
            if meta.is_dir() { "700" } else { "600" },
            path.display()
        ));
    }
    if meta.uid() != me && me != 0 {
        return Some(format!(
            "{} belongs to user {}, not to this one ({me}): that user can replace it",
            path.display(),
            meta.uid()
        ));
    }
    None
}
