//! `--testdata-csv`: the Artillery payload drawn from the stored snapshots.

use std::path::Path;

use super::super::store::CommentsStore;
use super::Rng;

/// Writes the Artillery payload with the write-up's columns (SnapShotId,
/// CommentType, CourseId, UserId, Skip, Size, SkipThread, SizeThread) and
/// its distributions (skip 0-3, size 2-10, skipThread 0 or 1 (0 in 8 of 10),
/// sizeThread 2-10) for random stored snapshots. No header row: Artillery
/// reads every line as data unless told to skip one.
pub async fn write_testdata_csv(
    storage: &CommentsStore,
    path: &Path,
    rows: usize,
    seed: u64,
) -> anyhow::Result<usize> {
    let courses = storage.course_count().await?;
    if courses == 0 {
        anyhow::bail!("no comments data to draw testData.csv from; seed first");
    }
    let mut r = Rng::new(seed, 0x7E57_DA7A);
    let picks: Vec<(i64, u64)> = (0..rows)
        .map(|_| (r.range(1, courses), r.next_u64()))
        .collect();
    let users = storage.snapshot_users(picks.clone()).await?;
    let mut text = String::with_capacity(rows * 48);
    let mut written = 0;
    for ((course, _), user) in picks.iter().zip(users) {
        let Some(user) = user else { continue };
        written += 1;
        let skip_thread = if r.range(0, 9) < 8 { 0 } else { r.range(0, 1) };
        text.push_str(&format!(
            "{written},Course,{course},{user},{},{},{skip_thread},{}\n",
            r.range(0, 3),
            r.range(2, 10),
            r.range(2, 10)
        ));
    }
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)?;
    }
    std::fs::write(path, text)
        .map_err(|e| anyhow::anyhow!("cannot write {}: {e}", path.display()))?;
    Ok(written)
}
