//! Process control: start a binary inside a namespace, SIGSTOP / SIGCONT, kill -9, restart on the
//! same data directory, and a log file per process.
//!
//! `ip netns exec <ns> <binary>` enters the namespace and then *execs* the binary, so the child's
//! pid is the binary's own: kill -9 reaches the real process, not a wrapper. Each process leads
//! its own process group (killed whole on drop, also while a test panics) and gets SIGKILL from
//! the kernel if the test process dies first (`PR_SET_PDEATHSIG`).

use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use anyhow::{Context, Result};

/// One node process (running or not).
#[derive(Debug)]
pub struct NodeProcess {
    /// A human name, e.g. `datanode-2`.
    pub name: String,
    namespace: String,
    program: PathBuf,
    args: Vec<String>,
    env: Vec<(String, String)>,
    log: PathBuf,
    child: Option<Child>,
    stopped: bool,
    starts: u32,
}

fn signal(pid: i32, sig: libc::c_int) -> Result<()> {
    // SAFETY: kill has no memory-safety preconditions.
    if unsafe { libc::kill(pid, sig) } != 0 {
        return Err(std::io::Error::last_os_error()).context(format!("kill({pid}, {sig})"));
    }
    Ok(())
}

impl NodeProcess {
    /// A process to be started by [`NodeProcess::start`]; stdout and stderr go to `log`.
    pub fn new(
        name: &str,
        namespace: &str,
        program: &Path,
        args: Vec<String>,
        env: Vec<(String, String)>,
        log: PathBuf,
    ) -> NodeProcess {
        NodeProcess {
            name: name.into(),
            namespace: namespace.into(),
            program: program.into(),
            args,
            env,
            log,
            child: None,
            stopped: false,
            starts: 0,
        }
    }

    /// Starts the process (again, after a kill: same arguments, same data directory).
    pub fn start(&mut self) -> Result<()> {
        assert!(self.child.is_none(), "{} is already running", self.name);
        self.starts += 1;
        let mut log = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log)
            .with_context(|| format!("opening {}", self.log.display()))?;
        writeln!(
            log,
            "===== harness: start #{} of {}: ip netns exec {} {} {}",
            self.starts,
            self.name,
            self.namespace,
            self.program.display(),
            self.args.join(" ")
        )?;
        let mut command = Command::new("ip");
        command
            .args(["netns", "exec", &self.namespace])
            .arg(&self.program)
            .args(&self.args)
            .envs(self.env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log)
            .process_group(0);
        // SAFETY: prctl is async-signal-safe; nothing else runs between fork and exec.
        unsafe {
            command.pre_exec(|| {
                if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let child = command
            .spawn()
            .with_context(|| format!("starting {}", self.name))?;
        self.child = Some(child);
        self.stopped = false;
        Ok(())
    }

    /// The pid while running.
    pub fn pid(&self) -> Option<i32> {
        self.child.as_ref().map(|c| c.id() as i32)
    }

    /// Whether the process was started and has not exited.
    pub fn is_running(&mut self) -> bool {
        match self.child.as_mut().map(|c| c.try_wait()) {
            Some(Ok(None)) => true,
            Some(Ok(Some(status))) => {
                eprintln!("harness: {} exited: {status}", self.name);
                self.child = None;
                false
            }
            Some(Err(_)) | None => false,
        }
    }

    /// kill -9 and reap. The data directory stays as the crash left it.
    pub fn kill9(&mut self) -> Result<()> {
        let Some(mut child) = self.child.take() else {
            return Ok(());
        };
        let pid = child.id() as i32;
        // The whole group: the binary leads it.
        signal(-pid, libc::SIGKILL).or_else(|_| signal(pid, libc::SIGKILL))?;
        child.wait().context("reaping")?;
        self.stopped = false;
        self.log_line("killed with SIGKILL");
        Ok(())
    }

    /// SIGSTOP: the process freezes (a long GC pause or a hung VM).
    pub fn pause(&mut self) -> Result<()> {
        let pid = self.pid().context("not running")?;
        signal(pid, libc::SIGSTOP)?;
        self.stopped = true;
        self.log_line("SIGSTOP");
        Ok(())
    }

    /// SIGCONT.
    pub fn resume(&mut self) -> Result<()> {
        let pid = self.pid().context("not running")?;
        signal(pid, libc::SIGCONT)?;
        self.stopped = false;
        self.log_line("SIGCONT");
        Ok(())
    }

    /// Whether the process is SIGSTOPped by the harness.
    pub fn is_paused(&self) -> bool {
        self.stopped
    }

    /// Appends a harness line to the log, so faults are visible next to the node's own output.
    pub fn log_line(&self, line: &str) {
        if let Ok(mut f) = OpenOptions::new().append(true).open(&self.log) {
            // A log line is best effort: the log is for humans.
            let _ignored = writeln!(f, "===== harness: {} {line}", self.name);
        }
    }

    /// The log file.
    pub fn log_path(&self) -> &Path {
        &self.log
    }

    /// The last `bytes` bytes of the log.
    pub fn log_tail(&self, bytes: u64) -> String {
        let Ok(mut f) = File::open(&self.log) else {
            return String::new();
        };
        let len = f.metadata().map(|m| m.len()).unwrap_or(0);
        if f.seek(SeekFrom::Start(len.saturating_sub(bytes))).is_err() {
            return String::new();
        }
        let mut buf = Vec::new();
        if f.read_to_end(&mut buf).is_err() {
            return String::new();
        }
        String::from_utf8_lossy(&buf).into_owned()
    }
}

impl Drop for NodeProcess {
    fn drop(&mut self) {
        if let Err(e) = self.kill9() {
            eprintln!("harness: stopping {}: {e:#}", self.name);
        }
    }
}
