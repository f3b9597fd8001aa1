//! Region snapshots streamed in chunks, outside raft's message path (issue 18 item 1).
//!
//! A leader's snapshot job ([`build`]) flushes the region and hard-links its live sealed files
//! into `regions/<id>/snapshots/<index>/` (no copy; compaction may then delete the originals,
//! the links keep the contents). The raft snapshot carries only a [`Descriptor`]: the node that
//! built it, the region's manifest at the checkpoint, and each file's length and CRC32.
//!
//! A replica that receives the descriptor in a `MsgSnapshot` does not hand it to raft yet
//! ([`SnapshotTransfers::offer`]): it downloads the files with `FetchSnapshot` into
//! `regions/<id>/snapshot.staging/`, one server-streamed call per file, each chunk CRC-checked,
//! resuming a broken download at the length it has, then checks every file whole and marks the
//! staging complete. Only then is the message stepped into raft, so raft's state moves only once
//! the data is on local disk; a leader that dies mid-transfer leaves nothing half-done, and the
//! next leader offers its own snapshot. The state machine's restore then installs the staged
//! files as the region's content (`DataRegion::install_checkpoint`): links and one manifest
//! write, however large the region.
//!
//! Bounds: chunks of `dn_snapshot_chunk_bytes`, sent at most `dn_snapshot_send_bytes_per_sec`
//! over all transfers of the node, at most `dn_snapshot_receives_max` downloads at once. While a
//! replica fetches a snapshot, the leader's log is not truncated past it
//! ([`SnapshotTransfers::transfer_pin`]), so the replica can continue from the log afterwards.

use std::collections::HashMap;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::codec::DecodeError;
use common::envelope;
use consensus::RaftMessage;
use engine::{Manifest, StorageError};
use parking_lot::Mutex;

use crate::peers::Peers;

mod built;

pub use built::{
    build, built_usage, first_file, read_chunk, remove_built, remove_retired, retire_built,
    BuiltUsage,
};
use built::{file_crc, open_built};

/// Magic of a streamed snapshot's descriptor, the data of its raft snapshot.
pub const STREAMED_MAGIC: &[u8; 8] = b"FPRSNAP3";
/// Where a region downloads a snapshot it is to install.
const STAGING_DIR: &str = "snapshot.staging";
/// In the staging directory: the descriptor being downloaded.
const DESCRIPTOR_FILE: &str = "DESCRIPTOR";
/// In the staging directory: present once every file is downloaded and checked.
const COMPLETE_FILE: &str = "COMPLETE";
/// How long after a replica last fetched a chunk the leader still keeps its log for it.
const TRANSFER_PIN: Duration = Duration::from_secs(30);
/// Free space a download leaves on the region's file system beyond what it stages: a snapshot
/// that would take the disk below it is not downloaded (the node would stop on a full disk).
const STAGING_SPACE_RESERVE: u64 = 256 << 20;
/// How long a download waits for the next chunk before it gives up (and resumes later).
const CHUNK_TIMEOUT: Duration = Duration::from_secs(30);

/// One file of a snapshot.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SnapshotFile {
    /// Its name in the snapshot's directory (and the manifest's).
    pub name: String,
    /// Its length in bytes.
    pub len: u64,
    /// CRC32 of its contents.
    pub crc32: u32,
}

/// What a streamed snapshot's raft message carries.
#[derive(Clone, Debug, PartialEq)]
pub struct Descriptor {
    /// The DataNode that built it and serves its files.
    pub source: u64,
    /// The region.
    pub region: u64,
    /// The region's manifest at the checkpoint: its files, deletions and checkpoint index.
    pub manifest: Manifest,
    /// Every file the manifest names, in its order.
    pub files: Vec<SnapshotFile>,
}

impl Descriptor {
    /// The log index the snapshot's content reflects.
    pub fn index(&self) -> u64 {
        self.manifest.checkpoint
    }

    /// Bytes of all its files.
    pub fn bytes(&self) -> u64 {
        self.files.iter().map(|f| f.len).sum()
    }

    /// Whether `data` (a raft snapshot's) is a streamed snapshot's descriptor.
    pub fn is_streamed(data: &[u8]) -> bool {
        data.starts_with(STREAMED_MAGIC)
    }

    /// Layout (little-endian): `magic "FPRSNAP3", u64 source node, u64 region, bytes32 manifest
    /// (the region manifest's own encoding), u32 files, files × { str16 name, u64 length, u32
    /// CRC32 }, u32 CRC32 of everything before it`.
    pub fn encode(&self) -> Vec<u8> {
        envelope::seal(STREAMED_MAGIC, |w| {
            w.u64(self.source);
            w.u64(self.region);
            w.bytes32(&self.manifest.encode());
            w.len32(self.files.len());
            for file in &self.files {
                w.str16(&file.name);
                w.u64(file.len);
                w.u32(file.crc32);
            }
        })
    }

    /// Reads [`Descriptor::encode`]'s bytes; the files must be the manifest's, each a plain
    /// file name.
    pub fn decode(bytes: &[u8]) -> Result<Descriptor, DecodeError> {
        let (_, mut r) = envelope::open(bytes, &[STREAMED_MAGIC])?;
        let source = r.u64()?;
        let region = r.u64()?;
        let manifest = Manifest::decode(r.bytes32()?)?;
        // A name (2 + 1) and the length and CRC (12).
        let count = r.count(15)?;
        let mut files = Vec::with_capacity(count);
        for _ in 0..count {
            let name = r.str16()?;
            if !is_plain_file_name(&name) {
                return r.error(format!("snapshot file name {name:?}"));
            }
            files.push(SnapshotFile {
                name,
                len: r.u64()?,
                crc32: r.u32()?,
            });
        }
        r.finish()?;
        let named = manifest.file_names();
        if named.len() != files.len() || named.iter().zip(&files).any(|(n, f)| *n != f.name) {
            return r.error("the snapshot's files are not its manifest's");
        }
        Ok(Descriptor {
            source,
            region,
            manifest,
            files,
        })
    }
}

fn io_error(path: &Path, source: io::Error) -> StorageError {
    StorageError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// A name without a directory part: what a fetch may ask for.
fn is_plain_file_name(name: &str) -> bool {
    !name.is_empty()
        && !name.starts_with('.')
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'.' || b == b'_')
}

/// The directory a region's snapshot is downloaded into.
pub fn staging_dir(region_dir: &Path) -> PathBuf {
    region_dir.join(STAGING_DIR)
}

/// Whether the snapshot `descriptor` (its bytes) is downloaded whole into `region_dir`'s staging.
pub fn is_staged(region_dir: &Path, descriptor: &[u8]) -> bool {
    let staging = staging_dir(region_dir);
    staging.join(COMPLETE_FILE).exists()
        && fs::read(staging.join(DESCRIPTOR_FILE)).is_ok_and(|d| d == descriptor)
}

/// Removes a region's staging directory (after its snapshot is installed).
pub fn remove_staging(region_dir: &Path) -> io::Result<()> {
    match fs::remove_dir_all(staging_dir(region_dir)) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => Err(e),
        _ => Ok(()),
    }
}

/// Removes a staging directory the region no longer needs when it opens: one whose snapshot it
/// already holds (a crash came after the install, before the removal) or that is unreadable.
/// One for a newer index stays: raft may restore it.
pub fn tidy_staging(region_dir: &Path, applied: u64) -> io::Result<()> {
    let staging = staging_dir(region_dir);
    if !staging.exists() {
        return Ok(());
    }
    let needed = fs::read(staging.join(DESCRIPTOR_FILE))
        .ok()
        .and_then(|bytes| Descriptor::decode(&bytes).ok())
        .is_some_and(|d| d.index() > applied);
    if needed {
        return Ok(());
    }
    remove_staging(region_dir)
}

/// Settings of the transfers (DataNode keys of the same names).
#[derive(Clone, Copy, Debug)]
pub struct TransferConfig {
    /// `dn_snapshot_chunk_bytes`.
    pub chunk_bytes: usize,
    /// `dn_snapshot_send_bytes_per_sec` (0: unthrottled).
    pub send_bytes_per_sec: u64,
    /// `dn_snapshot_receives_max`.
    pub receives_max: usize,
    /// `dn_snapshot_keep_ms`: a built snapshot no replica used for this long is removed.
    pub keep: Duration,
}

/// Counters of the transfers.
#[derive(Debug, Default)]
pub struct TransferMetrics {
    /// Snapshot bytes sent to replicas.
    pub sent_bytes: AtomicU64,
    /// Snapshot bytes received.
    pub received_bytes: AtomicU64,
    /// Downloads completed (staged whole and checked).
    pub downloads: AtomicU64,
    /// Downloads that failed (to be resumed on a later offer).
    pub download_failures: AtomicU64,
    /// Downloads running (a gauge).
    pub downloading: AtomicU64,
    /// Files whose download continued from the part an earlier attempt staged.
    pub resumed_files: AtomicU64,
    /// Built snapshots removed once unused for `dn_snapshot_keep_ms`.
    pub released: AtomicU64,
    /// Bytes of the files of the snapshots this node keeps built (a gauge, as of the last look).
    pub built_bytes: AtomicU64,
    /// Of those, bytes only a snapshot still links: data the region compacted, expired or
    /// deleted, whose space the snapshots alone keep (a gauge).
    pub pinned_bytes: AtomicU64,
}

/// The node's snapshot transfers, both ways.
pub struct SnapshotTransfers {
    node_id: u64,
    regions_dir: PathBuf,
    config: TransferConfig,
    peers: Arc<Peers>,
    /// Downloads running: region → snapshot index.
    receiving: Mutex<HashMap<u64, u64>>,
    /// The newest snapshot installed per region in this run.
    installed: Mutex<HashMap<u64, u64>>,
    /// Fetches served: (region, snapshot index) → when a chunk of it last went out.
    sending: Mutex<HashMap<(u64, u64), Instant>>,
    /// When the send throttle lets the next chunk go.
    send_at: tokio::sync::Mutex<tokio::time::Instant>,
    metrics: TransferMetrics,
    /// The runtime downloads run on (a restore asks for one from the raft thread).
    runtime: tokio::runtime::Handle,
    me: std::sync::Weak<SnapshotTransfers>,
}

/// What [`SnapshotTransfers::offer`] made of a raft message.
pub enum Offer {
    /// Not a streamed snapshot, or one already installed: step it into raft now.
    Step(RaftMessage),
    /// Held until its files are found staged or its download completes (or dropped: a
    /// download is running or the bound is reached, or the descriptor is bad); raft offers it
    /// again.
    Held,
}

impl SnapshotTransfers {
    /// The transfers of node `node_id`, whose regions live in `regions_dir`. Called within
    /// the runtime the transfers are to run on.
    pub fn new(
        node_id: u64,
        regions_dir: PathBuf,
        config: TransferConfig,
        peers: Arc<Peers>,
    ) -> Arc<SnapshotTransfers> {
        Arc::new_cyclic(|me| SnapshotTransfers {
            me: me.clone(),
            runtime: tokio::runtime::Handle::current(),
            node_id,
            regions_dir,
            config,
            peers,
            receiving: Mutex::new(HashMap::new()),
            installed: Mutex::new(HashMap::new()),
            sending: Mutex::new(HashMap::new()),
            send_at: tokio::sync::Mutex::new(tokio::time::Instant::now()),
            metrics: TransferMetrics::default(),
        })
    }

    /// Its counters.
    pub fn metrics(&self) -> &TransferMetrics {
        &self.metrics
    }

    fn region_dir(&self, region: u64) -> PathBuf {
        self.regions_dir.join(region.to_string())
    }

    /// Takes a received raft message: a streamed snapshot not yet staged starts (or continues)
    /// its download, and `step` gets the message once the files are staged. Whether they are
    /// is read from disk off the async receive path (a blocking task).
    pub fn offer(
        self: &Arc<Self>,
        message: RaftMessage,
        step: impl FnOnce(RaftMessage) + Send + 'static,
    ) -> Offer {
        let data = match message.snapshot_data() {
            Some(data) if Descriptor::is_streamed(data) => data.to_vec(),
            _ => return Offer::Step(message),
        };
        let index = message.message.get_snapshot().get_metadata().get_index();
        let installed = self.installed.lock().get(&message.group).copied();
        if installed.is_some_and(|at| at >= index) {
            return Offer::Step(message);
        }
        let transfers = self.clone();
        self.runtime.spawn(async move {
            let group = message.group;
            let (dir, staged_data) = (transfers.region_dir(group), data.clone());
            let staged = tokio::task::spawn_blocking(move || is_staged(&dir, &staged_data))
                .await
                .unwrap_or(false);
            if staged {
                step(message);
                return;
            }
            if let Some(download) = transfers.start(group, data) {
                if download.await {
                    step(message);
                }
            }
        });
        Offer::Held
    }

    /// Starts downloading the snapshot `descriptor` describes unless it is staged or being
    /// downloaded (the state machine's restore calls this when it finds no staged files, e.g.
    /// after losing them).
    pub fn ensure(self: &Arc<Self>, region: u64, descriptor: &[u8]) {
        if is_staged(&self.region_dir(region), descriptor) {
            return;
        }
        if let Some(download) = self.start(region, descriptor.to_vec()) {
            self.runtime.spawn(download);
        }
    }

    /// The download of `bytes` into `region`'s staging as a future answering whether it
    /// completed, or `None` when none is to start.
    fn start(
        self: &Arc<Self>,
        region: u64,
        bytes: Vec<u8>,
    ) -> Option<impl std::future::Future<Output = bool> + Send + 'static> {
        let descriptor = match Descriptor::decode(&bytes) {
            Ok(d) if d.region == region => d,
            Ok(d) => {
                tracing::warn!(region, "a snapshot descriptor of region {}", d.region);
                return None;
            }
            Err(e) => {
                tracing::warn!(region, "a snapshot descriptor does not decode: {e}");
                return None;
            }
        };
        {
            let mut receiving = self.receiving.lock();
            if receiving.contains_key(&region) || receiving.len() >= self.config.receives_max {
                return None;
            }
            receiving.insert(region, descriptor.index());
        }
        self.metrics.downloading.fetch_add(1, Ordering::Relaxed);
        let this = self.clone();
        Some(async move {
            let started = Instant::now();
            let result = this.download(&descriptor, &bytes).await;
            this.receiving.lock().remove(&region);
            this.metrics.downloading.fetch_sub(1, Ordering::Relaxed);
            match result {
                Ok(()) => {
                    this.metrics.downloads.fetch_add(1, Ordering::Relaxed);
                    tracing::info!(
                        region,
                        index = descriptor.index(),
                        source = descriptor.source,
                        bytes = descriptor.bytes(),
                        files = descriptor.files.len(),
                        ms = started.elapsed().as_millis() as u64,
                        "snapshot downloaded"
                    );
                    true
                }
                Err(e) => {
                    this.metrics
                        .download_failures
                        .fetch_add(1, Ordering::Relaxed);
                    tracing::warn!(
                        region,
                        index = descriptor.index(),
                        source = descriptor.source,
                        "snapshot download stopped (resumed on the next offer): {e}"
                    );
                    false
                }
            }
        })
    }

    /// Downloads every file of `descriptor` into the region's staging, resuming the file a
    /// broken download stopped in, then checks every file whole and marks the staging complete.
    async fn download(&self, descriptor: &Descriptor, bytes: &[u8]) -> Result<(), String> {
        let address = self
            .peers
            .address(descriptor.source)
            .ok_or_else(|| format!("no address of node {}", descriptor.source))?;
        let staging = staging_dir(&self.region_dir(descriptor.region));
        let prepared = staging.clone();
        let descriptor_bytes = bytes.to_vec();
        blocking(move || prepare_staging(&prepared, &descriptor_bytes)).await?;
        // A second pass only for files found whole but wrong (a torn tail a crash left): they
        // are fetched again.
        for pass in 0..2 {
            let (dir, files) = (staging.clone(), descriptor.files.clone());
            let (plan, offset) = blocking(move || plan_fetch(&dir, &files)).await?;
            let needed = plan.iter().map(|f| f.len).sum::<u64>() - offset;
            let dir = staging.clone();
            let free = blocking(move || common::durable::free_bytes(&dir)).await?;
            if needed + STAGING_SPACE_RESERVE > free {
                return Err(format!(
                    "{} MiB to stage and {} MiB free under {}: at least {} MiB must stay free",
                    needed >> 20,
                    free >> 20,
                    staging.display(),
                    STAGING_SPACE_RESERVE >> 20
                ));
            }
            if !plan.is_empty() {
                if offset > 0 {
                    self.metrics.resumed_files.fetch_add(1, Ordering::Relaxed);
                }
                self.fetch_files(&address, descriptor, &plan, offset, &staging)
                    .await?;
            }
            let (dir, files) = (staging.clone(), descriptor.files.clone());
            let wrong = blocking(move || check_files(&dir, &files)).await?;
            if wrong.is_empty() {
                break;
            }
            tracing::warn!(
                staging = %staging.display(),
                files = wrong.len(),
                "staged snapshot files do not match their length and CRC: fetching them again"
            );
            for name in &wrong {
                let path = staging.join(name);
                fs::remove_file(&path).map_err(|e| format!("{}: {e}", path.display()))?;
            }
            if pass == 1 {
                return Err(format!("{} files did not check out twice", wrong.len()));
            }
        }
        let complete = staging.clone();
        let names: Vec<String> = descriptor.files.iter().map(|f| f.name.clone()).collect();
        blocking(move || mark_complete(&complete, &names)).await?;
        if !is_staged(&self.region_dir(descriptor.region), bytes) {
            return Err("the staged files did not check out".into());
        }
        Ok(())
    }

    /// Appends the files of `plan` from `offset` in the first, in one stream, each chunk
    /// checked, reading the stream to its end.
    async fn fetch_files(
        &self,
        address: &str,
        descriptor: &Descriptor,
        plan: &[SnapshotFile],
        offset: u64,
        staging: &Path,
    ) -> Result<(), String> {
        let request = proto::FetchSnapshotReq {
            region_id: descriptor.region,
            snapshot_index: descriptor.index(),
            offset,
            from_data_node_id: self.node_id,
            files: plan.iter().map(|f| f.name.clone()).collect(),
        };
        let mut stream = self
            .peers
            .rpc()
            .fetch_snapshot(address, request)
            .await
            .map_err(|e| format!("fetching from {address}: {e}"))?;
        let open = |file: &SnapshotFile| {
            let path = staging.join(&file.name);
            OpenOptions::new()
                .create(true)
                .append(true)
                .open(&path)
                .map_err(|e| format!("{}: {e}", path.display()))
        };
        let (mut current, mut at) = (0usize, offset);
        let mut out = open(&plan[0])?;
        loop {
            let chunk = match tokio::time::timeout(CHUNK_TIMEOUT, stream.message()).await {
                Err(_) => return Err(format!("no chunk for {CHUNK_TIMEOUT:?}")),
                Ok(Err(e)) => return Err(format!("fetching {}: {e}", plan[current].name)),
                Ok(Ok(None)) => break,
                Ok(Ok(Some(chunk))) => chunk,
            };
            // The stream moves to the next file once this one is whole.
            while (chunk.file as usize) > current && at == plan[current].len {
                current += 1;
                if current == plan.len() {
                    break;
                }
                at = 0;
                out = open(&plan[current])?;
            }
            let file = plan.get(current).filter(|_| chunk.file as usize == current);
            let Some(file) = file else {
                return Err(format!("a chunk of file {} out of order", chunk.file));
            };
            if chunk.offset != at
                || chunk.data.is_empty()
                || at + chunk.data.len() as u64 > file.len
                || crc32fast::hash(&chunk.data) != chunk.crc32
            {
                return Err(format!(
                    "a bad chunk of {} at {} ({} bytes), expected offset {at}",
                    file.name,
                    chunk.offset,
                    chunk.data.len()
                ));
            }
            out.write_all(&chunk.data)
                .map_err(|e| format!("{}: {e}", file.name))?;
            at += chunk.data.len() as u64;
            self.metrics
                .received_bytes
                .fetch_add(chunk.data.len() as u64, Ordering::Relaxed);
        }
        // Whatever follows the last chunk is empty files.
        while current < plan.len() && at == plan[current].len {
            current += 1;
            at = 0;
            if let Some(file) = plan.get(current) {
                open(file)?;
            }
        }
        if current < plan.len() {
            return Err(format!(
                "the stream ended at {at} of {} ({} bytes)",
                plan[current].name, plan[current].len
            ));
        }
        Ok(())
    }

    /// Waits until the send throttle lets `bytes` more go, and records that `region`'s
    /// snapshot at `index` is being fetched.
    pub async fn before_send(&self, region: u64, index: u64, bytes: usize) {
        self.sending.lock().insert((region, index), Instant::now());
        let rate = self.config.send_bytes_per_sec;
        if rate > 0 {
            let wait = {
                let mut send_at = self.send_at.lock().await;
                let now = tokio::time::Instant::now();
                let start = (*send_at).max(now);
                *send_at = start + Duration::from_secs_f64(bytes as f64 / rate as f64);
                start - now
            };
            if !wait.is_zero() {
                tokio::time::sleep(wait).await;
            }
        }
        self.metrics
            .sent_bytes
            .fetch_add(bytes as u64, Ordering::Relaxed);
    }

    /// Streams the files `req` names, from `req.offset` in the first (`first`, opened by
    /// [`first_file`]), into `tx`, paced by the send throttle; an error ends the stream. Returns
    /// when done or when the fetching replica hung up (it resumes where it got to).
    pub async fn serve(
        self: Arc<Self>,
        region_dir: PathBuf,
        req: proto::FetchSnapshotReq,
        first: (File, u64),
        tx: tokio::sync::mpsc::Sender<Result<proto::SnapshotChunk, tonic::Status>>,
    ) {
        let region = req.region_id;
        if let Err(status) = self.stream_files(&region_dir, &req, first, &tx).await {
            if tx.send(Err(status)).await.is_err() {
                tracing::debug!(region, "the fetching replica hung up before a failed chunk");
            }
        }
    }

    /// [`SnapshotTransfers::serve`]'s chunks: `Ok` when every file went out or the replica hung
    /// up, the error to end the stream with otherwise.
    async fn stream_files(
        &self,
        region_dir: &Path,
        req: &proto::FetchSnapshotReq,
        first: (File, u64),
        tx: &tokio::sync::mpsc::Sender<Result<proto::SnapshotChunk, tonic::Status>>,
    ) -> Result<(), tonic::Status> {
        let internal = |e: &dyn std::fmt::Display| tonic::Status::internal(e.to_string());
        let chunk_bytes = self.config.chunk_bytes as u64;
        let mut opened = Some(first);
        for (position, name) in req.files.iter().enumerate() {
            let (file, len) = match opened.take() {
                Some(first) => first,
                None => {
                    let (dir, index, name) =
                        (region_dir.to_path_buf(), req.snapshot_index, name.clone());
                    tokio::task::spawn_blocking(move || open_built(&dir, index, &name))
                        .await
                        .map_err(|e| internal(&e))??
                }
            };
            let file = Arc::new(file);
            let mut offset = if position == 0 { req.offset } else { 0 };
            while offset < len {
                if let Some(failed) = chunk_failpoint(offset) {
                    return Err(failed);
                }
                let n = chunk_bytes.min(len - offset) as usize;
                self.before_send(req.region_id, req.snapshot_index, n).await;
                let reading = file.clone();
                let data = tokio::task::spawn_blocking(move || read_chunk(&reading, offset, n))
                    .await
                    .map_err(|e| internal(&e))?
                    .map_err(|e| internal(&format!("{name}: {e}")))?;
                let chunk = proto::SnapshotChunk {
                    offset,
                    crc32: crc32fast::hash(&data),
                    data,
                    file: position as u32,
                };
                if tx.send(Ok(chunk)).await.is_err() {
                    return Ok(());
                }
                offset += n as u64;
            }
        }
        Ok(())
    }

    /// The index `region`'s raft log must not be truncated past: the oldest snapshot of it a
    /// replica fetched in the last [`TRANSFER_PIN`] (it continues from the log after that index).
    pub fn transfer_pin(&self, region: u64) -> Option<u64> {
        let mut sending = self.sending.lock();
        let remembered = TRANSFER_PIN.max(self.config.keep);
        sending.retain(|_, at| at.elapsed() < remembered);
        sending
            .iter()
            .filter(|((r, _), at)| *r == region && at.elapsed() < TRANSFER_PIN)
            .map(|((_, index), _)| *index)
            .min()
    }

    /// Whether a replica fetched a chunk of a snapshot of `region` within `dn_snapshot_keep_ms`.
    pub fn fetched_lately(&self, region: u64) -> bool {
        self.sending
            .lock()
            .iter()
            .any(|((r, _), at)| *r == region && at.elapsed() < self.config.keep)
    }

    /// `dn_snapshot_keep_ms`.
    pub fn keep(&self) -> Duration {
        self.config.keep
    }
}

/// Where a region's snapshot files come from when its restore finds them missing: the
/// DataNode's transfers, which download them from the node that built them.
pub trait SnapshotFetch: Send + Sync {
    /// Starts downloading the streamed snapshot `descriptor` of `region` unless it is staged
    /// or being downloaded already.
    fn fetch(&self, region: u64, descriptor: &[u8]);
    /// Learns that `region`'s snapshot at `index` is installed: an offer of it still in flight
    /// goes to raft (which ignores it) rather than start a download.
    fn installed(&self, region: u64, index: u64);
}

impl SnapshotFetch for SnapshotTransfers {
    fn fetch(&self, region: u64, descriptor: &[u8]) {
        // The restore runs on the raft thread, outside the runtime: the download joins it.
        let Some(this) = self.me.upgrade() else {
            return;
        };
        this.ensure(region, descriptor);
    }

    fn installed(&self, region: u64, index: u64) {
        let mut installed = self.installed.lock();
        let at = installed.entry(region).or_default();
        *at = (*at).max(index);
    }
}

/// `datanode::snapshot::chunk` (feature `failpoints`): fails a `FetchSnapshot` stream at a chunk
/// past a file's start, as a broken connection would, so a test sees the download resume.
#[cfg(feature = "failpoints")]
fn chunk_failpoint(offset: u64) -> Option<tonic::Status> {
    fail::fail_point!("datanode::snapshot::chunk", offset > 0, |_| Some(
        tonic::Status::unavailable(format!("snapshot stream broken by failpoint at {offset}"))
    ));
    None
}

#[cfg(not(feature = "failpoints"))]
fn chunk_failpoint(_offset: u64) -> Option<tonic::Status> {
    None
}

/// Runs blocking file work off the async workers.
async fn blocking<T: Send + 'static>(
    work: impl FnOnce() -> io::Result<T> + Send + 'static,
) -> Result<T, String> {
    tokio::task::spawn_blocking(work)
        .await
        .map_err(|e| e.to_string())?
        .map_err(|e| e.to_string())
}

/// Makes `staging` the download directory of `descriptor`: kept as it is when it already is (a
/// download resumes), started afresh otherwise.
fn prepare_staging(staging: &Path, descriptor: &[u8]) -> io::Result<()> {
    if fs::read(staging.join(DESCRIPTOR_FILE)).is_ok_and(|d| d == descriptor) {
        return Ok(());
    }
    match fs::remove_dir_all(staging) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(e),
        _ => {}
    }
    fs::create_dir_all(staging)?;
    common::durable::replace_durably(&staging.join(DESCRIPTOR_FILE), descriptor)?;
    if let Some(parent) = staging.parent() {
        common::durable::sync_dir(parent)?;
    }
    Ok(())
}

/// The files still to fetch into `staging`, in order, and the offset to start the first at (what
/// an earlier attempt staged of it). A later file partly there (a torn tail) starts over.
fn plan_fetch(staging: &Path, files: &[SnapshotFile]) -> io::Result<(Vec<SnapshotFile>, u64)> {
    let (mut plan, mut offset) = (Vec::new(), 0);
    for file in files {
        let path = staging.join(&file.name);
        let have = fs::metadata(&path).map_or(0, |m| m.len());
        if have == file.len {
            continue;
        }
        if have > file.len || (have > 0 && !plan.is_empty()) {
            fs::remove_file(&path)?;
        } else if plan.is_empty() {
            offset = have;
        }
        plan.push(file.clone());
    }
    Ok((plan, offset))
}

/// The staged files whose length or CRC32 is not the descriptor's.
fn check_files(staging: &Path, files: &[SnapshotFile]) -> io::Result<Vec<String>> {
    let mut wrong = Vec::new();
    for file in files {
        match file_crc(&staging.join(&file.name)) {
            Ok(sum) if sum == (file.len, file.crc32) => {}
            Ok(_) => wrong.push(file.name.clone()),
            Err(e) if e.kind() == io::ErrorKind::NotFound => wrong.push(file.name.clone()),
            Err(e) => return Err(e),
        }
    }
    Ok(wrong)
}

/// Syncs the staged files and writes the mark that they are whole.
fn mark_complete(staging: &Path, names: &[String]) -> io::Result<()> {
    for name in names {
        File::open(staging.join(name))?.sync_all()?;
    }
    common::durable::replace_durably(&staging.join(COMPLETE_FILE), b"")?;
    common::durable::sync_dir(staging)
}

#[cfg(test)]
mod tests {
    use super::*;
    use engine::{Deletion, FileEntry, Tombstone};

    fn descriptor() -> Descriptor {
        let manifest = Manifest {
            checkpoint: 42,
            next_sequence: 9,
            files: vec![
                FileEntry {
                    time_slot: 0,
                    sequence: 3,
                    checkpoint: 40,
                },
                FileEntry {
                    time_slot: 7,
                    sequence: 8,
                    checkpoint: 42,
                },
            ],
            tombstones: vec![Tombstone::Series {
                device: "root.sg.d1".into(),
                measurement: "s1".into(),
                index: 41,
                deletion: Deletion {
                    metadata_version: 5,
                    operation_id: 6,
                },
            }],
            delete_operations: vec![(40, 77)],
            fence_floor: 0,
        };
        let files = manifest
            .files
            .iter()
            .enumerate()
            .map(|(i, f)| SnapshotFile {
                name: f.file_name(),
                len: 100 + i as u64,
                crc32: 0xdead_0000 + i as u32,
            })
            .collect();
        Descriptor {
            source: 3,
            region: 11,
            manifest,
            files,
        }
    }

    #[test]
    fn a_descriptor_round_trips_and_refuses_damage() {
        let d = descriptor();
        let bytes = d.encode();
        assert!(Descriptor::is_streamed(&bytes));
        assert_eq!(Descriptor::decode(&bytes).unwrap(), d);
        assert_eq!(d.index(), 42);
        assert_eq!(d.bytes(), 201);
        for at in [8, bytes.len() / 2, bytes.len() - 5] {
            let mut bad = bytes.clone();
            bad[at] ^= 1;
            assert!(Descriptor::decode(&bad).is_err(), "flip at {at}");
        }
        assert!(Descriptor::decode(&bytes[..bytes.len() - 1]).is_err());
    }

    #[test]
    fn a_descriptor_names_only_its_manifests_plain_files() {
        let mut d = descriptor();
        d.files[1].name = "../../etc/passwd".into();
        assert!(Descriptor::decode(&d.encode()).is_err());
        let mut d = descriptor();
        d.files.pop();
        assert!(Descriptor::decode(&d.encode()).is_err());
        assert!(!is_plain_file_name(".."));
        assert!(!is_plain_file_name("a/b"));
        assert!(is_plain_file_name("7-0000000000000008.fps"));
    }

    /// Peers that answer nothing: the throttle test sends no request.
    struct NoPeers;

    fn no_peers() -> common::Status {
        common::Status::new(common::StatusCode::CanNotConnectDatanode, "no peers")
    }

    #[tonic::async_trait]
    impl crate::peers::PeerRpc for NoPeers {
        async fn forward_region_write(
            &self,
            _: &str,
            _: u64,
            _: &engine::RegionCommand,
        ) -> common::Status {
            no_peers()
        }
        async fn read_region(
            &self,
            _: &str,
            _: &crate::region_read::RegionRead,
        ) -> Result<Vec<crate::region_read::RegionSeries>, common::Status> {
            Err(no_peers())
        }
        async fn aggregate_region(
            &self,
            _: &str,
            _: &crate::region_read::RegionAggregate,
        ) -> Result<Vec<crate::region_read::RegionPartials>, common::Status> {
            Err(no_peers())
        }
        async fn relay_insert(&self, _: &str, _: &common::Tablet) -> common::Status {
            no_peers()
        }
        async fn relay_series_types(
            &self,
            _: &str,
            _: &str,
            _: &[String],
        ) -> Result<Vec<(String, common::DataType)>, common::Status> {
            Err(no_peers())
        }
        async fn relay_delete_data(
            &self,
            _: &str,
            _: &[common::SeriesPath],
            _: i64,
            _: i64,
        ) -> common::Status {
            no_peers()
        }
        async fn relay_table_insert(
            &self,
            _: &str,
            _: &str,
            _: &common::Tablet,
            _: &[common::table::Category],
        ) -> common::Status {
            no_peers()
        }
    }

    #[tokio::test(start_paused = true)]
    async fn sends_are_paced_by_the_node_wide_rate_and_pin_the_log_for_a_while() {
        let peers = Arc::new(Peers::new(1, Default::default(), Box::new(NoPeers)));
        let config = TransferConfig {
            chunk_bytes: 1 << 20,
            send_bytes_per_sec: 1 << 20,
            receives_max: 1,
            keep: Duration::from_secs(30),
        };
        let transfers = SnapshotTransfers::new(1, PathBuf::from("/nonexistent"), config, peers);
        let started = tokio::time::Instant::now();
        for _ in 0..3 {
            transfers.before_send(7, 42, 1 << 20).await;
        }
        // The first MiB goes at once, each next one a second later.
        assert_eq!(started.elapsed().as_secs(), 2);
        assert_eq!(
            transfers.metrics().sent_bytes.load(Ordering::Relaxed),
            3 << 20
        );
        assert_eq!(transfers.transfer_pin(7), Some(42));
        assert_eq!(transfers.transfer_pin(8), None);
        // Two replicas fetching two snapshots of one region: the log stays for the older.
        transfers.before_send(7, 40, 1).await;
        assert_eq!(transfers.transfer_pin(7), Some(40));
    }

    #[test]
    fn a_fetch_resumes_the_first_unfinished_file_and_restarts_later_partial_ones() {
        let dir = tempfile::tempdir().unwrap();
        let file = |name: &str, len| SnapshotFile {
            name: name.into(),
            len,
            crc32: 0,
        };
        let files = [file("a", 10), file("b", 20), file("c", 5)];
        let stage = |name: &str, len: usize| fs::write(dir.path().join(name), vec![7u8; len]);
        stage("a", 10).unwrap();
        stage("b", 7).unwrap();
        stage("c", 3).unwrap();
        let (plan, offset) = plan_fetch(dir.path(), &files).unwrap();
        assert_eq!(plan, [file("b", 20), file("c", 5)]);
        assert_eq!(offset, 7, "b continues where it stopped");
        assert!(!dir.path().join("c").exists(), "c starts over");

        stage("a", 12).unwrap();
        let (plan, offset) = plan_fetch(dir.path(), &files).unwrap();
        assert_eq!(
            (plan.len(), offset),
            (3, 0),
            "a file longer than its length starts over"
        );
        assert!(!dir.path().join("a").exists());

        for (name, len) in [("a", 10), ("b", 20), ("c", 5)] {
            stage(name, len).unwrap();
        }
        assert!(plan_fetch(dir.path(), &files).unwrap().0.is_empty());
        let wrong = check_files(dir.path(), &files).unwrap();
        assert_eq!(wrong, ["a", "b", "c"], "lengths match, CRCs do not");
    }

    #[test]
    fn staging_resumes_its_own_descriptor_and_restarts_for_another() {
        let dir = tempfile::tempdir().unwrap();
        let staging = staging_dir(dir.path());
        prepare_staging(&staging, b"one").unwrap();
        fs::write(staging.join("f"), b"partial").unwrap();
        prepare_staging(&staging, b"one").unwrap();
        assert!(
            staging.join("f").exists(),
            "a download of the same snapshot resumes"
        );
        assert!(!is_staged(dir.path(), b"one"));
        mark_complete(&staging, &["f".into()]).unwrap();
        assert!(is_staged(dir.path(), b"one"));
        assert!(!is_staged(dir.path(), b"two"));
        prepare_staging(&staging, b"two").unwrap();
        assert!(
            !staging.join("f").exists(),
            "another snapshot starts afresh"
        );
        assert!(!is_staged(dir.path(), b"two"));
        remove_staging(dir.path()).unwrap();
        assert!(!staging.exists());
    }
}
