#!/usr/bin/env bash
# IoTDB's official Python client (apache-iotdb 2.0.11 from PyPI, unmodified) against Fencepost's
# IoTDB client RPC: runs the acceptance suite tests/python/test_iotdb_client.py.
#
#   scripts/iotdb-client-tests.sh [UNITTEST ARGS]      e.g. test_iotdb_client.QueryTest.test_count
#   scripts/iotdb-client-tests.sh --venv-only          only create or update the virtualenv
#   scripts/iotdb-client-tests.sh --no-cluster [ARGS]  against DataNodes that already run, at
#                                                      $FENCEPOST_DN_HOSTS / $FENCEPOST_DN_PORTS
#
# 1. A virtualenv at $FENCEPOST_VENV (default target/iotdb-venv) holding apache-iotdb==2.0.11,
#    reinstalled when another version is there (pip needs PyPI the first time).
# 2. 1 ConfigNode + 3 DataNodes, replication 3, one-hour time partitions, under a fresh
#    `mktemp -d` base dir; binaries from $BIN_DIR (default target/release; build them with
#    `cargo build --release -p confignode -p datanode`). Waits until every DataNode holds its
#    lease (as scripts/quickstart.sh does) and its session port 6667-6669 accepts connections.
# 3. The suite with the virtualenv's python (`python -m unittest -v`), told the DataNodes through
#    FENCEPOST_DN_HOSTS=127.0.0.1 and FENCEPOST_DN_PORTS=6667,6668,6669.
# On exit the cluster is stopped and its base dir removed; if anything failed, the last 60 lines
# of every node's log are printed first. Exit status: non-zero when any test failed.
#
# Env: FENCEPOST_SUITE_TIMEOUT_S bounds the suite (default 600);
# FENCEPOST_CLIENT_TIMEOUT_MS is every client socket's timeout (default 60000).
set -euo pipefail
cd "$(dirname "$0")/.."

client_version=2.0.11
venv=${FENCEPOST_VENV:-target/iotdb-venv}
export BIN_DIR=${BIN_DIR:-target/release}
suite_timeout=${FENCEPOST_SUITE_TIMEOUT_S:-600}
datanodes=3
host=127.0.0.1
ports=$(seq -s, 6667 $((6666 + datanodes)))

mode=cluster
case "${1:-}" in
    --venv-only) mode=venv; shift ;;
    --no-cluster) mode=external; shift ;;
esac
[ $# -gt 0 ] || set -- test_iotdb_client

installed_version() {
    "$venv/bin/python" -c 'import importlib.metadata as m; print(m.version("apache-iotdb"))' 2>/dev/null || true
}

ensure_venv() {
    if [ ! -x "$venv/bin/python" ]; then
        echo "== creating the virtualenv $venv"
        python3 -m venv "$venv"
    fi
    local have
    have=$(installed_version)
    if [ "$have" != "$client_version" ]; then
        echo "== installing apache-iotdb==$client_version into $venv${have:+ (replacing $have)}"
        "$venv/bin/python" -m pip install --quiet --disable-pip-version-check "apache-iotdb==$client_version"
        have=$(installed_version)
        if [ "$have" != "$client_version" ]; then
            echo "apache-iotdb in $venv is '${have}', not $client_version" >&2
            exit 1
        fi
    fi
    echo "== $venv: apache-iotdb $have"
}

port_open() {
    # A TCP connect (and immediate close) through bash's /dev/tcp.
    (exec 3<>"/dev/tcp/$1/$2") 2>/dev/null
}

ensure_venv
[ "$mode" = venv ] && exit 0

base=""
cleanup() {
    local rc=$?
    trap - EXIT
    if [ -n "$base" ] && [ -d "$base" ]; then
        if [ "$rc" != 0 ]; then
            for log in "$base"/*.log; do
                [ -e "$log" ] || continue
                echo "== $log (last 60 lines)"
                tail -n 60 "$log"
            done
        fi
        scripts/cluster.sh stop -b "$base" || true
        rm -rf "$base"
    fi
    exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

if [ "$mode" = cluster ]; then
    for port in ${ports//,/ } 10710; do
        if port_open "$host" "$port"; then
            echo "port $port already accepts connections: stop the cluster that holds it first" >&2
            exit 1
        fi
    done
    base=$(mktemp -d /tmp/fencepost-iotdb-client.XXXXXX)
    echo "== starting 1 ConfigNode + $datanodes DataNodes, replication 3, under $base"
    CN_EXTRA_ARGS="--time-partition-interval-ms 3600000 ${CN_EXTRA_ARGS:-}" \
        scripts/cluster.sh start -c 1 -d "$datanodes" -r 3 -b "$base"

    echo "== waiting for every DataNode's lease and session port"
    ready=""
    for _ in $(seq 1 120); do
        status=$(scripts/cluster.sh status -b "$base")
        if grep -q "stopped" <<<"$status"; then
            echo "$status" >&2
            echo "a node exited during start-up" >&2
            exit 1
        fi
        if [ "$(grep -c "lease NORMAL" <<<"$status")" = "$datanodes" ]; then
            ready=yes
            for port in ${ports//,/ }; do
                port_open "$host" "$port" || { ready=""; break; }
            done
            [ -n "$ready" ] && break
        fi
        sleep 0.5
    done
    scripts/cluster.sh status -b "$base"
    if [ -z "$ready" ]; then
        echo "the cluster was not ready after 60 s" >&2
        exit 1
    fi
    export FENCEPOST_DN_HOSTS=$host FENCEPOST_DN_PORTS=$ports
fi

python=$(cd "$venv" && pwd)/bin/python
echo "== tests/python with $python against ${FENCEPOST_DN_HOSTS:-$host}:${FENCEPOST_DN_PORTS:-$ports}"
rc=0
(
    cd tests/python
    PYTHONDONTWRITEBYTECODE=1 timeout "$suite_timeout" "$python" -m unittest -v "$@"
) || rc=$?
if [ "$rc" = 124 ]; then
    echo "the suite did not finish within $suite_timeout s" >&2
fi
exit "$rc"
