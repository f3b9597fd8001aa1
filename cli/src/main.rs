//! `fencepost`: IoTDB's SQL subset against a Fencepost cluster (`-e`, `-f` or an interactive
//! REPL), `fencepost bench` (a load generator) and `fencepost verify` (replica digests).

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use clap::{Parser, Subcommand};
use session::SessionConfig;

mod bench;
mod exec;
mod output;
mod pager;
mod repl;
mod verify;

/// Largest `-f` file read, in bytes.
const SCRIPT_BYTES_MAX: u64 = 256 << 20;

#[derive(Parser, Debug)]
#[command(name = "fencepost", version, about)]
pub struct Cli {
    /// DataNode session endpoints, comma separated; the session retries on the others.
    #[arg(
        long,
        global = true,
        value_delimiter = ',',
        default_value = "127.0.0.1:6667"
    )]
    pub endpoints: Vec<String>,
    /// The user to log in as (IoTDB's `-u`).
    #[arg(short = 'u', long = "user", global = true, default_value = "root")]
    pub user: String,
    /// Its password (IoTDB's `-pw`).
    #[arg(long = "password", global = true, default_value = "root")]
    pub password: String,
    /// One JSON object per statement (or one report) on its own line.
    #[arg(long, global = true)]
    pub json: bool,
    /// Attempts per session call, the first included (1..=10000); retries go to another DataNode.
    #[arg(long, global = true, default_value_t = SessionConfig::default().max_attempts)]
    pub max_attempts: u32,
    /// Deadline of one request to a DataNode, in milliseconds (1..=600000).
    #[arg(long, global = true, default_value_t = SessionConfig::default().request_timeout_ms)]
    pub timeout_ms: u64,
    /// Statements to run, separated by `;`.
    #[arg(short = 'e', long = "execute", conflicts_with = "file")]
    pub execute: Option<String>,
    /// A file of statements to run, separated by `;`.
    #[arg(short = 'f', long = "file")]
    pub file: Option<PathBuf>,
    /// Rows of one table: a query's rows come a page at a time and are shown this many to a
    /// table; at a terminal the CLI then waits for ENTER (IoTDB's `max_display_num`).
    #[arg(long, default_value_t = pager::MAX_DISPLAY_DEFAULT, value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
    pub max_display: u64,
    #[command(subcommand)]
    pub command: Option<Command>,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Write generated tablets as fast as the cluster takes them and report throughput and latency.
    Bench(bench::BenchArgs),
    /// Compare the digests of every region's replicas at a common applied index.
    Verify(verify::VerifyArgs),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(r) => r,
        Err(e) => {
            eprintln!("fencepost: cannot start the runtime: {e}");
            return ExitCode::from(2);
        }
    };
    let config = SessionConfig {
        username: cli.user.clone(),
        password: cli.password.clone(),
        max_attempts: cli.max_attempts,
        request_timeout_ms: cli.timeout_ms,
        ..SessionConfig::default()
    };
    let outcome = runtime.block_on(async {
        match cli.command {
            Some(Command::Bench(args)) => bench::run(&cli.endpoints, cli.json, args).await,
            Some(Command::Verify(args)) => {
                verify::run(&cli.endpoints, cli.json, config, args).await
            }
            None => {
                let script = Script {
                    execute: cli.execute,
                    file: cli.file,
                    max_display: cli.max_display as usize,
                };
                sql(&cli.endpoints, cli.json, config, script).await
            }
        }
    });
    match outcome {
        Ok(code) => ExitCode::from(code),
        Err(e) => {
            eprintln!("fencepost: {e:#}");
            ExitCode::from(2)
        }
    }
}

/// The SQL front end: `-e`, `-f` or the REPL over stdin. 0 when every statement succeeded, 1
/// when any failed; an unusable input or no reachable DataNode is an error (exit 2).
/// What the SQL front end runs, and how it shows rows.
struct Script {
    execute: Option<String>,
    file: Option<PathBuf>,
    max_display: usize,
}

async fn sql(
    endpoints: &[String],
    json: bool,
    config: SessionConfig,
    Script {
        execute,
        file,
        max_display,
    }: Script,
) -> anyhow::Result<u8> {
    let script = match (execute, file) {
        (Some(text), _) => Some(text),
        (None, Some(path)) => Some(read_script(&path)?),
        (None, None) => None,
    };
    let session = exec::connect(endpoints, config).await?;
    let format = if json {
        output::Format::Json
    } else {
        output::Format::Table
    };
    // Only statements typed at a terminal wait for ENTER between tables.
    let pause = script.is_none() && repl::stdin_is_terminal();
    let mut runner = repl::Runner::new(&session, format).paging(max_display, pause);
    match script {
        Some(text) => {
            runner.run_text(&text, sql::Position::START).await?;
        }
        None => {
            let stdin = tokio::io::BufReader::new(tokio::io::stdin());
            repl::interactive(&mut runner, stdin, repl::stdin_is_terminal()).await?;
        }
    }
    Ok(u8::from(runner.failed()))
}

fn read_script(path: &std::path::Path) -> anyhow::Result<String> {
    let bytes = std::fs::metadata(path)
        .with_context(|| format!("cannot read {}", path.display()))?
        .len();
    anyhow::ensure!(
        bytes <= SCRIPT_BYTES_MAX,
        "{} is {bytes} bytes, over the limit of {SCRIPT_BYTES_MAX}",
        path.display()
    );
    std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))
}
