//! The snapshots a leader builds (`regions/<id>/snapshots/<index>/`, hard links of the
//! region's sealed files), how fetches read them, and how they go once unused.
//!
//! A built snapshot's links keep the bytes of every file it names, also once the region
//! compacted it, expired it (TTL) or deleted its data (REVIEW-2026-12-05 N10). So a snapshot is
//! kept only while it may be used: when consensus released the region's generated snapshot
//! (none sent to a replica for `dn_snapshot_keep_ms`, `consensus::RaftNode::release_idle_snapshot`)
//! and no replica fetched a chunk of it for as long, [`retire_built`] renames its directory out
//! of the way on the raft thread (no build runs then, so none renames or prunes meanwhile), and
//! [`remove_retired`] deletes it off that thread. A replica that needs one later gets a new one.

use std::fs::{self, File};
use std::io::{self, Read};
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};

use engine::{DataRegion, StorageError};

use super::{io_error, is_plain_file_name, Descriptor, SnapshotFile};

/// Where a region keeps the snapshots it built (one directory per snapshot index).
const BUILT_DIR: &str = "snapshots";
/// Built snapshots kept per region: the newest, and the one before for a transfer under way.
const BUILT_KEPT: usize = 2;
/// Prefix of a released snapshot's directory, deleted by [`remove_retired`].
const RETIRED_PREFIX: &str = "released-";

/// Builds a snapshot of `region` (region id `region_id`) served by node `source`: the index its
/// content reflects and its descriptor. Runs on a snapshot job's thread: the flush and the CRC
/// pass over the files take long, the links do not.
pub fn build(
    region: &DataRegion,
    source: u64,
    region_id: u64,
) -> Result<(u64, Vec<u8>), StorageError> {
    static BUILDS: AtomicU64 = AtomicU64::new(0);
    let built = region.dir().join(BUILT_DIR);
    let building = built.join(format!(
        "building-{}-{}",
        std::process::id(),
        BUILDS.fetch_add(1, Ordering::Relaxed)
    ));
    let result = (|| {
        let manifest = region.checkpoint_into(&building)?;
        let mut files = Vec::with_capacity(manifest.files.len());
        for entry in &manifest.files {
            let name = entry.file_name();
            let path = building.join(&name);
            let (len, crc32) = file_crc(&path).map_err(|e| io_error(&path, e))?;
            files.push(SnapshotFile { name, len, crc32 });
        }
        let index = manifest.checkpoint;
        let dest = built.join(index.to_string());
        if dest.exists() {
            // Built again at the same index (the log was compacted meanwhile): the newer set of
            // files replaces it; a download of the older one fails and takes the new offer.
            fs::remove_dir_all(&dest).map_err(|e| io_error(&dest, e))?;
        }
        fs::rename(&building, &dest).map_err(|e| io_error(&dest, e))?;
        common::durable::sync_dir(&built).map_err(|e| io_error(&built, e))?;
        prune_built(&built, BUILT_KEPT);
        let descriptor = Descriptor {
            source,
            region: region_id,
            manifest,
            files,
        };
        Ok((index, descriptor.encode()))
    })();
    if result.is_err() {
        // The build's own error is what the caller needs; a leftover directory is only logged
        // (an open of the region removes every built snapshot).
        if let Err(e) = fs::remove_dir_all(&building) {
            if e.kind() != io::ErrorKind::NotFound {
                tracing::warn!(dir = %building.display(), "removing a failed snapshot build: {e}");
            }
        }
    }
    result
}

/// Removes every snapshot `region_dir` built (at start-up: a restarted leader offers none of
/// them again, it builds anew when asked).
pub fn remove_built(region_dir: &Path) -> io::Result<()> {
    match fs::remove_dir_all(region_dir.join(BUILT_DIR)) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => Err(e),
        _ => Ok(()),
    }
}

/// Keeps the `kept` newest snapshot directories in `built`.
fn prune_built(built: &Path, kept: usize) {
    let Ok(entries) = fs::read_dir(built) else {
        return;
    };
    let mut indexes: Vec<u64> = entries
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
        .collect();
    indexes.sort_unstable_by(|a, b| b.cmp(a));
    for index in indexes.into_iter().skip(kept) {
        let dir = built.join(index.to_string());
        if let Err(e) = fs::remove_dir_all(&dir) {
            tracing::warn!(dir = %dir.display(), "removing an old snapshot: {e}");
        }
    }
}

/// Length and CRC32 of a file.
pub(super) fn file_crc(path: &Path) -> io::Result<(u64, u32)> {
    let mut file = File::open(path)?;
    let mut hasher = crc32fast::Hasher::new();
    let mut buffer = vec![0u8; 1 << 20];
    let mut len = 0u64;
    loop {
        let n = file.read(&mut buffer)?;
        if n == 0 {
            return Ok((len, hasher.finalize()));
        }
        hasher.update(&buffer[..n]);
        len += n as u64;
    }
}

/// Most files one `FetchSnapshot` may name.
const FETCH_FILES_MAX: usize = 1 << 20;

/// A built snapshot's file, opened to serve a fetch, with its length, or why not.
pub(super) fn open_built(
    region_dir: &Path,
    index: u64,
    name: &str,
) -> Result<(File, u64), tonic::Status> {
    if !is_plain_file_name(name) {
        return Err(tonic::Status::invalid_argument(format!(
            "snapshot file name {name:?}"
        )));
    }
    let path = region_dir
        .join(BUILT_DIR)
        .join(index.to_string())
        .join(name);
    let file = File::open(&path).map_err(|e| match e.kind() {
        io::ErrorKind::NotFound => tonic::Status::not_found(format!(
            "no snapshot file {name} at index {index} (replaced by a newer one, or the node restarted)"
        )),
        _ => tonic::Status::internal(format!("{}: {e}", path.display())),
    })?;
    let len = file
        .metadata()
        .map_err(|e| tonic::Status::internal(format!("{}: {e}", path.display())))?
        .len();
    Ok((file, len))
}

/// Checks a fetch before its stream starts: the first file it names, opened, with its length.
pub fn first_file(
    region_dir: &Path,
    req: &proto::FetchSnapshotReq,
) -> Result<(File, u64), tonic::Status> {
    if req.files.is_empty() || req.files.len() > FETCH_FILES_MAX {
        return Err(tonic::Status::invalid_argument(format!(
            "a fetch names 1 to {FETCH_FILES_MAX} files, not {}",
            req.files.len()
        )));
    }
    let (file, len) = open_built(region_dir, req.snapshot_index, &req.files[0])?;
    if req.offset > len {
        return Err(tonic::Status::out_of_range(format!(
            "offset {} past the end of {} ({len} bytes)",
            req.offset, req.files[0]
        )));
    }
    Ok((file, len))
}

/// Reads `len` bytes of `file` at `offset`.
pub fn read_chunk(file: &File, offset: u64, len: usize) -> io::Result<Vec<u8>> {
    let mut data = vec![0u8; len];
    file.read_exact_at(&mut data, offset)?;
    Ok(data)
}

/// The indexes of the snapshots kept in `built` (not being built, not retired).
fn built_indexes(built: &Path) -> io::Result<Vec<u64>> {
    let entries = match fs::read_dir(built) {
        Ok(entries) => entries,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(e),
    };
    let mut indexes = Vec::new();
    for entry in entries {
        if let Some(index) = entry?.file_name().to_str().and_then(|n| n.parse().ok()) {
            indexes.push(index);
        }
    }
    indexes.sort_unstable();
    Ok(indexes)
}

/// Renames every snapshot `region_dir` keeps built out of the names fetches and builds use
/// (one rename each); [`remove_retired`] deletes them. Called on the raft thread once
/// consensus released the region's snapshot and builds none. Answers how many.
pub fn retire_built(region_dir: &Path) -> io::Result<usize> {
    static RETIRED: AtomicU64 = AtomicU64::new(0);
    let built = region_dir.join(BUILT_DIR);
    let indexes = built_indexes(&built)?;
    for index in &indexes {
        let to = built.join(format!(
            "{RETIRED_PREFIX}{index}-{}",
            RETIRED.fetch_add(1, Ordering::Relaxed)
        ));
        fs::rename(built.join(index.to_string()), to)?;
    }
    Ok(indexes.len())
}

/// Deletes the snapshots of `region_dir` that [`retire_built`] retired: the last link of a file
/// the region compacted or deleted since goes, and its space with it.
pub fn remove_retired(region_dir: &Path) -> io::Result<()> {
    let built = region_dir.join(BUILT_DIR);
    let entries = match fs::read_dir(&built) {
        Ok(entries) => entries,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(e),
    };
    for entry in entries {
        let entry = entry?;
        if entry
            .file_name()
            .to_string_lossy()
            .starts_with(RETIRED_PREFIX)
        {
            fs::remove_dir_all(entry.path())?;
        }
    }
    Ok(())
}

/// What the snapshots `region_dir` keeps built hold on disk.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BuiltUsage {
    /// Snapshots kept.
    pub snapshots: usize,
    /// Bytes of their files.
    pub bytes: u64,
    /// Of those, bytes of files only a snapshot still links (the region compacted or deleted
    /// them): space the snapshots alone keep allocated.
    pub pinned_bytes: u64,
}

/// [`BuiltUsage`] of `region_dir` (a file linked by two snapshots counts once per link).
pub fn built_usage(region_dir: &Path) -> io::Result<BuiltUsage> {
    let built = region_dir.join(BUILT_DIR);
    let mut usage = BuiltUsage::default();
    for index in built_indexes(&built)? {
        usage.snapshots += 1;
        for entry in fs::read_dir(built.join(index.to_string()))? {
            let metadata = entry?.metadata()?;
            usage.bytes += metadata.len();
            if metadata.nlink() == 1 {
                usage.pinned_bytes += metadata.len();
            }
        }
    }
    Ok(usage)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_newest_built_snapshots_are_kept() {
        let dir = tempfile::tempdir().unwrap();
        for index in [5u64, 17, 9, 120] {
            fs::create_dir_all(dir.path().join(index.to_string())).unwrap();
        }
        prune_built(dir.path(), 2);
        let mut left: Vec<String> = fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        left.sort();
        assert_eq!(left, ["120", "17"]);
    }

    #[test]
    fn released_snapshots_are_renamed_then_removed_and_their_bytes_counted() {
        let dir = tempfile::tempdir().unwrap();
        let built = dir.path().join(BUILT_DIR);
        for index in [7u64, 9] {
            fs::create_dir_all(built.join(index.to_string())).unwrap();
            fs::write(built.join(index.to_string()).join("a.fps"), [0u8; 100]).unwrap();
        }
        // Linked into the region too: not pinned by the snapshot alone.
        fs::hard_link(built.join("9").join("a.fps"), dir.path().join("a.fps")).unwrap();
        fs::create_dir_all(built.join("building-1-2")).unwrap();
        let usage = built_usage(dir.path()).unwrap();
        assert_eq!(
            usage,
            BuiltUsage {
                snapshots: 2,
                bytes: 200,
                pinned_bytes: 100
            }
        );
        assert_eq!(retire_built(dir.path()).unwrap(), 2);
        assert_eq!(built_usage(dir.path()).unwrap(), BuiltUsage::default());
        assert!(!built.join("9").exists(), "no fetch finds it any more");
        remove_retired(dir.path()).unwrap();
        let mut left: Vec<String> = fs::read_dir(&built)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        left.sort();
        assert_eq!(left, ["building-1-2"], "a build under way is left alone");
        assert!(dir.path().join("a.fps").exists());
        assert_eq!(
            retire_built(tempfile::tempdir().unwrap().path()).unwrap(),
            0
        );
    }
}
