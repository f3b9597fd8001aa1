#!/usr/bin/env bash
# Benchmarks.
#
#   scripts/bench.sh --micro [criterion args]    criterion component benches: WAL vs raft-engine,
#                                                memtable, storage engine with the lease gate on/off
#   scripts/bench.sh --e2e [--duration-s N] [--sweep] [--profile] [--no-record] [--no-build]
#   scripts/bench.sh --storage [--points N] [--no-record] [--no-build]
#   scripts/bench.sh --soak [--duration-s 1800] [--ttl-ms 300000] [--no-record] [--no-build]
#   scripts/bench.sh --protocols [--duration-s 20] [--no-record] [--no-build]
#   scripts/bench.sh --hostile [--connections 10000] [--hold-s 36] [--wide-rows 100000] [--no-record] [--no-build]
#   scripts/bench.sh --query [--hosts 1000] [--days 3] [--runs 50] [--no-rf3] [--no-record] [--no-build]
#
# --query: the queries people store time series for (issue 40), TSBS's devops use case. The same
# points (`--hosts` × 10 DOUBLE metrics, a 2-decimal random walk every 10 s for `--days` days,
# from 2023-11-15T00:00Z) go to Fencepost RF=1 (`fencepost bench`, then FLUSH and compaction
# settled), Fencepost RF=3, InfluxDB 1.x and VictoriaMetrics (`peerload --tag-devices`: one
# measurement `bench` with a tag `host`, as their users would write it), one system at a time.
# `querybench` (benches/src/bin/querybench.rs) then asks each query kind `--runs` times with
# random parameters from one client and records p50/p99: single-groupby-1-1-1, -1-1-12, -5-8-1,
# cpu-max-all-8, double-groupby-1, high-cpu-1, lastpoint, groupby-orderby-limit and a day of one
# series by the minute; the numbers of one seeded answer per kind are compared with Fencepost
# RF=1's. Prints one table and appends it to benches/RESULTS.md unless --no-record. The body is
# scripts/bench-query.sh.
#
# --hostile: what hostile clients do to one DataNode (issue 38). 1 ConfigNode + 1 DataNode (RF=1)
# are started from a subshell whose soft open-files limit is 1,024, as the issue's repro was (the
# nodes raise theirs to the hard limit at start). `hostile` (benches/src/bin/hostile/main.rs) then runs,
# against the real process, while a Thrift and a gRPC client each write a 10-row tablet every
# 10 ms: 5 s baseline; 32 connections announcing a 64 MiB openSession frame; 4 that send 4 bytes
# of a frame and go quiet; a flood of --connections that send one byte and hold --hold-s seconds,
# with a new Thrift and a new gRPC client logging in and writing during it; 2,000 DOUBLE
# measurements × --wide-rows rows written to root.hostile.wide and a `select * from` it over
# Thrift; 5 s after. One row per phase: the DataNode's RSS and descriptors (before / max / after,
# sampled every 200 ms), both victims' p50/p99/max write latency, and what happened; then every
# acknowledged row is read back. Appends the table and the DataNode's session-port counters to
# benches/RESULTS.md unless --no-record. The default run took 80 s after the build on the 2-core box.
#
# --protocols: what IoTDB's client RPC costs against gRPC (issue 19). 1 ConfigNode + 1 DataNode
# (RF=1) take the same generated points (100 devices × 10 DOUBLE measurements, 1000-row tablets,
# 4 clients, one database each) four ways, one after another: `fencepost bench` (gRPC session),
# `peerload --target iotdb` (the same tablets from Rust over Thrift, binary protocol) and IoTDB's
# official Python client (`scripts/iotdb_client_bench.py`: NumpyTablet, 4 threads, the virtualenv
# of scripts/iotdb-client-tests.sh), then the same through its TableSession (the table model: a
# TAG column and 10 FIELDs, one device per tablet). Prints points/s, the DataNode's CPU seconds per million
# points, and each against gRPC; appends the table to benches/RESULTS.md unless --no-record.
#
# --soak: 1 ConfigNode + 1 DataNode (RF=1) at half the ingest measured in its first 20 s, walk2dp
# values, age flushes every 60 s, compaction on, `SET TTL TO root.soak 300000` (5 min). The
# timestamps keep pace with the wall clock (start now, 1 ms rows, rate / 10000 devices of 10
# measurements: each series takes 1000 rows a second), so the TTL ages data as it would in
# production and the disk can level off. Prints the DataNode's open descriptors, RSS, sealed
# files (all, most per partition), compactions, TTL-expired points removed and data-dir MiB every
# minute, and appends the table to benches/RESULTS.md unless --no-record.
#
# --e2e: end-to-end ingest of the same generated points (fencepost_cli::loadgen: 100 devices × 10
# DOUBLE measurements, 1000-row tablets, 4 clients) into, one after another:
#   Fencepost 1 ConfigNode + 1 DataNode, RF=1   (ack after the raft log's fdatasync)
#   Fencepost 1 ConfigNode + 3 DataNodes, RF=3  (ack after fdatasync on a quorum)
#   InfluxDB 1.x, wal-fsync-delay = "0s"        (fsync per write request)
#   VictoriaMetrics single node                  (no fsync on the write path)
# Fencepost is driven by `fencepost bench`, the peers by `peerload` (InfluxDB line protocol on
# POST /write?precision=ms for both). For each run it records points/s, tablet latency, and the CPU
# seconds of every server process (utime + stime from /proc/<pid>/stat) per million points, and of
# the load generator. It prints one markdown table and appends it, with the machine's facts, to
# benches/RESULTS.md (unless --no-record). Default: 30 s per system, about 4 minutes in all after
# the build. --sweep adds 100/1000 rows × 1/4 clients for every system (10 s each, ~3 minutes);
# --profile records the RF=1 DataNode with `perf record -g` for 10 s mid-run and prints the top
# symbols; --no-build uses the binaries already built (see below). Installs influxdb and victoria-metrics with apt-get when they are missing (as root).
#
# --storage: bytes on disk per point (issue 17). For each value shape of the generator
# (`--values walk2dp`: a 2-decimal random walk, `noise`: full-precision noise, `steps`: a 2-decimal
# level that changes every 100 rows) and each row interval (1 s and 1 ms), the same N points
# (default 10 M: 100 devices × 10 DOUBLE measurements × N/1000 rows, timestamps from the fixed
# 1700000000000 ms so every run writes the same bytes) go to a fresh instance of each system,
# which is then settled and measured:
#   Fencepost 1 ConfigNode + 1 DataNode, RF=1 (`fencepost bench`). fencepost_settle flushes and
#     waits until no compaction is pending and the sealed bytes stop changing: there is no flush
#     command yet, so the DataNode runs with --memtable-flush-age-ms 2000, and with
#     --compaction-cold-after-ms 1000 so each partition ends as one file, as InfluxDB's shard
#     ends fully compacted.
#     Counted: the files under the bench database's regions/<id>/sealed/.
#   InfluxDB 1.x (peerload), with cache-snapshot-write-cold-duration and
#     compact-full-write-cold-duration at 1 s: the WAL is snapshotted to TSM and the shard fully
#     compacted once writes stop; waits until the WAL is empty and the TSM files are stable.
#     Counted: the *.tsm files under data/.
#   VictoriaMetrics (peerload), then /internal/force_flush and
#     /internal/force_merge?partition_prefix=<the data's month>; waits until the size is stable.
#     Counted: data/ (the parts; its indexdb/ is in the whole-dir figure).
#   TsFile, IoTDB's format: peerload --target file dumps the same tablets, and
#     scripts/tsfile_write.py writes them with Apache's `tsfile` wheel (a virtualenv under the
#     bench's temp dir; pip install tsfile) using the library's default encodings (TS_2DIFF time,
#     GORILLA DOUBLE, LZ4), tree model, non-aligned, then reads the file back to check it.
#     Counted: the file. If the wheel cannot be installed or used, its column says n/a and why.
# Bytes are apparent sizes (the sum of st_size) and points are the non-null values written. It
# prints one table (B/pt per system, Fencepost / best peer, Fencepost / TsFile) and a second with
# each system's whole data directory (Fencepost's raft log, InfluxDB's WAL and index,
# VictoriaMetrics' indexdb), and appends both with the machine's facts to benches/RESULTS.md
# unless --no-record. --points 200000 took 4 minutes and 2000000 4.5 minutes on the 2-core box
# (mostly fixed settle waits); 10 M is estimated at 10–15 minutes after the build.
#
# Binaries come from $CARGO_TARGET_DIR/release (default target/release). Every process it starts is
# stopped on exit. Not run by CI.
set -euo pipefail
cd "$(dirname "$0")/.."

mode=${1:---micro}
case "$mode" in
    --micro | --e2e | --storage | --soak | --protocols | --hostile | --query) shift || true ;;
    *) echo "usage: scripts/bench.sh --micro [criterion args] | --e2e [--duration-s N] [--sweep] [--profile] [--no-record] [--no-build] | --storage [--points N] [--no-record] [--no-build] | --soak [--duration-s N] [--ttl-ms N] [--no-record] [--no-build] | --protocols [--duration-s N] [--no-record] [--no-build] | --hostile [--connections N] [--hold-s N] [--wide-rows N] [--no-record] [--no-build] | --query [--hosts N] [--days N] [--runs N] [--no-rf3] [--no-record] [--no-build]" >&2; exit 2 ;;
esac

tmp=$(mktemp -d "${TMPDIR:-/tmp}/fencepost-bench.XXXXXX")
started_pids=()   # peers started by this script
cluster_bases=()  # Fencepost clusters started by this script
cleanup() {
    local base pid
    for base in "${cluster_bases[@]}"; do
        scripts/cluster.sh stop -b "$base" >/dev/null 2>&1 || true
    done
    for pid in "${started_pids[@]}"; do
        if kill -0 "$pid" 2>/dev/null; then
            kill "$pid" 2>/dev/null || true
            for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
            kill -9 "$pid" 2>/dev/null || true
        fi
    done
    rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

machine_facts() {
    echo "$(nproc) cores, $(free -g | awk '/Mem:/ {print $2}') GiB, Linux $(uname -r)"
}

if [ "$mode" = --micro ]; then
    echo "== machine: $(machine_facts)"
    echo "== disk: sequential write with fdatasync (256 MiB)"
    dd if=/dev/zero of="$tmp/dd" bs=1M count=256 conv=fdatasync 2>&1 | tail -n 1
    rm -f "$tmp/dd"
    sync
    sleep 2
    echo "== criterion benches"
    cargo bench -p fencepost-benches -- "$@"
    exit 0
fi

# ---------------------------------------------------------------------------------------------
# Shared by --e2e and --storage.

# Ports of the peers (the Fencepost cluster uses cluster.sh's: 6667+, 10710+, 10730+, 9100+).
influx_port=18086
vm_port=18428
bin=${CARGO_TARGET_DIR:-target}/release
export BIN_DIR=$bin # for cluster.sh

# A port already taken would have the loaders measure someone else's server.
require_free_ports() {
    local port
    for port in "$@"; do
        if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
            echo "port $port on 127.0.0.1 is in use; stop what listens there first" >&2
            exit 1
        fi
    done
}

install_peers() {
    echo "== installing what is missing"
    if ! command -v influxd >/dev/null || ! command -v victoria-metrics >/dev/null; then
        apt-get update -qq
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq influxdb victoria-metrics >/dev/null
    fi
    command -v curl >/dev/null || DEBIAN_FRONTEND=noninteractive apt-get install -y -qq curl >/dev/null
}

# start_rf1_cluster BASE: 1 ConfigNode + 1 DataNode (RF=1) under BASE (with $DN_EXTRA_ARGS), once
# it takes a first write (the script exits if it does not within 60 s).
start_rf1_cluster() {
    local base=$1 ready=0
    cluster_bases+=("$base")
    scripts/cluster.sh start -c 1 -d 1 -r 1 -b "$base" > /dev/null
    for _ in $(seq 1 60); do
        if timeout 20 "$bin/fencepost" bench --database root.warmup --devices 1 --measurements 1 \
            --rows-per-tablet 1 --clients 1 --tablets 1 > /dev/null 2>&1; then
            ready=1; break
        fi
        sleep 1
    done
    if [ $ready = 0 ]; then
        echo "the cluster did not take a write within 60 s; logs under $base" >&2
        tail -n 20 "$base"/*.log >&2
        exit 1
    fi
}

json_field() { # file key → the number after "key":
    sed -E "s/.*\"$2\":(-?[0-9.eE+-]+).*/\\1/" "$1"
}

wait_http() { # URL expected-status
    for _ in $(seq 1 100); do
        if [ "$(curl -s -o /dev/null -w '%{http_code}' "$1" 2>/dev/null)" = "$2" ]; then return 0; fi
        sleep 0.2
    done
    echo "   $1 did not answer $2 within 20 s" >&2
    return 1
}

# influx_config DIR [LINES]: DIR/influxdb.conf for an influxd on $influx_port with its meta, data
# and WAL under DIR; LINES are added to the [data] section.
influx_config() {
    local dir=$1 extra=${2:-}
    mkdir -p "$dir"
    cat > "$dir/influxdb.conf" <<EOF
reporting-disabled = true
bind-address = "127.0.0.1:$((influx_port + 2))"
[meta]
  dir = "$dir/meta"
[data]
  dir = "$dir/data"
  wal-dir = "$dir/wal"
  wal-fsync-delay = "0s"
  query-log-enabled = false
$extra
[retention]
  enabled = false
[shard-precreation]
  enabled = false
[monitor]
  store-enabled = false
[http]
  enabled = true
  bind-address = "127.0.0.1:$influx_port"
  log-enabled = false
[subscriber]
  enabled = false
[continuous_queries]
  enabled = false
[logging]
  level = "warn"
EOF
}

# start_settling_influxdb DIR: an influxd with its files under DIR that snapshots its cache to TSM
# and compacts the shard fully once it has had no write for 1 s; its pid in $peer_pid.
start_settling_influxdb() {
    local dir=$1
    influx_config "$dir" '  cache-snapshot-write-cold-duration = "1s"
  compact-full-write-cold-duration = "1s"'
    influxd run -config "$dir/influxdb.conf" > "$dir/influxd.log" 2>&1 &
    peer_pid=$!
    started_pids+=("$peer_pid")
    wait_http "http://127.0.0.1:$influx_port/ping" 204
}

# start_victoriametrics DIR: a VictoriaMetrics with its storage under DIR; its pid in $peer_pid.
start_victoriametrics() {
    local dir=$1
    mkdir -p "$dir"
    victoria-metrics -storageDataPath "$dir/storage" -httpListenAddr "127.0.0.1:$vm_port" \
        -retentionPeriod 100y -loggerLevel ERROR > "$dir/vm.log" 2>&1 &
    peer_pid=$!
    started_pids+=("$peer_pid")
    wait_http "http://127.0.0.1:$vm_port/health" 200
}

# --query: TSBS devops queries (see the header); its body is its own file.
if [ "$mode" = --query ]; then
    # shellcheck source=scripts/bench-query.sh
    source scripts/bench-query.sh
fi

# ---------------------------------------------------------------------------------------------
# --protocols: gRPC vs IoTDB's client RPC (see the header).
if [ "$mode" = --protocols ]; then
    duration=20 record=1 build=1
    while [ $# -gt 0 ]; do
        case "$1" in
            --duration-s) duration=$2; shift 2 ;;
            --no-record) record=0; shift ;;
            --no-build) build=0; shift ;;
            *) echo "unknown flag $1" >&2; exit 2 ;;
        esac
    done
    require_free_ports 6667 10710 10730 9100 9200
    if [ $build = 1 ]; then
        echo "== building release binaries"
        cargo build --release -q -p confignode -p datanode -p fencepost-cli
        # Separate: `--bin peerload` would filter the targets of the other packages too.
        cargo build --release -q -p fencepost-benches --bin peerload
    fi
    bash scripts/iotdb-client-tests.sh --venv-only
    python=${FENCEPOST_VENV:-target/iotdb-venv}/bin/python
    base="$tmp/protocols"
    start_rf1_cluster "$base"
    dn_pid=$(cat "$base/dn1.pid")
    cpu_s() { awk '{printf "%.2f", ($14 + $15) / 100}' "/proc/$1/stat"; }
    echo "== machine: $(machine_facts), load average $(cut -d' ' -f1-3 /proc/loadavg)"
    table="$tmp/protocols.md"
    {
        echo "| client | protocol | points/s | vs gRPC | DataNode CPU s / M points | errors |"
        echo "|---|---|---|---|---|---|"
    } > "$table"
    grpc=""
    run_one() { # name protocol command...
        local name=$1 protocol=$2; shift 2
        local before after points pps ratio cpu
        before=$(cpu_s "$dn_pid")
        "$@" > "$tmp/$name.json" 2> "$tmp/$name.log" || true
        after=$(cpu_s "$dn_pid")
        points=$(json_field "$tmp/$name.json" points)
        pps=$(json_field "$tmp/$name.json" points_per_s)
        [ -n "$grpc" ] || grpc=$pps
        ratio=$(awk -v a="$pps" -v b="$grpc" 'BEGIN {printf "%.3f", a / b}')
        cpu=$(awk -v a="$after" -v b="$before" -v p="$points" 'BEGIN {printf "%.3f", (a - b) / (p / 1e6)}')
        echo "| $name | $protocol | $(printf '%.0f' "$pps") | ${ratio}× | $cpu | $(json_field "$tmp/$name.json" errors) |" | tee -a "$table"
    }
    cat "$table"
    run_one "fencepost bench" "gRPC (protobuf)" \
        "$bin/fencepost" bench --database root.grpc --duration-s "$duration" --json
    run_one "peerload --target iotdb (Rust)" "Thrift binary" \
        "$bin/peerload" --target iotdb --address 127.0.0.1:6667 --database root.thrift \
        --duration-s "$duration" --json
    run_one "apache-iotdb 2.0.11 (Python)" "Thrift binary" \
        "$python" scripts/iotdb_client_bench.py --database root.python --duration-s "$duration"
    run_one "apache-iotdb 2.0.11 TableSession (Python)" "Thrift binary, table model" \
        "$python" scripts/iotdb_client_bench.py --database root.pytable --table \
        --duration-s "$duration"
    if [ $record = 1 ]; then
        {
            echo
            echo "## $(date -u +%Y-%m-%d) protocols, RF=1, $duration s each"
            echo
            echo "$(machine_facts); 100 devices × 10 DOUBLE, 1000-row tablets, 4 clients."
            echo
            cat "$table"
        } >> benches/RESULTS.md
        echo "== appended to benches/RESULTS.md"
    fi
    exit 0
fi

# ---------------------------------------------------------------------------------------------
# --hostile: hostile clients against one DataNode (see the header).
if [ "$mode" = --hostile ]; then
    connections=10000 hold_s=36 wide_rows=100000 record=1 build=1
    while [ $# -gt 0 ]; do
        case "$1" in
            --connections) connections=$2; shift 2 ;;
            --hold-s) hold_s=$2; shift 2 ;;
            --wide-rows) wide_rows=$2; shift 2 ;;
            --no-record) record=0; shift ;;
            --no-build) build=0; shift ;;
            *) echo "unknown flag $1" >&2; exit 2 ;;
        esac
    done
    command_line="scripts/bench.sh --hostile --connections $connections --hold-s $hold_s --wide-rows $wide_rows"
    require_free_ports 6667 10710 10730 9100 9200
    if [ $build = 1 ]; then
        echo "== building release binaries"
        cargo build --release -q -p confignode -p datanode -p fencepost-cli
        # Separate: `--bin hostile` would filter the targets of the other packages too.
        cargo build --release -q -p fencepost-benches --bin hostile
    fi
    base="$tmp/hostile"
    # Registered here: the subshell's own registration is lost with it.
    cluster_bases+=("$base")
    # As the issue's repro: a shell with the usual soft limit of 1,024 descriptors.
    (ulimit -Sn 1024 && start_rf1_cluster "$base")
    dn_pid=$(cat "$base/dn1.pid")
    nofile=$(awk '/Max open files/ {print $4 " soft, " $5 " hard"}' "/proc/$dn_pid/limits")
    echo "== machine: $(machine_facts), load average $(cut -d' ' -f1-3 /proc/loadavg)"
    echo "== DataNode pid $dn_pid, started with a soft open-files limit of 1024; in force: $nofile"
    rc=0
    "$bin/hostile" --address 127.0.0.1:6667 --pid "$dn_pid" --connections "$connections" \
        --hold-s "$hold_s" --wide-rows "$wide_rows" | tee "$tmp/hostile.md" || rc=$?
    counters=$(curl -s --max-time 2 http://127.0.0.1:9100/metrics \
        | grep -E '^(session_|query_results_)' | sed 's/^/    /' || true)
    echo "== the DataNode's session-port counters afterwards:"
    echo "$counters"
    if [ $rc = 2 ]; then
        echo "hostile failed (exit 2, see above); nothing recorded; logs under $base" >&2
        exit 1
    fi
    [ $rc = 0 ] || echo "   some acknowledged rows did not read back (exit $rc)" >&2
    if [ $record = 1 ]; then
        {
            echo
            echo "## $(date -u +%Y-%m-%d) hostile clients against one DataNode, RF=1 (issue 38)"
            echo
            echo "\`$command_line\` — $(machine_facts). The cluster was started from a shell with a"
            echo "soft open-files limit of 1024; the DataNode's in force: $nofile. Victims: a Thrift"
            echo "client and a gRPC session, each a 10 rows × 10 DOUBLE tablet every 10 ms to its own device."
            echo "RSS and descriptors are the DataNode's, sampled every 200 ms; latencies are of the calls"
            echo "that started within the phase."
            echo
            cat "$tmp/hostile.md"
            echo
            echo "The DataNode's counters afterwards:"
            echo
            echo '```'
            echo "$counters" | sed 's/^    //'
            echo '```'
        } >> benches/RESULTS.md
        echo "== appended to benches/RESULTS.md"
    fi
    exit "$rc"
fi

# ---------------------------------------------------------------------------------------------
# --storage: bytes on disk per point (see the header).
if [ "$mode" = --soak ]; then
    # A long run at half the measured maximum ingest: 1 ConfigNode + 1 DataNode (RF=1), age
    # flushes every minute, compaction on. Every minute it prints the DataNode's open
    # descriptors, RSS, sealed files (all, and the most in one partition) and the data dir's
    # bytes; after the first compactions all four should stay flat.
    duration=1800 record=1 build=1 soak_ttl_ms=300000
    while [ $# -gt 0 ]; do
        case "$1" in
            --duration-s) duration=$2; shift 2 ;;
            --ttl-ms) soak_ttl_ms=$2; shift 2 ;;
            --no-record) record=0; shift ;;
            --no-build) build=0; shift ;;
            *) echo "unknown flag $1" >&2; exit 2 ;;
        esac
    done
    require_free_ports 6667 10710 10730 9100 9200
    if [ $build = 1 ]; then
        echo "== building release binaries"
        cargo build --release -q -p confignode -p datanode -p fencepost-cli
    fi
    base="$tmp/soak"
    DN_EXTRA_ARGS="--memtable-flush-age-ms 60000" start_rf1_cluster "$base"
    echo "== machine: $(machine_facts), load average $(cut -d' ' -f1-3 /proc/loadavg)"
    echo "== measuring the maximum ingest (20 s)"
    "$bin/fencepost" bench --database root.soakmax --duration-s 20 --json > "$tmp/max.json" 2> /dev/null
    max=$(json_field "$tmp/max.json" points_per_s)
    # Devices so that each series takes 1000 rows (1 ms apart) a second: timestamps track the
    # wall clock. The rate is rounded down to whole devices.
    devices=$(awk -v m="$max" 'BEGIN {d = int(m / 2 / 10000); print (d < 1 ? 1 : d)}')
    rate=$((devices * 10000))
    echo "   maximum $(printf '%.0f' "$max") points/s; soaking at $rate points/s ($devices devices × 10 measurements, 1000 rows/s each) for $duration s"
    "$bin/fencepost" -e "CREATE DATABASE root.soak; SET TTL TO root.soak $soak_ttl_ms" > /dev/null
    "$bin/fencepost" bench --database root.soak --duration-s "$duration" --rate-pts-per-s "$rate" \
        --devices "$devices" --measurements 10 --start-time "$(date +%s%3N)" --step-ms 1 \
        --values walk2dp --json > "$tmp/soak.json" 2> "$tmp/soak.log" &
    loader=$!
    started_pids+=("$loader")
    dn_pid=$(cat "$base/dn1.pid")
    metric() { curl -s --max-time 2 http://127.0.0.1:9100/metrics | awk -v n="$1" '$1 == n {print $2}'; }
    table="$tmp/soak.md"
    {
        echo "| minute | open fds | RSS MiB | sealed files | most files / partition | compactions | TTL points removed | data dir MiB |"
        echo "|---|---|---|---|---|---|---|---|"
    } > "$table"
    cat "$table"
    minute=0
    while kill -0 "$loader" 2>/dev/null; do
        sleep 60
        minute=$((minute + 1))
        fds=$(ls "/proc/$dn_pid/fd" 2>/dev/null | wc -l)
        rss=$(awk '/VmRSS/ {printf "%d", $2 / 1024}' "/proc/$dn_pid/status" 2>/dev/null || echo "?")
        disk=$(du -sm "$base/dn1" 2>/dev/null | cut -f1)
        row="| $minute | $fds | $rss | $(metric sealed_files) | $(metric sealed_files_per_partition_max) | $(metric compactions_total) | $(metric ttl_expired_points_removed_total) | $disk |"
        echo "$row" | tee -a "$table"
    done
    wait "$loader" || echo "   the loader exited with an error; see $tmp/soak.log" >&2
    echo "   soak loader: $(json_field "$tmp/soak.json" points_per_s) points/s, errors $(json_field "$tmp/soak.json" errors)"
    if [ $record = 1 ]; then
        {
            echo
            echo "## $(date -u +%Y-%m-%d) soak, $duration s at $rate points/s (half of $(printf '%.0f' "$max"))"
            echo
            echo "$(machine_facts); flush age 60 s; compaction on (defaults); TTL $soak_ttl_ms ms; timestamps at wall-clock pace."
            echo
            cat "$table"
        } >> benches/RESULTS.md
        echo "== appended to benches/RESULTS.md"
    fi
    exit 0
fi

if [ "$mode" = --storage ]; then

points=10000000
record=1
build=1
while [ $# -gt 0 ]; do
    case "$1" in
        --points) points=$2; shift 2 ;;
        --no-record) record=0; shift ;;
        --no-build) build=0; shift ;;
        *) echo "unknown flag $1" >&2; exit 2 ;;
    esac
done
command_line="scripts/bench.sh --storage --points $points"
if [ $build = 0 ]; then command_line+=" --no-build"; fi

devices=100
measurements=10
series=$((devices * measurements))
if ! [[ $points =~ ^[0-9]+$ ]] || [ $((points % series)) != 0 ] || [ "$points" -lt $series ]; then
    echo "--points must be a positive multiple of $series ($devices devices × $measurements measurements)" >&2
    exit 2
fi
rows=$((points / series))
# Tablets of up to 1000 rows that tile every series' rows exactly.
rows_per_tablet=$((rows < 1000 ? rows : 1000))
while [ $((rows % rows_per_tablet)) != 0 ]; do rows_per_tablet=$((rows_per_tablet - 1)); done
tablets=$((devices * rows / rows_per_tablet))
# A fixed start (2023-11-14T22:13:20Z, in the past and inside one week and one month): every
# run writes the same timestamps, so the bytes are comparable from run to run.
start_ms=1700000000000
shapes=(walk2dp noise steps)
intervals_ms=(1000 1)
# No flush command exists yet: the DataNode flushes a region once its oldest unflushed write is
# this old (checked every second), which is what fencepost_settle waits out.
fencepost_flush_age_ms=2000
# A partition no flush touched for this long is merged into one file (the DataNode's
# compaction_cold_after_ms; InfluxDB's runs get compact-full-write-cold-duration 1 s alike).
fencepost_cold_after_ms=1000
# How long a size must hold still before it counts as settled, and how long to wait at most.
quiet_checks=5
settle_timeout_s=300

require_free_ports 6667 10710 10730 9100 9200 $influx_port $((influx_port + 2)) $vm_port
install_peers

load_before=$(cut -d' ' -f1-3 /proc/loadavg)
echo "== machine: $(machine_facts), load average $load_before"
echo "== $points points per run: $devices devices × $measurements DOUBLE measurements × $rows rows ($tablets tablets of $rows_per_tablet rows)"

if [ $build = 1 ]; then
    echo "== building release binaries"
    cargo build --release -q -p confignode -p datanode -p fencepost-cli
    # Separate: `--bin peerload` would filter the targets of the other packages too.
    cargo build --release -q -p fencepost-benches --bin peerload
fi

# The TsFile writer: Apache's `tsfile` wheel in a virtualenv of this run. Its column is n/a, with
# the reason, when it cannot be installed or imported.
echo "== TsFile writer: python3 -m venv + pip install tsfile"
tsfile_python=""
tsfile_why=""
tsfile_version=""
if ! python3 -m venv "$tmp/venv" > "$tmp/venv.log" 2>&1; then
    # Debian's python3 needs python3-venv for ensurepip.
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-venv >> "$tmp/venv.log" 2>&1 || true
    rm -rf "$tmp/venv"
    python3 -m venv "$tmp/venv" >> "$tmp/venv.log" 2>&1 || tsfile_why="python3 -m venv failed: $(tail -n 1 "$tmp/venv.log")"
fi
if [ -z "$tsfile_why" ]; then
    if ! "$tmp/venv/bin/pip" install -q --disable-pip-version-check tsfile >> "$tmp/venv.log" 2>&1; then
        tsfile_why="pip install tsfile failed: $(tail -n 1 "$tmp/venv.log")"
    elif ! "$tmp/venv/bin/python" -c 'import tsfile' >> "$tmp/venv.log" 2>&1; then
        tsfile_why="import tsfile failed: $(tail -n 1 "$tmp/venv.log")"
    else
        tsfile_python="$tmp/venv/bin/python"
        tsfile_version=$("$tmp/venv/bin/pip" show tsfile 2>/dev/null | awk '/^Version:/ {print $2}')
        echo "   tsfile $tsfile_version"
    fi
fi
[ -z "$tsfile_why" ] || echo "   TsFile will be n/a: $tsfile_why" >&2

influx_version=$(dpkg-query -W -f '${Version}' influxdb 2>/dev/null || echo "?")
vm_version=$(dpkg-query -W -f '${Version}' victoria-metrics 2>/dev/null || echo "?")

# Apparent bytes (sum of st_size) of the regular files under DIR matching the find predicates.
file_bytes() {
    local dir=$1; shift
    find "$dir" -type f "$@" -printf '%s\n' 2>/dev/null | awk '{s += $1} END {printf "%d\n", s}'
}

# wait_stable LABEL COMMAND...: runs COMMAND once a second until its output has not changed for
# $quiet_checks runs in a row and is not "busy…"; prints the last output. A COMMAND prints
# "busy …" while it knows the system is not done (a WAL not yet empty, rows not yet in parts).
wait_stable() {
    local label=$1; shift
    local last="" now quiet=0 waited=0
    while :; do
        now=$("$@")
        if [ "$now" = "$last" ] && [ "${now#busy}" = "$now" ]; then
            quiet=$((quiet + 1))
            [ $quiet -ge "$quiet_checks" ] && break
        else
            quiet=0
        fi
        last=$now
        if [ $waited -ge $settle_timeout_s ]; then
            echo "   $label: not settled after $settle_timeout_s s (last: $now); measured as is" >&2
            break
        fi
        sleep 1
        waited=$((waited + 1))
    done
    echo "$last"
}

# load NAME SHAPE INTERVAL LOADER ARGS...: one load of the run's points; leaves $tmp/NAME.json
# and fails the bench unless every point was acknowledged.
load() {
    local name=$1 shape=$2 interval=$3; shift 3
    "$@" --devices $devices --measurements $measurements --rows-per-tablet $rows_per_tablet \
        --tablets $tablets --start-time $start_ms --values "$shape" --interval-ms "$interval" \
        --json > "$tmp/$name.json" 2> "$tmp/$name.log" || true
    local written
    written=$(json_field "$tmp/$name.json" points 2>/dev/null || echo 0)
    if [ "$written" != "$points" ] || [ "$(json_field "$tmp/$name.json" errors)" != 0 ]; then
        echo "   $name: $written of $points points acknowledged:" >&2
        tail -n 20 "$tmp/$name.log" >&2
        exit 1
    fi
}

# Ids of the regions of DATABASE on the DataNode at 127.0.0.1:6667, one a line.
fencepost_regions() {
    "$bin/fencepost" --json -e "SHOW REGIONS" | python3 -c '
import json, sys
for row in json.load(sys.stdin)["rows"]:
    if row[2] == sys.argv[1]:
        print(row[0])' "$1"
}

# The compared figure: bytes of the sealed files of the regions listed in BASE/regions.txt.
fencepost_sealed_bytes() {
    local base=$1 total=0 id
    while read -r id; do
        total=$((total + $(file_bytes "$base/dn1/regions/$id/sealed")))
    done < "$base/regions.txt"
    echo "$total"
}

# fencepost_settle BASE: waits for Fencepost's flush and compaction. The DataNode was started
# with --memtable-flush-age-ms $fencepost_flush_age_ms and --compaction-cold-after-ms
# $fencepost_cold_after_ms, so this waits out that age (plus the one-second flush check) and the
# cold time, then one compaction round (5 s: the metric counts pending work once a round), then
# until no partition has work left and the sealed bytes stop changing.
fencepost_settle() {
    local base=$1 pending waited=0
    sleep $(((fencepost_flush_age_ms + fencepost_cold_after_ms) / 1000 + 2 + 6))
    while :; do
        pending=$(curl -s --max-time 2 http://127.0.0.1:9100/metrics \
            | awk '$1 == "compaction_pending_partitions" {print $2}')
        [ "${pending:-0}" = 0 ] && break
        [ $waited -ge $settle_timeout_s ] && { echo "   compaction still pending after ${waited} s" >&2; break; }
        sleep 1; waited=$((waited + 1))
    done
    wait_stable "Fencepost sealed files" fencepost_sealed_bytes "$base" > /dev/null
}

# Each storage_<system> NAME SHAPE INTERVAL writes the run's points to a fresh instance, settles
# it, and leaves "<compared bytes> <whole-dir bytes> <detail>" in $tmp/NAME.size.
storage_fencepost() {
    local name=$1 shape=$2 interval=$3 base="$tmp/$1"
    # Ready once it takes a write: one row to another database, whose region is not counted.
    DN_EXTRA_ARGS="--memtable-flush-age-ms $fencepost_flush_age_ms --compaction-cold-after-ms $fencepost_cold_after_ms" \
        start_rf1_cluster "$base"
    load "$name" "$shape" "$interval" "$bin/fencepost" bench --database root.storage --clients 4
    fencepost_regions root.storage > "$base/regions.txt"
    [ -s "$base/regions.txt" ] || { echo "   no region of root.storage in SHOW REGIONS" >&2; exit 1; }
    fencepost_settle "$base"
    local sealed files whole
    sealed=$(fencepost_sealed_bytes "$base")
    files=$(while read -r id; do find "$base/dn1/regions/$id/sealed" -type f; done < "$base/regions.txt" | wc -l)
    whole=$(file_bytes "$base/dn1")
    scripts/cluster.sh stop -b "$base" > /dev/null
    echo "$sealed $whole $files sealed files in $(wc -l < "$base/regions.txt") regions" > "$tmp/$name.size"
    rm -rf "$base"
}

# InfluxDB's settle signature: busy while the WAL holds bytes or a compaction's .tmp exists.
influx_signature() {
    local dir=$1 wal tmp_files
    wal=$(file_bytes "$dir/wal")
    tmp_files=$(find "$dir/data" -name '*.tmp' 2>/dev/null | wc -l)
    if [ "$wal" != 0 ] || [ "$tmp_files" != 0 ]; then
        echo "busy: WAL $wal bytes, $tmp_files compactions"
    else
        echo "$(file_bytes "$dir/data" -name '*.tsm') in $(find "$dir/data" -name '*.tsm' | wc -l) .tsm files"
    fi
}

storage_influxdb() {
    local name=$1 shape=$2 interval=$3 dir="$tmp/$1"
    start_settling_influxdb "$dir"
    local pid=$peer_pid
    load "$name" "$shape" "$interval" "$bin/peerload" --target influxdb \
        --address "127.0.0.1:$influx_port" --db bench --clients 4
    local settled tsm whole
    settled=$(wait_stable "InfluxDB" influx_signature "$dir")
    tsm=$(file_bytes "$dir/data" -name '*.tsm')
    whole=$(( $(file_bytes "$dir/data") + $(file_bytes "$dir/wal") + $(file_bytes "$dir/meta") ))
    kill "$pid"; wait "$pid" 2>/dev/null || true
    echo "$tsm $whole ${settled#* in }" > "$tmp/$name.size"
    rm -rf "$dir"
}

# Rows in VictoriaMetrics' part directories on disk: from the name (1.79 names a part
# <rows>_<blocks>_…) or from metadata.json's RowsCount (later versions).
vm_rows_on_disk() {
    local dir=$1 part rows total=0
    for part in "$dir"/data/small/*/* "$dir"/data/big/*/*; do
        [ -d "$part" ] || continue
        case "${part##*/}" in tmp | txn | snapshots) continue ;; esac
        if [[ ${part##*/} =~ ^([0-9]+)_[0-9]+_ ]]; then
            rows=${BASH_REMATCH[1]}
        else
            rows=$(sed -nE 's/.*"RowsCount": *([0-9]+).*/\1/p' "$part/metadata.json" 2>/dev/null)
        fi
        total=$((total + ${rows:-0}))
    done
    echo "$total"
}

# Rows VictoriaMetrics holds in its buffers, not yet in a part (empty when unreachable).
vm_pending_rows() {
    curl -s "http://127.0.0.1:$vm_port/metrics" \
        | awk '$1 == "vm_pending_rows{type=\"storage\"}" {print $2}'
}

# VictoriaMetrics' settle signature: busy until no row is pending and the parts on disk hold every
# row (before a merge writes them, 1.79 keeps fresh parts in memory).
vm_signature() {
    local dir=$1 pending on_disk
    pending=$(vm_pending_rows)
    on_disk=$(vm_rows_on_disk "$dir")
    if [ "${pending:-?}" != 0 ] || [ "$on_disk" != "$points" ]; then
        echo "busy: ${pending:-?} rows pending, $on_disk of $points in parts on disk"
    else
        echo "$(file_bytes "$dir/data") in $(find "$dir"/data/small/*/ "$dir"/data/big/*/ -mindepth 1 \
            -maxdepth 1 -type d ! -name tmp ! -name txn 2>/dev/null | wc -l) parts"
    fi
}

storage_victoriametrics() {
    local name=$1 shape=$2 interval=$3 dir="$tmp/$1"
    start_victoriametrics "$dir"
    local pid=$peer_pid
    load "$name" "$shape" "$interval" "$bin/peerload" --target victoriametrics \
        --address "127.0.0.1:$vm_port" --db bench --clients 4
    local code month months=()
    code=$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$vm_port/internal/force_flush")
    [ "$code" = 200 ] || echo "   VictoriaMetrics /internal/force_flush answered $code" >&2
    for _ in $(seq 1 60); do
        [ "$(vm_pending_rows)" = 0 ] && break
        sleep 1
    done
    # Every month the points fall in (partitions are named YYYY_MM).
    for month in $(date -u -d "@$((start_ms / 1000))" +%Y_%m) \
        $(date -u -d "@$(( (start_ms + (rows - 1) * ${interval}) / 1000 ))" +%Y_%m); do
        [[ " ${months[*]} " == *" $month "* ]] && continue
        months+=("$month")
        code=$(curl -s -o /dev/null -w '%{http_code}' \
            "http://127.0.0.1:$vm_port/internal/force_merge?partition_prefix=$month")
        [ "$code" = 200 ] || echo "   VictoriaMetrics force_merge of $month answered $code" >&2
    done
    local settled parts whole
    settled=$(wait_stable "VictoriaMetrics merge" vm_signature "$dir/storage")
    parts=$(file_bytes "$dir/storage/data")
    whole=$(file_bytes "$dir/storage")
    kill "$pid"; wait "$pid" 2>/dev/null || true
    echo "$parts $whole ${settled#* in }, indexdb $(file_bytes "$dir/storage/indexdb") bytes" > "$tmp/$name.size"
    rm -rf "$dir"
}

storage_tsfile() {
    local name=$1 shape=$2 interval=$3 dir="$tmp/$1"
    if [ -z "$tsfile_python" ]; then
        echo "n/a n/a $tsfile_why" > "$tmp/$name.size"
        return
    fi
    # One client: the file's tablets in the order one writer would get them.
    load "$name" "$shape" "$interval" "$bin/peerload" --target file --out "$dir/points" --clients 1
    if ! "$tsfile_python" scripts/tsfile_write.py "$dir/points" "$dir/points.tsfile" \
        > "$tmp/$name.tsfile.json" 2> "$tmp/$name.tsfile.log"; then
        echo "   the TsFile writer failed:" >&2
        cat "$tmp/$name.tsfile.json" >&2
        tail -n 20 "$tmp/$name.tsfile.log" >&2
        exit 1
    fi
    local bytes compared
    bytes=$(json_field "$tmp/$name.tsfile.json" bytes)
    compared=$(json_field "$tmp/$name.tsfile.json" points_compared)
    echo "$bytes $bytes 1 file, $compared points read back equal" > "$tmp/$name.size"
    rm -rf "$dir"
}

systems=(fencepost influxdb victoriametrics tsfile)
run_started=$(date +%s)
for shape in "${shapes[@]}"; do
    for interval in "${intervals_ms[@]}"; do
        for system in "${systems[@]}"; do
            name="$system-$shape-${interval}ms"
            started=$(date +%s)
            "storage_$system" "$name" "$shape" "$interval"
            read -r bytes whole detail < "$tmp/$name.size"
            printf '   %-32s %12s bytes  %s (%d s)\n' "$name" "$bytes" "$detail" $(( $(date +%s) - started ))
        done
    done
done
elapsed_s=$(( $(date +%s) - run_started ))

# ---------------------------------------------------------------------------------------------
per_point() { # bytes → B/pt with 2 decimals, or n/a
    if [[ $1 =~ ^[0-9]+$ ]]; then awk -v b="$1" -v p="$points" 'BEGIN {printf "%.2f", b / p}'; else echo "n/a"; fi
}
size_of() { read -r bytes whole _ < "$tmp/$1.size"; echo "${bytes}"; }
whole_of() { read -r bytes whole _ < "$tmp/$1.size"; echo "${whole}"; }
detail_of() { read -r _ _ detail < "$tmp/$1.size"; echo "${detail}"; }
label_of() {
    case "$1" in
        fencepost) echo "Fencepost" ;;
        influxdb) echo "InfluxDB" ;;
        victoriametrics) echo "VictoriaMetrics" ;;
        tsfile) echo "TsFile" ;;
    esac
}
interval_label() { if [ "$1" = 1000 ]; then echo "1 s"; else echo "$1 ms"; fi; }
table=$(
    echo "| values | interval | Fencepost B/pt | InfluxDB B/pt | VictoriaMetrics B/pt | TsFile B/pt | Fencepost / best peer | Fencepost / TsFile |"
    echo "|---|---|---|---|---|---|---|---|"
    for shape in "${shapes[@]}"; do
        for interval in "${intervals_ms[@]}"; do
            suffix="$shape-${interval}ms"
            fp=$(size_of "fencepost-$suffix")
            best="" best_name=""
            for peer in influxdb victoriametrics tsfile; do
                b=$(size_of "$peer-$suffix")
                [[ $b =~ ^[0-9]+$ ]] || continue
                if [ -z "$best" ] || [ "$b" -lt "$best" ]; then best=$b; best_name=$(label_of "$peer"); fi
            done
            ts=$(size_of "tsfile-$suffix")
            ratio_best="n/a"; ratio_ts="n/a"
            [ -n "$best" ] && ratio_best=$(awk -v a="$fp" -v b="$best" -v n="$best_name" 'BEGIN {printf "%.2f× (%s)", a / b, n}')
            [[ $ts =~ ^[0-9]+$ ]] && ratio_ts=$(awk -v a="$fp" -v b="$ts" 'BEGIN {printf "%.2f×", a / b}')
            printf '| %s | %s | %s | %s | %s | %s | %s | %s |\n' "$shape" "$(interval_label "$interval")" \
                "$(per_point "$fp")" "$(per_point "$(size_of "influxdb-$suffix")")" \
                "$(per_point "$(size_of "victoriametrics-$suffix")")" "$(per_point "$ts")" \
                "$ratio_best" "$ratio_ts"
        done
    done
)
whole_table=$(
    echo "| values | interval | Fencepost whole dir B/pt | Fencepost files | InfluxDB whole dir B/pt | InfluxDB files | VictoriaMetrics whole dir B/pt | VictoriaMetrics files |"
    echo "|---|---|---|---|---|---|---|---|"
    for shape in "${shapes[@]}"; do
        for interval in "${intervals_ms[@]}"; do
            suffix="$shape-${interval}ms"
            printf '| %s | %s | %s | %s | %s | %s | %s | %s |\n' "$shape" "$(interval_label "$interval")" \
                "$(per_point "$(whole_of "fencepost-$suffix")")" "$(detail_of "fencepost-$suffix")" \
                "$(per_point "$(whole_of "influxdb-$suffix")")" "$(detail_of "influxdb-$suffix")" \
                "$(per_point "$(whole_of "victoriametrics-$suffix")")" "$(detail_of "victoriametrics-$suffix")"
        done
    done
)
if [ -n "$tsfile_python" ]; then
    tsfile_line="TsFile: Apache's \`tsfile\` $tsfile_version wheel (its default encodings: $(sed -E 's/.*"time_encoding":"([A-Z0-9_]+)".*"time_compression":"([A-Z0-9_]+)".*"double_encoding":"([A-Z0-9_]+)".*"compression":"([A-Z0-9_]+)".*/\1 + \2 time, \3 + \4 DOUBLE/' "$tmp/tsfile-${shapes[0]}-${intervals_ms[0]}ms.tsfile.json"); tree model, non-aligned), one file per run, read back and compared."
else
    tsfile_line="TsFile: n/a — $tsfile_why."
fi

section=$(
    echo "## $(date -u +%F) — bytes on disk per point vs InfluxDB 1.x, VictoriaMetrics and TsFile (issue 17)"
    echo
    echo "\`$command_line\` — per run $points DOUBLE points: $devices devices × $measurements measurements ×"
    echo "$rows rows (\`--values\` shape, \`--interval-ms\` between rows, from $start_ms ms), the same points for"
    echo "every system (\`fencepost bench\`, \`peerload\`, \`peerload --target file\` for TsFile: one generator),"
    echo "a fresh instance per run, settled before measuring. B/pt = bytes on disk (apparent size) / points."
    echo "Counted: Fencepost the sealed files of the bench database's regions (1 DataNode, RF=1, flushed by age"
    echo "$fencepost_flush_age_ms ms, compacted, cold partitions merged whole after $fencepost_cold_after_ms ms); InfluxDB $influx_version the .tsm files after the WAL"
    echo "is snapshotted and the shard fully compacted (cold after 1 s); VictoriaMetrics $vm_version its \`data/\`"
    echo "parts after \`/internal/force_flush\` and \`/internal/force_merge\`. $tsfile_line"
    echo
    echo "Machine: $(machine_facts). Load average before the run: $load_before. Took $elapsed_s s."
    echo
    echo "$table"
    echo
    echo "Whole data directories, for information (apparent sizes, so preallocated files count in full):"
    echo "Fencepost's includes its raft log (64 MiB segments, \`wal_segment_bytes\`, one of them a spare),"
    echo "InfluxDB's its WAL, series file (4 MiB per partition) and field index, VictoriaMetrics' its indexdb."
    echo
    echo "$whole_table"
)
echo
echo "$section"
if [ $record = 1 ]; then
    { echo; echo "$section"; } >> benches/RESULTS.md
    echo
    echo "(appended to benches/RESULTS.md)"
fi
exit 0
fi

duration=30
sweep=0
profile=0
record=1
build=1
while [ $# -gt 0 ]; do
    case "$1" in
        --duration-s) duration=$2; shift 2 ;;
        --sweep) sweep=1; shift ;;
        --profile) profile=1; shift ;;
        --no-record) record=0; shift ;;
        --no-build) build=0; shift ;;
        *) echo "unknown flag $1" >&2; exit 2 ;;
    esac
done
command_line="scripts/bench.sh --e2e --duration-s $duration"
if [ $sweep = 1 ]; then command_line+=" --sweep"; fi
if [ $profile = 1 ]; then command_line+=" --profile"; fi
if [ $build = 0 ]; then command_line+=" --no-build"; fi

require_free_ports 6667 6668 6669 10710 10730 10731 10732 9100 9101 9102 9200 \
    $influx_port $((influx_port + 2)) $vm_port

# ---------------------------------------------------------------------------------------------
install_peers
if [ $profile = 1 ] && ! command -v perf >/dev/null; then
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq linux-perf >/dev/null
fi

# ---------------------------------------------------------------------------------------------
load_before=$(cut -d' ' -f1-3 /proc/loadavg)
echo "== machine: $(machine_facts), load average $load_before"
sync
dd_line=$(dd if=/dev/zero of="$tmp/dd" bs=1M count=256 conv=fdatasync 2>&1 | tail -n 1)
rm -f "$tmp/dd"
disk_mb_s=$(echo "$dd_line" | awk -F, '{print $NF}' | sed 's/^ *//')
sync
sleep 2
# 4 KiB appends, each durable before the next (O_DSYNC, the file growing: what an fdatasync after
# every 4 KiB append costs without preallocation).
fsync_count=2000
fsync_line=$(dd if=/dev/zero of="$tmp/fsync" bs=4k count=$fsync_count oflag=dsync 2>&1 | tail -n 1)
rm -f "$tmp/fsync"
fsync_s=$(echo "$fsync_line" | awk -F, '{print $(NF-1)}' | awk '{print $1}')
fsync_rate=$(awk -v n=$fsync_count -v s="$fsync_s" 'BEGIN {printf "%.0f", n / s}')
echo "   sequential write + fdatasync (dd bs=1M count=256 conv=fdatasync): $disk_mb_s"
echo "   4 KiB appends with O_DSYNC (dd bs=4k count=$fsync_count oflag=dsync): $fsync_rate /s"

# ---------------------------------------------------------------------------------------------
if [ $build = 1 ]; then
    echo "== building release binaries"
    cargo build --release -q -p confignode -p datanode -p fencepost-cli
    # Separate: `--bin peerload` would filter the targets of the other packages too.
    cargo build --release -q -p fencepost-benches --bin peerload
fi

clk_tck=$(getconf CLK_TCK)
# The points start one hour ago, the same for every system: the same points everywhere.
start_ms=$(( $(date +%s%3N) - 3600000 ))

# Sum of utime + stime, in clock ticks, of the given pids (all threads: /proc/<pid>/stat).
cpu_ticks() {
    local total=0 pid t
    for pid in "$@"; do
        t=$(sed 's/^.*) //' "/proc/$pid/stat" | awk '{print $12 + $13}')
        total=$((total + t))
    done
    echo "$total"
}

# CPU seconds (user + system) of the children this shell has waited for (the load generator), from
# a file written by the `times` builtin in the main shell (a subshell would see only its own).
children_cpu_s() {
    tail -n 1 "$1" | awk '{
        s = 0
        for (i = 1; i <= 2; i++) { m = $i; sub(/m.*/, "", m); sec = $i; sub(/^[0-9]+m/, "", sec); sub(/s$/, "", sec); s += m * 60 + sec }
        printf "%.2f", s }'
}

# run_load NAME PIDS... -- LOADER ARGS...: measures CPU around one load run, leaves
# $tmp/NAME.json (the report) and $tmp/NAME.cpu (server CPU s, client CPU s).
run_load() {
    local name=$1; shift
    local pids=()
    while [ "$1" != -- ]; do pids+=("$1"); shift; done
    shift
    sync
    sleep 2
    local before client_before after client_after rc=0
    before=$(cpu_ticks "${pids[@]}")
    times > "$tmp/$name.times0"
    "$@" --json > "$tmp/$name.json" 2> "$tmp/$name.log" || rc=$?
    times > "$tmp/$name.times1"
    after=$(cpu_ticks "${pids[@]}")
    client_before=$(children_cpu_s "$tmp/$name.times0")
    client_after=$(children_cpu_s "$tmp/$name.times1")
    if [ ! -s "$tmp/$name.json" ]; then
        echo "   $name: the loader failed (exit $rc):" >&2
        tail -n 20 "$tmp/$name.log" >&2
        exit 1
    fi
    [ "$rc" = 0 ] || echo "   $name: some writes failed (exit $rc); see errors_by_code" >&2
    awk -v a="$after" -v b="$before" -v hz="$clk_tck" -v ca="$client_after" -v cb="$client_before" \
        'BEGIN {printf "%.2f %.2f\n", (a - b) / hz, ca - cb}' > "$tmp/$name.cpu"
    printf '   %-28s %12.0f points/s  p50 %7.2f ms  p99 %8.2f ms  errors %s\n' "$name" \
        "$(json_field "$tmp/$name.json" points_per_s)" "$(json_field "$tmp/$name.json" p50_ms)" \
        "$(json_field "$tmp/$name.json" p99_ms)" "$(json_field "$tmp/$name.json" errors)"
}

# Before each timed run the loader writes one row to every device of the run's database, one
# minute before the measured points (never the same (device, time)): Fencepost creates the
# database's region groups and 1000 series, the peers their series, outside the measurement.
warmup_args=(--devices 100 --measurements 10 --rows-per-tablet 1 --clients 4 --tablets 100
    --start-time $((start_ms - 60000)))

# Sweep configurations: rows per tablet × clients.
sweep_configs=("100 1" "100 4" "1000 1" "1000 4")
sweep_duration=10

perf_report=""

# run_fencepost NAME DATANODES REPLICATION
run_fencepost() {
    local name=$1 datanodes=$2 replication=$3
    local base="$tmp/$name"
    cluster_bases+=("$base")
    echo "== Fencepost: 1 ConfigNode, $datanodes DataNode(s), replication $replication"
    scripts/cluster.sh start -c 1 -d "$datanodes" -r "$replication" -b "$base" >/dev/null
    local endpoints="" j
    for j in $(seq 1 "$datanodes"); do endpoints+="${endpoints:+,}127.0.0.1:$((6666 + j))"; done
    local ready=0
    for _ in $(seq 1 60); do
        if timeout 20 "$bin/fencepost" --endpoints "$endpoints" bench --database root.warmup \
            --devices 1 --measurements 1 --rows-per-tablet 1 --clients 1 --tablets 1 \
            >/dev/null 2>&1; then
            ready=1; break
        fi
        sleep 1
    done
    if [ $ready = 0 ]; then
        echo "   the cluster did not take a write within 60 s; logs under $base" >&2
        tail -n 20 "$base"/*.log >&2
        exit 1
    fi
    local pids=()
    for p in "$base"/cn*.pid "$base"/dn*.pid; do pids+=("$(cat "$p")"); done
    local perf_pid=""
    if [ $profile = 1 ] && [ "$replication" = 1 ]; then
        (sleep $((duration / 3)); perf record -g -o "$tmp/perf.data" -p "$(cat "$base/dn1.pid")" -- sleep 10 \
            >"$tmp/perf.log" 2>&1) &
        perf_pid=$!
    fi
    "$bin/fencepost" --endpoints "$endpoints" bench "${warmup_args[@]}" >/dev/null 2>&1 \
        || echo "   warm-up of root.bench failed; the run will show why" >&2
    run_load "$name" "${pids[@]}" -- "$bin/fencepost" --endpoints "$endpoints" bench \
        --devices 100 --measurements 10 --rows-per-tablet 1000 --clients 4 \
        --duration-s "$duration" --start-time "$start_ms"
    if [ -n "$perf_pid" ]; then
        wait "$perf_pid" || true
        perf_report=$(perf report -i "$tmp/perf.data" --stdio --no-children -g none \
            --sort dso,symbol --percent-limit 1 2>/dev/null | grep -v '^#' | grep -v '^$' \
            | sed -E 's/[[:space:]]+-[[:space:]]+-[[:space:]]*$//; s/[[:space:]]+$//' | head -n 20)
        # Kept for a closer look (`perf report -i target/bench-e2e-perf.data --children`).
        cp "$tmp/perf.data" target/bench-e2e-perf.data
        echo "== perf (DataNode, RF=1, 10 s, self time):"
        echo "$perf_report"
    fi
    if [ $sweep = 1 ]; then
        local c rows clients
        for c in "${sweep_configs[@]}"; do
            read -r rows clients <<<"$c"
            "$bin/fencepost" --endpoints "$endpoints" bench --database "root.sweep_${rows}r_${clients}c" \
                "${warmup_args[@]}" >/dev/null 2>&1 || echo "   warm-up failed" >&2
            run_load "$name-sweep-${rows}r-${clients}c" "${pids[@]}" -- "$bin/fencepost" \
                --endpoints "$endpoints" bench --database "root.sweep_${rows}r_${clients}c" \
                --devices 100 --measurements 10 --rows-per-tablet "$rows" --clients "$clients" \
                --duration-s "$sweep_duration" --start-time "$start_ms"
        done
    fi
    scripts/cluster.sh stop -b "$base" >/dev/null
}

# run_peer NAME TARGET PORT PID
run_peer() {
    local name=$1 target=$2 port=$3 pid=$4
    "$bin/peerload" --target "$target" --address "127.0.0.1:$port" --db bench "${warmup_args[@]}" \
        >/dev/null 2>&1 || echo "   warm-up of $target failed; the run will show why" >&2
    run_load "$name" "$pid" -- "$bin/peerload" --target "$target" --address "127.0.0.1:$port" \
        --db bench --devices 100 --measurements 10 --rows-per-tablet 1000 --clients 4 \
        --duration-s "$duration" --start-time "$start_ms"
    if [ $sweep = 1 ]; then
        local c rows clients
        for c in "${sweep_configs[@]}"; do
            read -r rows clients <<<"$c"
            "$bin/peerload" --target "$target" --address "127.0.0.1:$port" \
                --db "sweep_${rows}r_${clients}c" "${warmup_args[@]}" >/dev/null 2>&1 \
                || echo "   warm-up failed" >&2
            run_load "$name-sweep-${rows}r-${clients}c" "$pid" -- "$bin/peerload" \
                --target "$target" --address "127.0.0.1:$port" --db "sweep_${rows}r_${clients}c" \
                --devices 100 --measurements 10 --rows-per-tablet "$rows" --clients "$clients" \
                --duration-s "$sweep_duration" --start-time "$start_ms"
        done
    fi
}

run_fencepost fencepost-rf1 1 1
run_fencepost fencepost-rf3 3 3

influx_version=$(dpkg-query -W -f '${Version}' influxdb 2>/dev/null || echo "?")
vm_version=$(dpkg-query -W -f '${Version}' victoria-metrics 2>/dev/null || echo "?")
echo "== InfluxDB $influx_version, wal-fsync-delay = 0s"
influx_config "$tmp/influx"
influxd run -config "$tmp/influx/influxdb.conf" > "$tmp/influx/influxd.log" 2>&1 &
influx_pid=$!
started_pids+=("$influx_pid")
wait_http "http://127.0.0.1:$influx_port/ping" 204
run_peer influxdb influxdb "$influx_port" "$influx_pid"
kill "$influx_pid"; wait "$influx_pid" 2>/dev/null || true

echo "== VictoriaMetrics $vm_version, no fsync on write"
mkdir -p "$tmp/vm"
victoria-metrics -storageDataPath "$tmp/vm/data" -httpListenAddr "127.0.0.1:$vm_port" \
    -loggerLevel ERROR > "$tmp/vm/vm.log" 2>&1 &
vm_pid=$!
started_pids+=("$vm_pid")
wait_http "http://127.0.0.1:$vm_port/health" 200
run_peer victoriametrics victoriametrics "$vm_port" "$vm_pid"
kill "$vm_pid"; wait "$vm_pid" 2>/dev/null || true

# ---------------------------------------------------------------------------------------------
# The table. Ratios compare points/s.
pps() { json_field "$tmp/$1.json" points_per_s; }
cpu_per_m() { # server CPU s and client CPU s per million acknowledged points
    local points; points=$(json_field "$tmp/$1.json" points)
    read -r server client < "$tmp/$1.cpu"
    awk -v s="$server" -v c="$client" -v p="$points" \
        'BEGIN {if (p > 0) printf "%.2f | %.2f", s / p * 1e6, c / p * 1e6; else printf "- | -"}'
}
ratio() { awk -v a="$1" -v b="$2" 'BEGIN {if (b > 0) printf "%.2f", a / b; else print "-"}'; }
verdict() { # ratio target
    awk -v r="$1" -v t="$2" 'BEGIN {if (r >= t) printf "met (%.2f× ≥ %.1f×)", r, t; else printf "missed (%.2f× < %.1f×, %.0f %% short)", r, t, (1 - r / t) * 100}'
}
row() { # name label durability
    local f="$tmp/$1.json"
    printf '| %s | %s | %.0f | %.2f | %.2f | %s | %s | %s |\n' "$2" "$3" "$(pps "$1")" \
        "$(json_field "$f" p50_ms)" "$(json_field "$f" p99_ms)" "$(cpu_per_m "$1")" \
        "$(json_field "$f" errors)" "$(ratio "$(pps fencepost-rf1)" "$(pps "$1")")"
}
rf1=$(pps fencepost-rf1)
table=$(
    echo "| system | durability | points/s | p50 ms | p99 ms | server CPU s / M points | loader CPU s / M points | errors | Fencepost RF=1 / this |"
    echo "|---|---|---|---|---|---|---|---|---|"
    row fencepost-rf1 "Fencepost RF=1 (1 DataNode)" "ack after raft-log fdatasync"
    row fencepost-rf3 "Fencepost RF=3 (3 DataNodes)" "ack after fdatasync on a quorum"
    row influxdb "InfluxDB $influx_version" 'WAL fsync per request (`wal-fsync-delay = "0s"`)'
    row victoriametrics "VictoriaMetrics $vm_version" "no fsync on the write path"
)
targets=$(
    echo "- RF=1 vs InfluxDB: $(verdict "$(ratio "$rf1" "$(pps influxdb)")" 4) — target ≥ 4×"
    echo "- RF=1 vs VictoriaMetrics: $(verdict "$(ratio "$rf1" "$(pps victoriametrics)")" 2) — target ≥ 2×"
    echo "- RF=3 / RF=1: $(verdict "$(ratio "$(pps fencepost-rf3)" "$rf1")" 0.4) — target ≥ 0.4×"
)
sweep_table=""
if [ $sweep = 1 ]; then
    sweep_table=$(
        echo "| system | rows/tablet | clients | points/s | p50 ms | p99 ms | errors |"
        echo "|---|---|---|---|---|---|---|"
        for s in fencepost-rf1 fencepost-rf3 influxdb victoriametrics; do
            for c in "${sweep_configs[@]}"; do
                read -r rows clients <<<"$c"
                f="$tmp/$s-sweep-${rows}r-${clients}c.json"
                printf '| %s | %s | %s | %.0f | %.2f | %.2f | %s |\n' "$s" "$rows" "$clients" \
                    "$(json_field "$f" points_per_s)" "$(json_field "$f" p50_ms)" \
                    "$(json_field "$f" p99_ms)" "$(json_field "$f" errors)"
            done
        done
    )
fi

section=$(
    echo "## $(date -u +%F) — end-to-end ingest vs InfluxDB 1.x and VictoriaMetrics (issue 9)"
    echo
    echo "\`$command_line\` — 100 devices × 10 DOUBLE measurements, 1000-row tablets (10,000 points"
    echo "per request), 4 clients, $duration s per system, the same points for every system"
    echo "(\`fencepost bench\` / \`peerload\`, one generator), after a warm-up that writes one row to every"
    echo "device (series and region groups exist before the clock starts). Client and servers share the machine."
    echo
    echo "Machine: $(machine_facts); disk: sequential write + fdatasync $disk_mb_s"
    echo "(\`dd bs=1M count=256 conv=fdatasync\`), 4 KiB appends with O_DSYNC $fsync_rate /s"
    echo "(\`dd bs=4k count=$fsync_count oflag=dsync\`, growing file). Load average before the run: $load_before."
    echo
    echo "$table"
    echo
    echo "$targets"
    if [ -n "$sweep_table" ]; then
        echo
        echo "Sweep ($sweep_duration s each):"
        echo
        echo "$sweep_table"
    fi
    if [ -n "$perf_report" ]; then
        echo
        echo "\`perf record -g -p <DataNode>\` for 10 s during the RF=1 run, self time by symbol:"
        echo
        echo '```'
        echo "$perf_report"
        echo '```'
    fi
)
echo
echo "$section"
if [ $record = 1 ]; then
    { echo; echo "$section"; } >> benches/RESULTS.md
    echo
    echo "(appended to benches/RESULTS.md)"
fi
