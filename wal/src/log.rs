//! The log: appends, durability, rolling, truncation, opening.

use std::fs::{self, File, OpenOptions};
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};

use crate::appender::{DirectAppender, ENCODE_BUFFER_BYTES_KEPT};
use crate::direct::AlignedBuf;
use crate::error::{Error, Result};
use crate::format::{self, Version, SEGMENT_HEADER_BYTES};
use crate::iter::WalIter;
use crate::options::{Durability, WalOptions};
use crate::segment::{self, SeekPoint, Segment};
use crate::spare::{self, Spares};
use crate::sys;

/// Payloads up to this size are copied next to their header so that a batch of small records is
/// one contiguous buffer; larger ones are handed to pwritev(2) in place, without a copy.
const COPY_PAYLOAD_BYTES_MAX: usize = 1024;
/// Batches that need at most this many iovecs build them on the stack.
const STACK_IOVECS: usize = 64;

/// Counters since the log was opened.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct WalStats {
    /// Successful `append` and `append_batch` calls.
    pub appends: u64,
    /// Records appended.
    pub records: u64,
    /// Bytes written by appends: record headers plus payloads.
    pub bytes_written: u64,
    /// fdatasync and fsync calls made by the log, of segments and of the directory.
    pub fsyncs: u64,
    /// Segment rolls that took a spare prepared in the background.
    pub rolls_into_spares: u64,
    /// Whether a prepared spare is waiting for the next roll.
    pub spare_ready: bool,
}

#[derive(Default)]
struct AtomicStats {
    appends: AtomicU64,
    records: AtomicU64,
    bytes_written: AtomicU64,
    fsyncs: AtomicU64,
    rolls_into_spares: AtomicU64,
}

/// A segmented append-only log in one directory. `Send + Sync`; every method takes `&self`.
///
/// Records get consecutive indexes starting at 1. Appends go to the last ("active") segment;
/// once it would pass `segment_bytes` it is fdatasync'ed, sealed, and a new preallocated segment
/// starts. See the crate documentation for the durability modes and the recovery rules.
pub struct Wal {
    inner: Arc<Inner>,
    async_syncer: Option<JoinHandle<()>>,
}

struct Inner {
    options: WalOptions,
    /// The log directory, kept open to fsync it after names change.
    dir_file: File,
    /// Holds the flock that keeps a second `Wal` out of the directory.
    _lock_file: File,
    /// The append path. Held while encoding and writing, never across an fsync of data that
    /// appenders wait for.
    writer: Mutex<Writer>,
    /// What readers and the syncer need to see of the writer, updated after every write.
    published: Mutex<Published>,
    /// Serialises data fsyncs, so that after one fails nobody else fsyncs the file: a second
    /// fsync could report success for pages the kernel dropped with the first error.
    fsync_lock: Mutex<()>,
    sync_state: Mutex<SyncState>,
    /// Appenders waiting for their bytes to become durable.
    durable_cv: Condvar,
    /// The group-commit syncer waiting for in-flight appenders to finish writing.
    leader_cv: Condvar,
    /// Sticky failure flag; see [`Error::Poisoned`].
    poisoned: AtomicBool,
    /// Group-commit appenders that have entered `append` and not yet finished writing.
    in_flight: AtomicUsize,
    stats: AtomicStats,
    /// Tells the background syncer of `Durability::Async` to stop.
    stop_async: Mutex<bool>,
    stop_async_cv: Condvar,
    /// The zero-filled next segment (`WalOptions::prefill_segments`), `None` when off.
    spares: Option<Spares>,
}

struct Writer {
    active: Arc<Segment>,
    /// Offset in the active segment where the next record goes.
    write_offset: u64,
    next_index: u64,
    /// Bytes written since open, over all segments: the position group commit compares against.
    written_pos: u64,
    /// Reused buffer holding record headers and small payloads.
    encode: Vec<u8>,
    /// Reused plan of the pieces of one write, in order.
    pieces: Vec<Piece>,
    /// `Some` while appends go through `O_DIRECT`; `None` when `direct_io` is off or the file
    /// system refused it.
    direct: Option<DirectAppender>,
    /// The direct path's buffer while the active segment is written through the page cache only
    /// because its `O_DIRECT` descriptor could not be opened at the roll (out of descriptors);
    /// the next roll opens the path again.
    direct_paused: Option<AlignedBuf>,
}

#[derive(Clone, Copy)]
enum Piece {
    /// `encode[start..end]`.
    Encoded { start: usize, end: usize },
    /// The payload of the batch's record `i`, written in place.
    Payload(usize),
}

struct Published {
    /// Every readable segment, oldest first; the last is the active one.
    segments: Vec<Arc<Segment>>,
    next_index: u64,
    /// Bytes written to the active segment (including its header).
    active_written: u64,
    written_pos: u64,
}

#[derive(Default)]
struct SyncState {
    /// Every byte below this log position is durable.
    durable_pos: u64,
    /// Someone is fsyncing (or about to): others wait for it instead of syncing themselves.
    syncing: bool,
    /// The syncer is waiting on `leader_cv` for in-flight appenders.
    leader_waiting: bool,
    /// Callers inside `wait_durable` whose bytes are not durable yet, the syncer included.
    waiting: usize,
    /// How many callers the previous fsync covered: the syncer's estimate of how many appenders
    /// are active, so it can wait (up to the window) for that many to join its fsync.
    last_group: usize,
}

/// Decrements `in_flight` when a group-commit appender has finished writing (or failed to).
struct InFlight<'a>(&'a Inner);

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        if self.0.in_flight.fetch_sub(1, Ordering::AcqRel) == 1 {
            // Taking the lock orders this with the syncer's check-then-wait, so the wakeup is not
            // lost.
            let state = self.0.sync_state.lock();
            if state.leader_waiting {
                self.0.leader_cv.notify_one();
            }
        }
    }
}

impl Wal {
    /// Opens the log in `options.dir`, creating the directory and a first segment if there is
    /// none, or recovering the existing segments: segment headers are checked, the last segment
    /// is scanned, a torn tail is dropped and a damaged one reported as [`Error::Corruption`].
    /// Everything readable after `open` returns is durable.
    pub fn open(options: WalOptions) -> Result<Wal> {
        options.validate()?;
        let dir = options.dir.clone();
        let (dir_file, lock_file) = open_dir(&dir)?;
        let stats = AtomicStats::default();
        let mut segments = open_segments(&dir, &dir_file, &options, &stats)?;
        let last = Arc::clone(segments.last().expect("open_segments returns at least one"));
        let mut recovered = segment::recover_last_segment(&last, options.seek_stride_bytes)?;
        let current = last.version == Version::CURRENT;
        if current && options.preallocate {
            sys::preallocate(&last.file, options.segment_bytes)
                .map_err(|e| Error::io(&last.path, e))?;
        }
        // Records found on disk may still sit only in the page cache of a process that died;
        // make them durable so that "readable after open" implies "durable".
        sys::fdatasync(&last.file, &last.path).map_err(|e| Error::io(&last.path, e))?;
        stats.fsyncs.fetch_add(1, Ordering::Relaxed);
        if !current {
            // Appends go only into segments of the current version, whose records name their
            // batch; the older segment, durable now and ending with a whole batch, is sealed.
            let segment = create_segment(&dir, &dir_file, &options, recovered.next_index)?;
            stats.fsyncs.fetch_add(2, Ordering::Relaxed);
            tracing::info!(
                old = %last.path.display(),
                old_version = last.version.number(),
                new = %segment.path.display(),
                "sealed a segment of an older format version; appends go to a new one"
            );
            if recovered.next_index == last.first_index {
                // The old segment holds no record, and the new one has taken its name.
                segments.pop();
            }
            segments.push(Arc::new(segment));
            recovered.write_offset = SEGMENT_HEADER_BYTES as u64;
        }
        let active = Arc::clone(segments.last().expect("at least one segment"));
        tracing::debug!(
            dir = %dir.display(),
            segments = segments.len(),
            first_index = segments[0].first_index,
            next_index = recovered.next_index,
            "opened log"
        );

        let direct = if options.direct_io {
            DirectAppender::open(&active, recovered.write_offset, &mut None)?
        } else {
            None
        };
        let inner = Arc::new(Inner {
            writer: Mutex::new(Writer::new(
                active,
                recovered.write_offset,
                recovered.next_index,
                direct,
            )),
            published: Mutex::new(Published {
                segments,
                next_index: recovered.next_index,
                active_written: recovered.write_offset,
                written_pos: 0,
            }),
            fsync_lock: Mutex::new(()),
            sync_state: Mutex::new(SyncState::default()),
            durable_cv: Condvar::new(),
            leader_cv: Condvar::new(),
            poisoned: AtomicBool::new(false),
            in_flight: AtomicUsize::new(0),
            stats,
            stop_async: Mutex::new(false),
            stop_async_cv: Condvar::new(),
            spares: options
                .prefilled_segment_bytes()
                .map(|bytes| Spares::new(&dir, bytes)),
            options,
            dir_file,
            _lock_file: lock_file,
        });
        if let Some(spares) = &inner.spares {
            spares.refill();
        }
        let async_syncer = match inner.options.durability {
            Durability::Async { interval } => {
                let inner = Arc::clone(&inner);
                let handle = std::thread::Builder::new()
                    .name("wal-async-sync".to_string())
                    .spawn(move || inner.run_async_syncer(interval))
                    .map_err(|e| Error::io(&dir, e))?;
                Some(handle)
            }
            _ => None,
        };
        Ok(Wal {
            inner,
            async_syncer,
        })
    }

    /// Appends one record and returns its index. Returns once the record is durable if the
    /// durability mode says so.
    pub fn append(&self, payload: &[u8]) -> Result<u64> {
        self.inner.append(&[payload])
    }

    /// Appends `payloads` as records with consecutive indexes and returns the first. The batch is
    /// written with one pwrite(2) (pwritev(2) without `direct_io`) into one segment and made
    /// durable together; after a crash, recovery returns either all of it or none of it.
    pub fn append_batch(&self, payloads: &[&[u8]]) -> Result<u64> {
        self.inner.append(payloads)
    }

    /// Makes everything appended so far durable, sharing an fsync with concurrent syncers.
    pub fn sync(&self) -> Result<()> {
        self.inner.sync()
    }

    /// The lowest index still readable.
    pub fn first_index(&self) -> u64 {
        self.inner.published.lock().segments[0].first_index
    }

    /// The index the next append gets. For an empty log `first_index() == next_index()`.
    pub fn next_index(&self) -> u64 {
        self.inner.published.lock().next_index
    }

    /// Iterates over the records from `index` to the end of the log as it is now. `index` may be
    /// anything from `first_index()` to `next_index()` (which gives an empty iterator). The end
    /// is every record written so far, including those of appends that are still waiting for
    /// their fsync (with `GroupCommit`, or concurrently with `Sync`).
    pub fn iter_from(&self, index: u64) -> Result<WalIter> {
        let published = self.inner.published.lock();
        let first_index = published.segments[0].first_index;
        if index < first_index {
            return Err(Error::IndexCompacted { index, first_index });
        }
        if index > published.next_index {
            return Err(Error::IndexBeyondEnd {
                index,
                next_index: published.next_index,
            });
        }
        let pos = published
            .segments
            .partition_point(|segment| segment.first_index <= index)
            - 1;
        Ok(WalIter::new(
            published.segments[pos..].to_vec(),
            index,
            published.next_index,
            published.active_written,
            self.inner.options.seek_stride_bytes,
        ))
    }

    /// Deletes every whole segment whose records all have indexes below `index`; the active
    /// segment is never deleted. Durable on return: the directory is fsynced.
    pub fn truncate_prefix(&self, index: u64) -> Result<()> {
        self.inner.truncate_prefix(index)
    }

    /// Counters since open.
    pub fn stats(&self) -> WalStats {
        let stats = &self.inner.stats;
        WalStats {
            appends: stats.appends.load(Ordering::Relaxed),
            records: stats.records.load(Ordering::Relaxed),
            bytes_written: stats.bytes_written.load(Ordering::Relaxed),
            fsyncs: stats.fsyncs.load(Ordering::Relaxed),
            rolls_into_spares: stats.rolls_into_spares.load(Ordering::Relaxed),
            spare_ready: self.inner.spares.as_ref().is_some_and(Spares::is_ready),
        }
    }

    /// The options the log was opened with.
    pub fn options(&self) -> &WalOptions {
        &self.inner.options
    }

    /// Whether an I/O failure has poisoned the log; see [`Error::Poisoned`].
    pub fn is_poisoned(&self) -> bool {
        self.inner.poisoned.load(Ordering::Acquire)
    }
}

impl Drop for Wal {
    fn drop(&mut self) {
        if let Some(spares) = &self.inner.spares {
            spares.close();
        }
        if let Some(handle) = self.async_syncer.take() {
            *self.inner.stop_async.lock() = true;
            self.inner.stop_async_cv.notify_all();
            if handle.join().is_err() {
                tracing::error!("the wal async syncer thread panicked");
            }
        }
    }
}

impl std::fmt::Debug for Wal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let published = self.inner.published.lock();
        f.debug_struct("Wal")
            .field("dir", &self.inner.options.dir)
            .field("segments", &published.segments.len())
            .field("first_index", &published.segments[0].first_index)
            .field("next_index", &published.next_index)
            .finish()
    }
}

impl Writer {
    /// The writer of a log just opened: appends go to `active` at `write_offset`.
    fn new(
        active: Arc<Segment>,
        write_offset: u64,
        next_index: u64,
        direct: Option<DirectAppender>,
    ) -> Writer {
        Writer {
            active,
            write_offset,
            next_index,
            written_pos: 0,
            encode: Vec::new(),
            pieces: Vec::new(),
            direct,
            direct_paused: None,
        }
    }
}

/// Creates the log directory `dir` (its name made durable) if it does not exist, and takes its
/// lock; returns the directory, kept open to fsync it, and the lock file.
fn open_dir(dir: &Path) -> Result<(File, File)> {
    let existed = dir.is_dir();
    fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))?;
    let dir_file = File::open(dir).map_err(|e| Error::io(dir, e))?;
    if !existed {
        // Make the new directory's own name durable.
        if let Some(parent) = dir.parent().filter(|p| !p.as_os_str().is_empty()) {
            let parent_file = File::open(parent).map_err(|e| Error::io(parent, e))?;
            sys::fsync_dir(&parent_file, parent).map_err(|e| Error::io(parent, e))?;
        }
    }
    let lock_path = dir.join("LOCK");
    let lock_file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(&lock_path)
        .map_err(|e| Error::io(&lock_path, e))?;
    if !sys::try_lock_exclusive(&lock_file).map_err(|e| Error::io(&lock_path, e))? {
        return Err(Error::Locked {
            dir: dir.to_path_buf(),
        });
    }
    Ok((dir_file, lock_file))
}

/// Lists, checks and opens the segments in `dir`, oldest first; creates the first segment of a
/// new log.
fn open_segments(
    dir: &Path,
    dir_file: &File,
    options: &WalOptions,
    stats: &AtomicStats,
) -> Result<Vec<Arc<Segment>>> {
    let mut found = Vec::new();
    for entry in fs::read_dir(dir).map_err(|e| Error::io(dir, e))? {
        let entry = entry.map_err(|e| Error::io(dir, e))?;
        let name = entry.file_name();
        let Some(name) = name.to_str() else { continue };
        if name.ends_with(segment::TEMP_SUFFIX) {
            // A segment whose creation did not finish, or a spare: it never held a record. The
            // spare thread of a log dropped just before may delete its own file first.
            match fs::remove_file(entry.path()) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                    return Err(Error::io(entry.path(), e));
                }
                _ => {}
            }
            continue;
        }
        if let Some(first_index) = segment::parse_segment_file_name(name) {
            found.push((first_index, entry.path()));
        }
    }
    found.sort_unstable_by_key(|(first_index, _)| *first_index);
    let mut segments = Vec::with_capacity(found.len().max(1));
    for (first_index, path) in found {
        segments.push(Arc::new(Segment::open(path, first_index)?));
    }
    if segments.is_empty() {
        segments.push(Arc::new(create_segment(dir, dir_file, options, 1)?));
        stats.fsyncs.fetch_add(2, Ordering::Relaxed);
    }
    Ok(segments)
}

/// Plans the write of one batch whose first record is `first_index`: record headers and small
/// payloads are copied into `encode`, payloads over [`COPY_PAYLOAD_BYTES_MAX`] are written in
/// place; `pieces` lists both in write order.
fn plan_write(encode: &mut Vec<u8>, pieces: &mut Vec<Piece>, first_index: u64, payloads: &[&[u8]]) {
    encode.clear();
    pieces.clear();
    let mut run_start = 0;
    for (i, payload) in payloads.iter().enumerate() {
        let continues = i + 1 < payloads.len();
        let header =
            format::encode_record_header(first_index + i as u64, first_index, payload, continues);
        encode.extend_from_slice(&header);
        if payload.len() <= COPY_PAYLOAD_BYTES_MAX {
            encode.extend_from_slice(payload);
        } else {
            pieces.push(Piece::Encoded {
                start: run_start,
                end: encode.len(),
            });
            pieces.push(Piece::Payload(i));
            run_start = encode.len();
        }
    }
    if run_start < encode.len() {
        pieces.push(Piece::Encoded {
            start: run_start,
            end: encode.len(),
        });
    }
    debug_assert_eq!(
        pieces
            .iter()
            .map(|p| match *p {
                Piece::Encoded { start, end } => end - start,
                Piece::Payload(_) => 0,
            })
            .sum::<usize>(),
        encode.len(),
        "the encoded pieces cover `encode` once"
    );
}

/// Writes the planned `pieces` of one batch of `batch_bytes` bytes at `offset` of the active
/// segment, with as few pwritev(2) calls as the kernel allows. `pieces` was planned by
/// [`plan_write`] over `encode` and `payloads`.
fn write_pieces(
    active: &Segment,
    offset: u64,
    encode: &[u8],
    pieces: &[Piece],
    payloads: &[&[u8]],
    batch_bytes: u64,
) -> std::io::Result<()> {
    let mut stack_iovecs = [sys::EMPTY_IOVEC; STACK_IOVECS];
    let mut heap_iovecs;
    let iovecs: &mut [libc::iovec] = if pieces.len() <= STACK_IOVECS {
        &mut stack_iovecs[..pieces.len()]
    } else {
        heap_iovecs = vec![sys::EMPTY_IOVEC; pieces.len()];
        &mut heap_iovecs
    };
    for (iovec, piece) in iovecs.iter_mut().zip(pieces.iter()) {
        let bytes: &[u8] = match *piece {
            Piece::Encoded { start, end } => &encode[start..end],
            Piece::Payload(i) => payloads[i],
        };
        *iovec = libc::iovec {
            iov_base: bytes.as_ptr() as *mut libc::c_void,
            iov_len: bytes.len(),
        };
    }
    debug_assert_eq!(
        iovecs.iter().map(|v| v.iov_len as u64).sum::<u64>(),
        batch_bytes,
        "planned write size"
    );
    // SAFETY: every iovec points into `encode` or into a caller's payload, both borrowed and
    // unchanged for the duration of the call.
    unsafe { sys::pwritev_all(&active.file, &active.path, iovecs, offset) }
}

/// Creates segment `first_index` while the log is being opened, replacing a segment file of that
/// name (see [`Segment::create`]). It is zero-filled here, before anything waits on it; segments
/// made by later rolls are prepared in the background.
fn create_segment(
    dir: &Path,
    dir_file: &File,
    options: &WalOptions,
    first_index: u64,
) -> Result<Segment> {
    match options.prefilled_segment_bytes() {
        Some(bytes) => {
            let spare = spare::prepare_now(dir, bytes).map_err(|e| Error::io(dir, e))?;
            Segment::from_spare(dir, dir_file, first_index, spare)
        }
        None => {
            let preallocate = options.preallocate.then_some(options.segment_bytes);
            Segment::create(dir, dir_file, first_index, preallocate)
        }
    }
}

impl Inner {
    fn poison(&self, what: &str, error: &Error) {
        if !self.poisoned.swap(true, Ordering::AcqRel) {
            tracing::error!(dir = %self.options.dir.display(), %error, "{what} failed; the log is poisoned until reopened");
        }
        // Wake everyone waiting for durability: they must learn about the failure.
        let _state = self.sync_state.lock();
        self.durable_cv.notify_all();
    }

    fn check_not_poisoned(&self) -> Result<()> {
        if self.poisoned.load(Ordering::Acquire) {
            Err(Error::Poisoned)
        } else {
            Ok(())
        }
    }

    fn append(&self, payloads: &[&[u8]]) -> Result<u64> {
        if payloads.is_empty() {
            return Err(Error::EmptyBatch);
        }
        let mut batch_bytes: u64 = 0;
        for payload in payloads {
            if payload.len() as u64 > u64::from(self.options.record_bytes_max) {
                return Err(Error::RecordTooLarge);
            }
            batch_bytes += format::record_encoded_bytes(payload.len());
        }
        if batch_bytes > self.options.batch_bytes_max {
            return Err(Error::BatchTooLarge);
        }

        let group_window = match self.options.durability {
            Durability::GroupCommit { window } => {
                self.in_flight.fetch_add(1, Ordering::AcqRel);
                Some(window)
            }
            _ => None,
        };
        let in_flight = group_window.map(|_| InFlight(self));
        let (first_index, end_pos, written_segment) = self.write_batch(payloads, batch_bytes)?;
        drop(in_flight);

        match self.options.durability {
            Durability::Sync => self.fsync_own_write(&written_segment, end_pos)?,
            Durability::GroupCommit { window } => self.wait_durable(end_pos, window)?,
            Durability::Async { .. } | Durability::None => {}
        }
        Ok(first_index)
    }

    /// Encodes and writes one batch under the writer lock. Returns the first index, the log
    /// position after the batch and the segment it went to.
    fn write_batch(
        &self,
        payloads: &[&[u8]],
        batch_bytes: u64,
    ) -> Result<(u64, u64, Arc<Segment>)> {
        let mut writer = self.writer.lock();
        self.check_not_poisoned()?;
        let has_records = writer.write_offset > SEGMENT_HEADER_BYTES as u64;
        if has_records && writer.write_offset + batch_bytes > self.options.segment_bytes {
            self.roll(&mut writer)?;
        }
        let first_index = writer.next_index;
        let Writer {
            encode,
            pieces,
            active,
            write_offset,
            direct,
            ..
        } = &mut *writer;
        if let Some(appender) = direct {
            let written = appender.write(active, *write_offset, first_index, payloads, batch_bytes);
            match written {
                Ok(Ok(())) => return Ok(self.finish_write(&mut writer, payloads, batch_bytes)),
                Ok(Err(refusal)) => {
                    tracing::info!(
                        segment = %active.path.display(),
                        "the file system refuses O_DIRECT writes ({refusal}): log appends go \
                         through the page cache"
                    );
                    *direct = None;
                }
                Err(error) => {
                    self.poison("write", &error);
                    return Err(error);
                }
            }
        }

        plan_write(encode, pieces, first_index, payloads);
        let written = write_pieces(active, *write_offset, encode, pieces, payloads, batch_bytes);
        if let Err(source) = written {
            let error = Error::io(&active.path, source);
            self.poison("write", &error);
            return Err(error);
        }
        if encode.capacity() > ENCODE_BUFFER_BYTES_KEPT {
            encode.clear();
            encode.shrink_to(ENCODE_BUFFER_BYTES_KEPT);
        }
        Ok(self.finish_write(&mut writer, payloads, batch_bytes))
    }

    /// Advances the writer past a batch just written and publishes it to readers and syncers.
    /// Returns the first index, the log position after the batch and the segment it went to.
    fn finish_write(
        &self,
        writer: &mut Writer,
        payloads: &[&[u8]],
        batch_bytes: u64,
    ) -> (u64, u64, Arc<Segment>) {
        let first_index = writer.next_index;
        let mut offset = writer.write_offset as usize;
        let stride = self.options.seek_stride_bytes;
        writer.active.note_seek_points(
            stride,
            payloads.iter().enumerate().map(|(i, payload)| {
                let point = SeekPoint {
                    index: first_index + i as u64,
                    offset,
                    batch_first: first_index,
                };
                offset += format::record_encoded_bytes(payload.len()) as usize;
                point
            }),
        );
        writer.write_offset += batch_bytes;
        writer.next_index += payloads.len() as u64;
        writer.written_pos += batch_bytes;
        {
            let mut published = self.published.lock();
            published.next_index = writer.next_index;
            published.active_written = writer.write_offset;
            published.written_pos = writer.written_pos;
        }
        self.stats.appends.fetch_add(1, Ordering::Relaxed);
        self.stats
            .records
            .fetch_add(payloads.len() as u64, Ordering::Relaxed);
        self.stats
            .bytes_written
            .fetch_add(batch_bytes, Ordering::Relaxed);
        (first_index, writer.written_pos, Arc::clone(&writer.active))
    }

    /// Seals the active segment and starts the next. A failure poisons the log (the old
    /// segment's fsync may have failed, or the new segment may be half made), except when the
    /// new segment's file could not be opened for want of descriptors: nothing was written then,
    /// the active segment stays, and the next append that needs a roll tries again.
    fn roll(&self, writer: &mut Writer) -> Result<()> {
        let result = self.roll_inner(writer);
        match &result {
            Ok(()) => {}
            Err(error @ Error::OutOfDescriptors { .. }) => {
                tracing::warn!(
                    dir = %self.options.dir.display(),
                    %error,
                    "segment roll deferred: no file descriptor for the next segment; the log \
                     is intact and the next append retries"
                );
            }
            Err(error) => self.poison("segment roll", error),
        }
        result
    }

    fn roll_inner(&self, writer: &mut Writer) -> Result<()> {
        {
            // Sealed segments are durable, so only the last segment of a log can have a torn
            // tail: recovery relies on that.
            let _fsync = self.fsync_lock.lock();
            self.check_not_poisoned()?;
            sys::fdatasync(&writer.active.file, &writer.active.path)
                .map_err(|e| Error::io(&writer.active.path, e))?;
            self.stats.fsyncs.fetch_add(1, Ordering::Relaxed);
        }
        let preallocate = self
            .options
            .preallocate
            .then_some(self.options.segment_bytes);
        let spare = self.spares.as_ref().and_then(Spares::take);
        let created = match spare {
            Some(spare) => {
                self.stats.rolls_into_spares.fetch_add(1, Ordering::Relaxed);
                Segment::from_spare(&self.options.dir, &self.dir_file, writer.next_index, spare)
            }
            // Out of descriptors here, the roll is deferred: nothing of the new segment exists.
            None => Segment::create(
                &self.options.dir,
                &self.dir_file,
                writer.next_index,
                preallocate,
            ),
        };
        let segment = Arc::new(created?);
        if let Some(spares) = &self.spares {
            spares.refill();
        }
        // The new file's fdatasync and the directory's fsync.
        self.stats.fsyncs.fetch_add(2, Ordering::Relaxed);
        tracing::debug!(segment = %segment.path.display(), "rolled to a new segment");
        let mut buf = match writer.direct.take() {
            Some(appender) => Some(appender.into_buf()),
            None => writer.direct_paused.take(),
        };
        if buf.is_some() {
            let offset = SEGMENT_HEADER_BYTES as u64;
            // The new segment exists under its name now, so the roll goes through whatever
            // happens: a segment without its `O_DIRECT` descriptor is written through the page
            // cache, and the next roll opens the path again.
            match DirectAppender::open(&segment, offset, &mut buf) {
                Ok(direct) => writer.direct = direct,
                Err(error @ Error::OutOfDescriptors { .. }) => {
                    tracing::warn!(
                        segment = %segment.path.display(),
                        %error,
                        "no descriptor for O_DIRECT: this segment is written through the page \
                         cache"
                    );
                    writer.direct_paused = buf;
                }
                Err(error) => return Err(error),
            }
        }
        writer.active = Arc::clone(&segment);
        writer.write_offset = SEGMENT_HEADER_BYTES as u64;
        let mut published = self.published.lock();
        published.segments.push(segment);
        published.active_written = writer.write_offset;
        Ok(())
    }

    /// `Durability::Sync`: the appender fsyncs its own write.
    fn fsync_own_write(&self, segment: &Segment, end_pos: u64) -> Result<()> {
        {
            let _fsync = self.fsync_lock.lock();
            self.check_not_poisoned()?;
            if let Err(source) = sys::fdatasync(&segment.file, &segment.path) {
                let error = Error::io(&segment.path, source);
                self.poison("fsync", &error);
                return Err(error);
            }
            self.stats.fsyncs.fetch_add(1, Ordering::Relaxed);
        }
        let mut state = self.sync_state.lock();
        state.durable_pos = state.durable_pos.max(end_pos);
        Ok(())
    }

    fn sync(&self) -> Result<()> {
        self.check_not_poisoned()?;
        let target = self.published.lock().written_pos;
        self.wait_durable(target, Duration::ZERO)
    }

    /// Returns once every byte below log position `target` is durable. Leader/follower: the first
    /// caller that finds nobody syncing becomes the syncer and fsyncs the active segment for
    /// everyone; callers whose bytes were written after it looked wait for the next round, led by
    /// one of them.
    ///
    /// Before it fsyncs, the syncer waits, at most `window`, while appenders are still writing or
    /// while fewer callers wait than the previous fsync covered. Writers that loop on `append`
    /// come back a few microseconds after the previous fsync released them; without the wait
    /// the first one back would fsync alone and the groups would alternate between one writer
    /// and the rest. A lone appender never waits: the previous group was itself.
    fn wait_durable(&self, target: u64, window: Duration) -> Result<()> {
        let mut state = self.sync_state.lock();
        if state.durable_pos >= target {
            return Ok(());
        }
        state.waiting += 1;
        if state.leader_waiting {
            self.leader_cv.notify_one();
        }
        let result = self.wait_durable_locked(&mut state, target, window);
        state.waiting -= 1;
        result
    }

    fn wait_durable_locked(
        &self,
        state: &mut parking_lot::MutexGuard<'_, SyncState>,
        target: u64,
        window: Duration,
    ) -> Result<()> {
        loop {
            // Bytes that are already durable stay a success even if a later fsync failed.
            if state.durable_pos >= target {
                return Ok(());
            }
            self.check_not_poisoned()?;
            if state.syncing {
                self.durable_cv.wait(state);
                continue;
            }
            state.syncing = true;
            if !window.is_zero() {
                let deadline = Instant::now() + window;
                state.leader_waiting = true;
                while self.in_flight.load(Ordering::Acquire) > 0 || state.waiting < state.last_group
                {
                    if self.leader_cv.wait_until(state, deadline).timed_out() {
                        break;
                    }
                }
                state.leader_waiting = false;
            }
            let group = state.waiting;
            let result = parking_lot::MutexGuard::unlocked(state, || self.fsync_active());
            state.syncing = false;
            state.last_group = group;
            self.durable_cv.notify_all();
            match result {
                Ok(durable_pos) => state.durable_pos = state.durable_pos.max(durable_pos),
                // `fsync_active` poisoned the log before anyone could take over as syncer.
                Err(error) => return Err(error),
            }
        }
    }

    /// fdatasyncs the active segment and returns the log position that is durable now. Earlier
    /// segments were made durable when they were sealed.
    fn fsync_active(&self) -> Result<u64> {
        let (segment, written_pos) = {
            let published = self.published.lock();
            (
                Arc::clone(published.segments.last().expect("at least one segment")),
                published.written_pos,
            )
        };
        let _fsync = self.fsync_lock.lock();
        self.check_not_poisoned()?;
        if let Err(source) = sys::fdatasync(&segment.file, &segment.path) {
            let error = Error::io(&segment.path, source);
            self.poison("fsync", &error);
            return Err(error);
        }
        self.stats.fsyncs.fetch_add(1, Ordering::Relaxed);
        Ok(written_pos)
    }

    fn truncate_prefix(&self, index: u64) -> Result<()> {
        self.check_not_poisoned()?;
        let removed: Vec<Arc<Segment>> = {
            let mut published = self.published.lock();
            // Segment i may go when the next segment starts at or below `index`: then all of
            // segment i's records are below it. The active (last) segment always stays.
            let deletable = published
                .segments
                .windows(2)
                .take_while(|pair| pair[1].first_index <= index)
                .count();
            published.segments.drain(..deletable).collect()
        };
        if removed.is_empty() {
            return Ok(());
        }
        // Oldest first, so a crash part way leaves a contiguous suffix of the log. Open readers
        // keep their handles; the files disappear when the last one closes.
        for segment in &removed {
            fs::remove_file(&segment.path).map_err(|e| Error::io(&segment.path, e))?;
        }
        if let Err(source) = sys::fsync_dir(&self.dir_file, &self.options.dir) {
            let error = Error::io(&self.options.dir, source);
            self.poison("directory fsync", &error);
            return Err(error);
        }
        self.stats.fsyncs.fetch_add(1, Ordering::Relaxed);
        tracing::debug!(
            segments = removed.len(),
            below = index,
            "truncated log prefix"
        );
        Ok(())
    }

    fn run_async_syncer(&self, interval: Duration) {
        let mut stop = self.stop_async.lock();
        loop {
            if *stop {
                return;
            }
            self.stop_async_cv.wait_for(&mut stop, interval);
            if *stop {
                return;
            }
            let result = parking_lot::MutexGuard::unlocked(&mut stop, || self.sync());
            match result {
                Ok(()) => {}
                Err(Error::Poisoned) => return,
                Err(error) => {
                    tracing::error!(%error, "background sync failed");
                    return;
                }
            }
        }
    }
}

// `Wal` is shared across threads by reference; keep it that way.
const _: fn() = || {
    fn is_send_sync<T: Send + Sync>() {}
    is_send_sync::<Wal>();
    is_send_sync::<WalIter>();
};
