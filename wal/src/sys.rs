//! Thin wrappers over the system calls the log needs, with the failpoints that tests use to
//! inject I/O failures.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::io::AsRawFd;
use std::path::Path;

/// Alignment of buffer addresses, file offsets and write lengths under `O_DIRECT`
/// ([`crate::direct`]).
pub const ALIGN: usize = 4096;

/// Maximum number of iovecs handed to one pwritev(2); Linux's IOV_MAX.
const IOV_MAX: usize = 1024;

/// Evaluates failpoint `name` for a file under `path`. The failpoint fires when it is configured
/// as `return` with no argument, or as `return(S)` where `S` is a substring of `path`; the
/// argument lets a test aim at one log while other tests in the same binary keep writing.
#[cfg(feature = "failpoints")]
fn failpoint_fires(name: &str, path: &Path) -> bool {
    match fail::eval(name, |arg| arg) {
        None => false,
        Some(None) => true,
        Some(Some(arg)) => arg.is_empty() || path.to_string_lossy().contains(arg.as_str()),
    }
}

#[cfg(not(feature = "failpoints"))]
fn failpoint_fires(_name: &str, _path: &Path) -> bool {
    false
}

fn injected(name: &str) -> io::Error {
    io::Error::other(format!("injected failure at failpoint {name}"))
}

/// Opens `path` with `options`. Failpoint `wal::open` fails with `EMFILE`, as a process out of
/// descriptors does, before anything is created.
pub(crate) fn open(options: &OpenOptions, path: &Path) -> io::Result<File> {
    if failpoint_fires("wal::open", path) {
        return Err(io::Error::from_raw_os_error(libc::EMFILE));
    }
    options.open(path)
}

/// fdatasync(2) of `file` at `path`. Failpoint `wal::fsync`.
pub(crate) fn fdatasync(file: &File, path: &Path) -> io::Result<()> {
    if failpoint_fires("wal::fsync", path) {
        return Err(injected("wal::fsync"));
    }
    file.sync_data()
}

/// fsync(2) of a directory, which makes created, renamed and removed names in it durable.
/// Failpoint `wal::fsync` (the same as for data, so one switch fails every durability point).
pub(crate) fn fsync_dir(dir: &File, path: &Path) -> io::Result<()> {
    if failpoint_fires("wal::fsync", path) {
        return Err(injected("wal::fsync"));
    }
    dir.sync_all()
}

/// An empty iovec, for initialising arrays.
pub(crate) const EMPTY_IOVEC: libc::iovec = libc::iovec {
    iov_base: std::ptr::null_mut(),
    iov_len: 0,
};

/// Writes every byte described by `iov` at `offset`, with as few pwritev(2) calls as the kernel
/// allows (one, unless more than IOV_MAX pieces or a short write). `iov` is consumed: it is
/// advanced past what was written.
///
/// Failpoints: `wal::write` fails before writing anything; `wal::write_partial` writes the first
/// half of the bytes and then fails, leaving a torn record on disk as a crash mid-write would.
///
/// # Safety
/// Every iovec must describe memory that is valid for reads for the duration of the call.
pub(crate) unsafe fn pwritev_all(
    file: &File,
    path: &Path,
    mut iov: &mut [libc::iovec],
    mut offset: u64,
) -> io::Result<()> {
    if failpoint_fires("wal::write", path) {
        return Err(injected("wal::write"));
    }
    let mut stop_after: Option<usize> = None;
    if failpoint_fires("wal::write_partial", path) {
        let total: usize = iov.iter().map(|v| v.iov_len).sum();
        stop_after = Some(total / 2);
    }
    let fd = file.as_raw_fd();
    loop {
        while let Some(first) = iov.first() {
            if first.iov_len != 0 {
                break;
            }
            iov = &mut iov[1..];
        }
        if iov.is_empty() {
            return Ok(());
        }
        if let Some(limit) = stop_after {
            // Write at most `limit` more bytes, then report the injected failure.
            let mut left = limit;
            for v in iov.iter() {
                let n = v.iov_len.min(left);
                if n > 0 {
                    // SAFETY: the caller guarantees the iovec memory is readable.
                    let bytes = std::slice::from_raw_parts(v.iov_base as *const u8, n);
                    std::os::unix::fs::FileExt::write_all_at(file, bytes, offset)?;
                    offset += n as u64;
                }
                left -= n;
                if left == 0 {
                    break;
                }
            }
            return Err(injected("wal::write_partial"));
        }
        let count = iov.len().min(IOV_MAX);
        let offset_arg = libc::off_t::try_from(offset)
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "offset overflows off_t"))?;
        // SAFETY: `iov[..count]` are initialised iovecs over readable memory (caller's contract);
        // the kernel only reads them.
        let written = libc::pwritev(fd, iov.as_ptr(), count as libc::c_int, offset_arg);
        if written < 0 {
            let err = io::Error::last_os_error();
            if err.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(err);
        }
        if written == 0 {
            return Err(io::Error::new(
                io::ErrorKind::WriteZero,
                "pwritev wrote no bytes",
            ));
        }
        let mut written = written as usize;
        offset += written as u64;
        while written > 0 {
            let first = &mut iov[0];
            if written >= first.iov_len {
                written -= first.iov_len;
                iov = &mut iov[1..];
            } else {
                // SAFETY: `written < iov_len`, so the advanced pointer stays inside the buffer.
                first.iov_base = (first.iov_base as *mut u8).add(written) as *mut libc::c_void;
                first.iov_len -= written;
                written = 0;
            }
        }
    }
}

/// Writes `bytes` at `offset` through a descriptor opened with `O_DIRECT` (`bytes`, its address
/// and `offset` aligned to [`ALIGN`]).
///
/// Failpoints as for [`pwritev_all`]: `wal::write` fails before writing anything;
/// `wal::write_partial` writes the whole blocks of the first half of `bytes`, then fails.
pub(crate) fn pwrite_direct(file: &File, path: &Path, bytes: &[u8], offset: u64) -> io::Result<()> {
    use std::os::unix::fs::FileExt;
    if failpoint_fires("wal::write", path) {
        return Err(injected("wal::write"));
    }
    if failpoint_fires("wal::write_partial", path) {
        let half = bytes.len() / 2 / ALIGN * ALIGN;
        file.write_all_at(&bytes[..half], offset)?;
        return Err(injected("wal::write_partial"));
    }
    file.write_all_at(bytes, offset)
}

/// Writes `len` zero bytes at `offset`.
pub(crate) fn write_zeroes(file: &File, mut offset: u64, len: u64) -> io::Result<()> {
    use std::os::unix::fs::FileExt;
    const CHUNK: usize = 64 * 1024;
    let zeroes = vec![0u8; CHUNK.min(len as usize)];
    let end = offset + len;
    while offset < end {
        let n = ((end - offset) as usize).min(CHUNK);
        file.write_all_at(&zeroes[..n], offset)?;
        offset += n as u64;
    }
    Ok(())
}

/// Makes `file` at least `len` bytes long with allocated blocks (fallocate(2)), so later writes do
/// not change the file size and fdatasync need not write inode metadata. Falls back to a sparse
/// extension where the filesystem cannot preallocate.
pub(crate) fn preallocate(file: &File, len: u64) -> io::Result<()> {
    let current = file.metadata()?.len();
    if current >= len {
        return Ok(());
    }
    let len_arg = libc::off_t::try_from(len)
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "length overflows off_t"))?;
    loop {
        // SAFETY: plain system call on an owned, open descriptor.
        let rc = unsafe { libc::fallocate(file.as_raw_fd(), 0, 0, len_arg) };
        if rc == 0 {
            return Ok(());
        }
        let err = io::Error::last_os_error();
        match err.raw_os_error() {
            Some(libc::EINTR) => continue,
            Some(libc::EOPNOTSUPP) | Some(libc::ENOSYS) => return file.set_len(len),
            _ => return Err(err),
        }
    }
}

/// Takes an exclusive, non-blocking flock(2) on `file`. Returns Ok(false) if someone else holds it.
pub(crate) fn try_lock_exclusive(file: &File) -> io::Result<bool> {
    loop {
        // SAFETY: plain system call on an owned, open descriptor.
        let rc = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
        if rc == 0 {
            return Ok(true);
        }
        let err = io::Error::last_os_error();
        match err.raw_os_error() {
            Some(libc::EINTR) => continue,
            Some(libc::EWOULDBLOCK) => return Ok(false),
            _ => return Err(err),
        }
    }
}
