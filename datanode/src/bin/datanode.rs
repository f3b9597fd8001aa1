//! The `datanode` binary: parse the config, set up tracing, run until Ctrl-C / SIGTERM.

use clap::Parser;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .init();
    // Every connection and file is a descriptor: the soft limit a shell or systemd gives (often
    // 1024) is raised to the hard one before anything is opened; `run` checks the limits fit.
    match common::process::raise_open_files_limit() {
        Ok(limit) => tracing::info!(soft = limit.soft, hard = limit.hard, "open-files limit"),
        Err(e) => tracing::warn!("raising the open-files limit: {e}"),
    }
    // With the feature `failpoints`, failpoints named in the `FAILPOINTS` env var
    // (`name=action;...`) are armed before anything runs; the metrics server changes them later
    // (`PUT` / `DELETE /fail/<name>`).
    #[cfg(feature = "failpoints")]
    let _failpoints = fail::FailScenario::setup();
    let config = datanode::DataNodeConfig::from_args(datanode::DataNodeArgs::parse())?;
    config.node.tune_allocator();
    let shutdown = async {
        let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
            .expect("installing the SIGTERM handler");
        tokio::select! {
            _ = tokio::signal::ctrl_c() => {}
            _ = term.recv() => {}
        }
        tracing::info!("shutting down");
    };
    datanode::run(config, shutdown).await?;
    Ok(())
}
