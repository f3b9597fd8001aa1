//! A bounded cache of open sealed-file descriptors, shared by every region of a DataNode.
//!
//! A sealed file is opened when a read needs it and stays open while it is among the
//! `open_files_max` most recently used; the least recently used is closed to make room. A reader
//! holds its descriptor by `Arc`, so a descriptor evicted mid-read is closed when that read ends:
//! the number open exceeds the bound by at most the reads in progress.
//!
//! Without the bound every sealed file kept a descriptor for the life of the process (REVIEW H4):
//! a node flushing every few minutes ran out of descriptors within a day, and then flushes, WAL
//! segment rolls and `accept()` failed.

use std::collections::{BTreeMap, HashMap};
use std::fs::File;
use std::io;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use parking_lot::Mutex;

/// Default bound on open sealed files per DataNode (`dn_sealed_open_files_max`).
pub const OPEN_FILES_MAX_DEFAULT: usize = 256;

/// Identity of one sealed file in a [`FileCache`]: unique for the life of the process.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct FileId(u64);

impl FileId {
    /// A new identity, never handed out before.
    pub fn next() -> FileId {
        static NEXT: AtomicU64 = AtomicU64::new(1);
        FileId(NEXT.fetch_add(1, Ordering::Relaxed))
    }
}

/// The bounded descriptor cache.
#[derive(Debug)]
pub struct FileCache {
    open_files_max: usize,
    inner: Mutex<Lru>,
    opens: AtomicU64,
}

#[derive(Debug, Default)]
struct Lru {
    tick: u64,
    by_id: HashMap<FileId, (Arc<File>, u64)>,
    by_tick: BTreeMap<u64, FileId>,
}

impl FileCache {
    /// A cache keeping at most `open_files_max` descriptors open (at least 1).
    pub fn new(open_files_max: usize) -> Arc<FileCache> {
        Arc::new(FileCache {
            open_files_max: open_files_max.max(1),
            inner: Mutex::new(Lru::default()),
            opens: AtomicU64::new(0),
        })
    }

    /// The descriptor of file `id` at `path`, opened if it is not cached.
    pub fn get(&self, id: FileId, path: &Path) -> io::Result<Arc<File>> {
        if let Some(file) = self.inner.lock().touch(id) {
            return Ok(file);
        }
        // Opened outside the lock: a slow open must not stall every other read. Two readers
        // racing for the same file both open it; the second insert replaces the first.
        let file = Arc::new(File::open(path)?);
        self.opens.fetch_add(1, Ordering::Relaxed);
        let mut lru = self.inner.lock();
        lru.insert(id, file.clone());
        while lru.by_id.len() > self.open_files_max {
            lru.evict_oldest();
        }
        debug_assert_eq!(lru.by_id.len(), lru.by_tick.len());
        Ok(file)
    }

    /// Closes file `id`'s descriptor if it is cached (the file is gone or no longer live).
    pub fn forget(&self, id: FileId) {
        let mut lru = self.inner.lock();
        if let Some((_, tick)) = lru.by_id.remove(&id) {
            lru.by_tick.remove(&tick);
        }
    }

    /// Descriptors the cache holds open now.
    pub fn open_count(&self) -> usize {
        self.inner.lock().by_id.len()
    }

    /// The bound.
    pub fn open_files_max(&self) -> usize {
        self.open_files_max
    }

    /// Files opened since the cache was made (a miss rate, for metrics).
    pub fn opens_total(&self) -> u64 {
        self.opens.load(Ordering::Relaxed)
    }
}

impl Lru {
    fn touch(&mut self, id: FileId) -> Option<Arc<File>> {
        self.tick += 1;
        let tick = self.tick;
        let (file, old) = self.by_id.get_mut(&id)?;
        self.by_tick.remove(old);
        *old = tick;
        self.by_tick.insert(tick, id);
        Some(file.clone())
    }

    fn insert(&mut self, id: FileId, file: Arc<File>) {
        self.tick += 1;
        if let Some((_, old)) = self.by_id.insert(id, (file, self.tick)) {
            self.by_tick.remove(&old);
        }
        self.by_tick.insert(self.tick, id);
    }

    fn evict_oldest(&mut self) {
        let (_, id) = self
            .by_tick
            .pop_first()
            .expect("an over-full cache has an oldest entry");
        self.by_id.remove(&id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_at_most_the_bound_and_evicts_the_least_recently_used() {
        let dir = tempfile::tempdir().unwrap();
        let cache = FileCache::new(2);
        let ids: Vec<_> = (0..3).map(|_| FileId::next()).collect();
        let paths: Vec<_> = (0..3).map(|i| dir.path().join(format!("{i}"))).collect();
        for p in &paths {
            std::fs::write(p, b"x").unwrap();
        }
        cache.get(ids[0], &paths[0]).unwrap();
        cache.get(ids[1], &paths[1]).unwrap();
        cache.get(ids[0], &paths[0]).unwrap(); // 0 is now the most recent
        cache.get(ids[2], &paths[2]).unwrap(); // evicts 1
        assert_eq!(cache.open_count(), 2);
        assert_eq!(cache.opens_total(), 3);
        cache.get(ids[0], &paths[0]).unwrap();
        assert_eq!(cache.opens_total(), 3, "0 stayed cached");
        cache.get(ids[1], &paths[1]).unwrap();
        assert_eq!(cache.opens_total(), 4, "1 had been evicted");
        cache.forget(ids[1]);
        assert_eq!(cache.open_count(), 1);
    }

    #[test]
    fn a_missing_file_is_an_error_and_caches_nothing() {
        let cache = FileCache::new(4);
        assert!(cache
            .get(FileId::next(), Path::new("/nonexistent/x"))
            .is_err());
        assert_eq!(cache.open_count(), 0);
    }
}
