#!/usr/bin/env bash
# The whole test suite: formatting, lints, every crate's unit, property, simulation, crash and
# failpoint tests, the real-process fault suite, then IoTDB's official Python client against a
# local cluster. This is the README's test command and what .ci/run calls. Extra arguments go to
# `cargo test` (and then the Python suite is skipped: a partial run).
#
# On a fresh machine it installs what the tests need: as root, iproute2 and nftables for the fault
# suite (without them, and without root, the fault scenarios skip loudly; under CI=true they fail);
# and a virtualenv with apache-iotdb 2.0.11 from PyPI (scripts/iotdb-client-tests.sh).
set -euo pipefail
cd "$(dirname "$0")/.."

need=()
command -v ip >/dev/null 2>&1 || need+=(iproute2)
command -v nft >/dev/null 2>&1 || need+=(nftables)
if [ ${#need[@]} -gt 0 ]; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
        echo "== installing ${need[*]}"
        apt-get update -qq
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}"
    else
        echo "== WARNING: ${need[*]} missing and not root: the fault scenarios will skip" >&2
    fi
fi

# The benches package is linted without features: `fail/failpoints` (which the failpoint tests
# turn on) changes what the `fail_point!` macro expands to inside raft-engine, a bench-only
# dependency, and raft-engine does not compile that way.
echo "== cargo fmt --check"
cargo fmt --all -- --check

# The layering ARCHITECTURE.md states, held by Cargo: each crate below may not depend (normal
# dependencies, transitively) on the crates named after it.
echo "== dependency rules"
forbid() {
    local crate=$1; shift
    local deps
    deps=$(cargo tree -p "$crate" -e normal --prefix none --format '{p}' | awk '{print $1}' | sort -u)
    for banned in "$@"; do
        if grep -qx "$banned" <<<"$deps"; then
            echo "dependency rule broken: $crate depends on $banned" >&2
            exit 1
        fi
    done
}
io_free=(tokio tonic prost hyper proto runtime)
forbid common "${io_free[@]}" wal memtable engine consensus
forbid codec "${io_free[@]}" wal memtable engine consensus
forbid thrift-codec "${io_free[@]}" common wal memtable engine consensus
forbid iotdb-rpc "${io_free[@]}" wal memtable engine consensus datanode
forbid sql "${io_free[@]}" wal memtable engine consensus datanode confignode session
forbid wal "${io_free[@]}" common memtable engine consensus
forbid memtable "${io_free[@]}" wal engine consensus
forbid engine "${io_free[@]}" consensus datanode
forbid consensus engine datanode confignode proto runtime
forbid session datanode confignode engine consensus runtime wal memtable
forbid datanode sim
forbid confignode sim

echo "== cargo clippy (all targets, warnings are errors)"
cargo clippy --workspace --all-targets -- -D warnings
cargo clippy --workspace --exclude fencepost-benches --all-targets --all-features -- -D warnings

# The fault suite (fencepost-tests) starts the real binaries from the target dir: build them with
# the test profile and features the test run uses, so nothing is compiled twice.
echo "== binaries for the real-process fault suite"
cargo build --profile test --workspace --exclude fencepost-benches --all-features --bins

# The official Python client: its virtualenv first, for the fault scenario that writes through a
# cut-off DataNode with it (FENCEPOST_IOTDB_PYTHON), then its own suite below.
echo "== the official Python client's virtualenv"
bash scripts/iotdb-client-tests.sh --venv-only
FENCEPOST_IOTDB_PYTHON="$(pwd)/${FENCEPOST_VENV:-target/iotdb-venv}/bin/python"
export FENCEPOST_IOTDB_PYTHON

# The fault scenarios refuse to start without FENCEPOST_MIN_FREE_GIB free: say what is left.
echo "== disk after the build"
df -h . "${TMPDIR:-/tmp}" || true

echo "== cargo test (with failpoints)"
cargo test --workspace --exclude fencepost-benches --all-features "$@"

# The official client against the binaries built above (debug, with the test features: the
# same code paths as release, slower).
if [ $# -eq 0 ]; then
    echo "== IoTDB's Python client (apache-iotdb 2.0.11) against 1 ConfigNode + 3 DataNodes"
    BIN_DIR=target/debug bash scripts/iotdb-client-tests.sh
fi
