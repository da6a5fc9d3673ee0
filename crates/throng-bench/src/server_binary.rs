//! The child servers run from a private copy of this binary.
//!
//! One binary is the server and the load generator. Run from the same file,
//! the bench's own process (the generator, the harness) and its child server
//! map the same page-cache pages, and a code page either touched stays in
//! both: the kernel counts it in each process's resident memory, and the
//! server's page-out once it listens (`startup_code`) leaves it alone, since
//! another process maps it. Under the voting bench 15.9 of the server's
//! 19.2 MiB of resident code were such shared pages. A deployed server is
//! the only process that maps its binary; from a copy (a file of its own,
//! written through to the disk) the child server's memory is what that
//! server's would be.

use std::path::{Path, PathBuf};

/// A copy of the running binary in a temporary directory, removed on drop.
pub struct ServerBinary {
    _dir: tempfile::TempDir,
    path: PathBuf,
}

impl ServerBinary {
    /// Copies the running binary (`std::env::current_exe`) and flushes the
    /// copy to the disk, so its pages are clean page cache that the server
    /// can give back, as an installed binary's are.
    pub fn copy_current() -> anyhow::Result<ServerBinary> {
        let exe = std::env::current_exe()?;
        let dir = tempfile::Builder::new()
            .prefix("throng-bench-server-")
            .tempdir()?;
        let name = exe.file_name().unwrap_or_else(|| "throng".as_ref());
        let path = dir.path().join(name);
        std::fs::copy(&exe, &path).map_err(|e| {
            anyhow::anyhow!(
                "cannot copy the server binary {} to {}: {e}",
                exe.display(),
                path.display()
            )
        })?;
        std::fs::File::open(&path)?.sync_all()?;
        Ok(ServerBinary { _dir: dir, path })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_copy_is_a_file_of_its_own_that_runs() {
        let copy = ServerBinary::copy_current().unwrap();
        let exe = std::env::current_exe().unwrap();
        use std::os::unix::fs::MetadataExt;
        let (a, b) = (
            std::fs::metadata(&exe).unwrap(),
            std::fs::metadata(copy.path()).unwrap(),
        );
        assert_ne!(a.ino(), b.ino(), "a copy, not a link to the same file");
        assert_eq!(a.len(), b.len());
        assert!(b.mode() & 0o111 != 0, "executable");
        let dir = copy.path().parent().unwrap().to_path_buf();
        drop(copy);
        assert!(!dir.exists(), "removed with the copy");
    }
}
