//! Running the `fencepost` binary and reading what it printed.

use std::process::Stdio;

use serde_json::Value;
use tokio::io::AsyncWriteExt;
use tokio::process::Command;

/// What one run of the binary left behind.
#[derive(Debug)]
pub struct Run {
    /// The exit status (`None`: killed by a signal).
    pub code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
}

impl Run {
    /// Every stdout line as a JSON object; panics (with the output) on a line that is not one.
    pub fn json(&self) -> Vec<Value> {
        self.stdout
            .lines()
            .map(|line| {
                let value: Value = serde_json::from_str(line)
                    .unwrap_or_else(|e| panic!("not JSON ({e}): {line:?}\n{self:?}"));
                assert!(value.is_object(), "not an object: {line}");
                value
            })
            .collect()
    }

    /// The only JSON object printed.
    pub fn one(&self) -> Value {
        let mut objects = self.json();
        assert_eq!(objects.len(), 1, "{self:?}");
        objects.remove(0)
    }

    /// Asserts the exit status, showing the output when it differs.
    pub fn assert_exit(&self, code: i32) -> &Run {
        assert_eq!(self.code, Some(code), "{self:?}");
        self
    }
}

/// Runs `fencepost args...`, feeding `stdin` (or nothing: stdin is then empty), and waits for it
/// within the test deadline.
pub async fn fencepost(args: &[&str], stdin: Option<&str>) -> Run {
    let mut child = Command::new(env!("CARGO_BIN_EXE_fencepost"))
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("the fencepost binary starts");
    let mut input = child.stdin.take().expect("piped stdin");
    if let Some(text) = stdin {
        input
            .write_all(text.as_bytes())
            .await
            .expect("stdin takes the input");
    }
    drop(input);
    let output = tokio::time::timeout(testkit::DEADLINE, child.wait_with_output())
        .await
        .unwrap_or_else(|_| {
            panic!(
                "fencepost {args:?} did not finish in {:?}",
                testkit::DEADLINE
            )
        })
        .expect("fencepost runs");
    let run = Run {
        code: output.status.code(),
        stdout: String::from_utf8(output.stdout).expect("UTF-8 stdout"),
        stderr: String::from_utf8(output.stderr).expect("UTF-8 stderr"),
    };
    if std::env::var_os(ECHO_VARIABLE).is_some() {
        eprintln!(
            "$ fencepost {args:?}\n{}{}exit {:?}\n",
            run.stdout, run.stderr, run.code
        );
    }
    run
}

/// Set this variable (and pass `--nocapture`) to see every run's output.
pub const ECHO_VARIABLE: &str = "FENCEPOST_TEST_ECHO";

/// `--endpoints <all> [--json] -e <sql>`.
pub async fn sql(endpoints: &str, json: bool, statements: &str) -> Run {
    let mut args = vec!["--endpoints", endpoints];
    if json {
        args.push("--json");
    }
    args.extend(["-e", statements]);
    fencepost(&args, None).await
}

/// The status of a JSON statement object.
pub fn status(object: &Value) -> i64 {
    object["status"]
        .as_i64()
        .unwrap_or_else(|| panic!("no status in {object}"))
}

/// The rows of a JSON statement object, asserting it succeeded.
pub fn rows(object: &Value) -> Vec<Value> {
    assert_eq!(status(object), 200, "{object}");
    object["rows"]
        .as_array()
        .unwrap_or_else(|| panic!("no rows in {object}"))
        .clone()
}
