//! `fencepost bench`: writes generated tablets as fast as the cluster takes them, one
//! [`Session`] per client over every endpoint, and reports throughput, tablet latency, and
//! errors and retries by status code. The points come from [`fencepost_cli::loadgen`], shared
//! with the peer loader, so the figures compare like with like.

use std::collections::BTreeMap;

use common::Tablet;
use fencepost_cli::loadgen::{self, LoadArgs, Sink, WriteFailure};
use session::{Session, SessionConfig};

/// Flags of `fencepost bench` (see [`LoadArgs`] for the load itself).
#[derive(clap::Args, Debug)]
pub struct BenchArgs {
    #[command(flatten)]
    pub load: LoadArgs,
}

/// One client: its own session (own connections) over all endpoints.
struct SessionSink {
    session: Session,
}

fn failure(e: &session::SessionError) -> WriteFailure {
    WriteFailure {
        code: e
            .code()
            .map_or_else(|| "other".to_string(), |c| c.to_string()),
        message: e.to_string(),
    }
}

impl Sink for SessionSink {
    async fn write(&mut self, tablet: &Tablet) -> Result<(), WriteFailure> {
        self.session
            .insert_tablet(tablet)
            .await
            .map_err(|e| failure(&e))
    }

    fn retries_by_code(&self) -> BTreeMap<String, u64> {
        let stats = self.session.stats();
        let mut retries: BTreeMap<String, u64> = stats
            .retries_by_code
            .iter()
            .map(|(code, n)| (code.to_string(), *n))
            .collect();
        for (class, n) in [
            ("connection", stats.connection_retries),
            ("timeout", stats.timeout_retries),
        ] {
            if n > 0 {
                retries.insert(class.to_string(), n);
            }
        }
        retries
    }
}

async fn connect(endpoints: &[String]) -> anyhow::Result<Session> {
    let endpoints: Vec<&str> = endpoints.iter().map(String::as_str).collect();
    Ok(Session::connect(&endpoints, SessionConfig::default()).await?)
}

/// Runs the benchmark; the exit code is 1 when any tablet failed.
pub async fn run(endpoints: &[String], json: bool, args: BenchArgs) -> anyhow::Result<u8> {
    let spec = args.load.to_spec(loadgen::now_ms())?;
    let admin = connect(endpoints).await?;
    if let Err(e) = admin.create_database(&spec.database).await {
        // 507 "already exists" is the expected answer on a second run.
        anyhow::ensure!(
            e.to_string().contains("already exists"),
            "CREATE DATABASE {}: {e}",
            spec.database
        );
    }
    drop(admin);
    let report = loadgen::drive("fencepost", spec, |_client| async move {
        Ok(SessionSink {
            session: connect(endpoints).await?,
        })
    })
    .await?;
    if json {
        println!("{}", serde_json::to_string(&report)?);
    } else {
        print!("{}", report.to_text());
    }
    Ok(u8::from(report.errors > 0))
}
