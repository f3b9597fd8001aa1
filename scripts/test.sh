#!/usr/bin/env bash
# The whole test suite: formatting, lints, then every crate's unit, property, simulation, crash and
# failpoint tests. This is the README's test command and what .ci/run calls. Extra arguments go to
# `cargo test`.
set -euo pipefail
cd "$(dirname "$0")/.."

# The benches package is linted without features: `fail/failpoints` (which the failpoint tests
# turn on) changes what the `fail_point!` macro expands to inside raft-engine, a bench-only
# dependency, and raft-engine does not compile that way.
echo "== cargo fmt --check"
cargo fmt --all -- --check

echo "== cargo clippy (all targets, warnings are errors)"
cargo clippy --workspace --all-targets -- -D warnings
cargo clippy --workspace --exclude fencepost-benches --all-targets --all-features -- -D warnings

# The fault suite (fencepost-tests) starts the real binaries from the target dir: build them with
# the test profile and features the test run uses, so nothing is compiled twice.
echo "== binaries for the real-process fault suite"
cargo build --profile test --workspace --exclude fencepost-benches --all-features --bins

echo "== cargo test (with failpoints)"
cargo test --workspace --exclude fencepost-benches --all-features "$@"
