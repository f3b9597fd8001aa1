//! The one way Fencepost replaces a small file so that a crash leaves the old or the new one,
//! whole: write a temporary sibling, fsync it, rename it over the target, fsync the directory;
//! and how much room a file system has for what is about to be written. The only file I/O in
//! `common`.

use std::fs::File;
use std::io::Write as _;
use std::path::{Path, PathBuf};

/// The temporary sibling [`replace_durably`] writes first: `<name>.tmp`.
pub fn temp_path(path: &Path) -> PathBuf {
    let mut name = path.file_name().unwrap_or_default().to_os_string();
    name.push(".tmp");
    path.with_file_name(name)
}

/// Replaces `path` with `bytes` atomically and durably (see the module comment).
pub fn replace_durably(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let dir = match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir,
        _ => Path::new("."),
    };
    let temp = temp_path(path);
    let mut file = File::create(&temp)?;
    file.write_all(bytes)?;
    file.sync_all()?;
    drop(file);
    std::fs::rename(&temp, path)?;
    sync_dir(dir)
}

/// fsyncs a directory so that renames and creations in it are durable.
pub fn sync_dir(dir: &Path) -> std::io::Result<()> {
    File::open(dir)?.sync_all()
}

/// Bytes available to an unprivileged writer on the file system holding `path`.
pub fn free_bytes(path: &Path) -> std::io::Result<u64> {
    use std::os::unix::ffi::OsStrExt as _;
    let c_path = std::ffi::CString::new(path.as_os_str().as_bytes())
        .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, e))?;
    // SAFETY: all-zero bytes are a valid `statvfs` (plain integers).
    let mut stat: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: `c_path` is a NUL-terminated string and `stat` a writable statvfs for the call.
    if unsafe { libc::statvfs(c_path.as_ptr(), &mut stat) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(stat.f_bavail as u64 * stat.f_frsize as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replaces_whole_and_leaves_no_temporary() {
        let dir = std::env::temp_dir().join(format!("fp-durable-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("identity");
        replace_durably(&path, b"1 2\n").unwrap();
        replace_durably(&path, b"3 4\n").unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"3 4\n");
        assert!(!temp_path(&path).exists());
        assert_eq!(temp_path(&path).file_name().unwrap(), "identity.tmp");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_missing_directory_is_an_error_not_a_panic() {
        let path = Path::new("/nonexistent-fencepost-dir/x");
        assert!(replace_durably(path, b"x").is_err());
    }
}
