//! Process-wide settings a node binary applies once at start: the open-files limit.
//!
//! Every client connection, internal connection, raft log segment and sealed file a node holds
//! is a descriptor. The soft `RLIMIT_NOFILE` a shell or systemd hands a process is often 1024,
//! far below what the connection limits allow (REVIEW N4): a client flood then exhausts
//! descriptors and files fail to open. A node raises its soft limit to the hard limit at start
//! ([`raise_open_files_limit`]) and checks its configured limits against the result.

/// A process's `RLIMIT_NOFILE`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OpenFilesLimit {
    /// The limit in force.
    pub soft: u64,
    /// How far an unprivileged process may raise it.
    pub hard: u64,
}

/// The open-files limit in force.
pub fn open_files_limit() -> std::io::Result<OpenFilesLimit> {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: `limit` is a writable rlimit for the call.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    // `rlim_t` is `u64` here, not on every target.
    #[allow(clippy::unnecessary_cast)]
    Ok(OpenFilesLimit {
        soft: limit.rlim_cur as u64,
        hard: limit.rlim_max as u64,
    })
}

/// Raises the soft open-files limit to the hard one; returns the limit in force afterwards.
/// Process-wide: a node binary calls it once, before it opens anything; in-process test
/// clusters leave the test process alone.
pub fn raise_open_files_limit() -> std::io::Result<OpenFilesLimit> {
    let before = open_files_limit()?;
    if before.soft >= before.hard {
        return Ok(before);
    }
    let raised = libc::rlimit {
        rlim_cur: before.hard as libc::rlim_t,
        rlim_max: before.hard as libc::rlim_t,
    };
    // SAFETY: `raised` is a valid rlimit; raising the soft limit up to the hard one needs no
    // privilege.
    if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &raised) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    open_files_limit()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_limit_is_read() {
        let limit = open_files_limit().unwrap();
        assert!(limit.soft > 0 && limit.soft <= limit.hard, "{limit:?}");
    }
}
