#!/usr/bin/env bash
# A local Fencepost cluster on 127.0.0.1: N ConfigNodes and M DataNodes with distinct ports, data,
# logs and pids under a base directory.
#
#   scripts/cluster.sh start  [-c N] [-d M] [-r REPLICATION] [-b BASE_DIR]
#   scripts/cluster.sh status [-b BASE_DIR]
#   scripts/cluster.sh stop   [-b BASE_DIR]
#
# Ports: ConfigNode i (1-based) 10709+i, its metrics 9199+i; DataNode j (1-based) session 6666+j,
# internal 10729+j, metrics 9099+j. Binaries come from $BIN_DIR (default target/release; build
# them with `cargo build --release -p confignode -p datanode`). Extra flags for every ConfigNode
# or DataNode: $CN_EXTRA_ARGS, $DN_EXTRA_ARGS (e.g. "--time-partition-interval-ms 3600000").
set -euo pipefail
cd "$(dirname "$0")/.."

command=${1:-}
shift || true
confignodes=1
datanodes=3
replication=1
base=${FENCEPOST_BASE:-/tmp/fencepost-cluster}
while getopts "c:d:r:b:" opt; do
    case "$opt" in
        c) confignodes=$OPTARG ;;
        d) datanodes=$OPTARG ;;
        r) replication=$OPTARG ;;
        b) base=$OPTARG ;;
        *) echo "usage: $0 start|status|stop [-c N] [-d M] [-r R] [-b DIR]" >&2; exit 2 ;;
    esac
done
bin=${BIN_DIR:-target/release}

alive() { [ -f "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null; }

start() {
    if [ "$confignodes" != 1 ] && [ "$confignodes" != 3 ]; then
        echo "ConfigNodes: 1 or 3" >&2; exit 2
    fi
    if [ "$replication" -gt "$datanodes" ]; then
        echo "replication $replication needs at least as many DataNodes (have $datanodes)" >&2; exit 2
    fi
    for b in confignode datanode; do
        [ -x "$bin/$b" ] || { echo "$bin/$b is missing: cargo build --release -p confignode -p datanode" >&2; exit 1; }
    done
    mkdir -p "$base"
    echo "$confignodes $datanodes" > "$base/topology"
    members=""
    seeds=""
    for i in $(seq 1 "$confignodes"); do
        members+="${members:+,}$i@127.0.0.1:$((10709 + i))"
        seeds+="${seeds:+,}127.0.0.1:$((10709 + i))"
    done
    for i in $(seq 1 "$confignodes"); do
        pid="$base/cn$i.pid"
        if alive "$pid"; then echo "ConfigNode $i already runs (pid $(cat "$pid"))"; continue; fi
        # shellcheck disable=SC2086
        "$bin/confignode" --cn-node-id "$i" --cn-internal-address "127.0.0.1:$((10709 + i))" \
            --cn-initial-members "$members" --cn-data-dir "$base/cn$i" \
            --cn-metrics-address "127.0.0.1:$((9199 + i))" \
            --data-replication-factor "$replication" ${CN_EXTRA_ARGS:-} \
            > "$base/cn$i.log" 2>&1 &
        echo $! > "$pid"
        echo "ConfigNode $i: 127.0.0.1:$((10709 + i)) (pid $!, log $base/cn$i.log)"
    done
    for j in $(seq 1 "$datanodes"); do
        pid="$base/dn$j.pid"
        if alive "$pid"; then echo "DataNode $j already runs (pid $(cat "$pid"))"; continue; fi
        # shellcheck disable=SC2086
        "$bin/datanode" --dn-rpc-address "127.0.0.1:$((6666 + j))" \
            --dn-internal-address "127.0.0.1:$((10729 + j))" \
            --dn-metrics-address "127.0.0.1:$((9099 + j))" \
            --dn-seed-config-nodes "$seeds" --dn-data-dir "$base/dn$j" ${DN_EXTRA_ARGS:-} \
            > "$base/dn$j.log" 2>&1 &
        echo $! > "$pid"
        echo "DataNode $j: session 127.0.0.1:$((6666 + j)) (pid $!, log $base/dn$j.log)"
    done
}

fetch_metrics() {
    # The /metrics page of a local port: curl when present, else bash's /dev/tcp.
    local port=$1
    if command -v curl >/dev/null; then
        curl -s --max-time 2 "http://127.0.0.1:$port/metrics" || true
    else
        (
            exec 3<>"/dev/tcp/127.0.0.1/$port" || exit 0
            printf 'GET /metrics HTTP/1.0\r\n\r\n' >&3
            timeout 2 cat <&3
        ) 2>/dev/null || true
    fi
}

metric() {
    # Prints one metric of a DataNode's /metrics page, or "?" when unreachable.
    local port=$1 name=$2
    fetch_metrics "$port" | tr -d '\r' | awk -v n="$name" '$1 == n {print $2; found=1} END {if (!found) print "?"}'
}

status() {
    [ -d "$base" ] || { echo "no cluster under $base"; exit 0; }
    for pid in "$base"/cn*.pid "$base"/dn*.pid; do
        [ -e "$pid" ] || continue
        name=$(basename "$pid" .pid)
        if alive "$pid"; then state="running (pid $(cat "$pid"))"; else state="stopped"; fi
        case "$name" in
            dn*)
                j=${name#dn}
                port=$((9099 + j))
                if alive "$pid"; then
                    states=(NORMAL NEED_CLEAR CACHE_CLEARING CACHE_CLEARED PULLING PULL_FAILED)
                    s=$(metric "$port" metadata_lease_state)
                    [ "$s" != "?" ] && s=${states[$s]}
                    state+=", session 127.0.0.1:$((6666 + j)), lease $s, heartbeat age $(metric "$port" metadata_lease_heartbeat_age_ms) ms, regions $(metric "$port" regions_hosted)"
                fi
                echo "DataNode ${j}: $state" ;;
            cn*) echo "ConfigNode ${name#cn}: $state, 127.0.0.1:$((10709 + ${name#cn}))" ;;
        esac
    done
}

stop() {
    [ -d "$base" ] || { echo "no cluster under $base"; exit 0; }
    # DataNodes first, so they do not fence themselves against a vanished ConfigNode mid-write.
    for pid in "$base"/dn*.pid "$base"/cn*.pid; do
        [ -e "$pid" ] || continue
        if alive "$pid"; then
            kill "$(cat "$pid")"
            for _ in $(seq 1 50); do alive "$pid" || break; sleep 0.1; done
            if alive "$pid"; then kill -9 "$(cat "$pid")"; fi
            echo "stopped $(basename "$pid" .pid)"
        fi
        rm -f "$pid"
    done
}

case "$command" in
    start) start ;;
    status) status ;;
    stop) stop ;;
    *) echo "usage: $0 start|status|stop [-c N] [-d M] [-r R] [-b DIR]" >&2; exit 2 ;;
esac
