//! Exit status 2 without a cluster: nothing listens, or the command line is wrong.

use crate::harness::fencepost;

/// A loopback port nobody listens on (bound, then released).
async fn closed_port() -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let address = listener.local_addr().expect("address").to_string();
    drop(listener);
    address
}

#[tokio::test]
async fn an_unreachable_endpoint_exits_2() {
    let endpoint = closed_port().await;
    for json in [false, true] {
        let mut args = vec!["--endpoints", endpoint.as_str(), "-e", "SHOW DATABASES"];
        if json {
            args.push("--json");
        }
        let run = fencepost(&args, None).await;
        run.assert_exit(2);
        assert!(run.stderr.contains("cannot connect"), "{run:?}");
        assert!(run.stdout.is_empty(), "{run:?}");
    }
    let run = fencepost(
        &["--endpoints", &endpoint, "verify", "--timeout-s", "1"],
        None,
    )
    .await;
    run.assert_exit(2);
}

#[tokio::test]
async fn usage_errors_exit_2() {
    let endpoint = closed_port().await;
    for args in [
        vec![
            "--endpoints",
            endpoint.as_str(),
            "-e",
            "SHOW DATABASES",
            "-f",
            "x.sql",
        ],
        vec!["--endpoints", "no-port", "-e", "SHOW DATABASES"],
        vec![
            "--endpoints",
            endpoint.as_str(),
            "--max-attempts",
            "0",
            "-e",
            "SHOW DATABASES",
        ],
        vec![
            "--endpoints",
            endpoint.as_str(),
            "-f",
            "/nonexistent/fencepost.sql",
        ],
        vec!["--bogus-flag"],
        vec!["verify", "--timeout-s", "0"],
    ] {
        fencepost(&args, None).await.assert_exit(2);
    }
}
