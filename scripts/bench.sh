#!/usr/bin/env bash
# Benchmarks.
#
#   scripts/bench.sh --micro [criterion args]    criterion component benches: WAL vs raft-engine,
#                                                memtable, storage engine with the lease gate on/off
#   scripts/bench.sh --e2e [--duration-s N] [--sweep] [--profile] [--no-record] [--no-build]
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
# symbols; --no-build uses the binaries already in target/release. Installs influxdb and victoria-metrics with apt-get when they are missing (as root).
# Every process it starts is stopped on exit. Not run by CI.
set -euo pipefail
cd "$(dirname "$0")/.."

mode=${1:---micro}
case "$mode" in
    --micro | --e2e) shift || true ;;
    *) echo "usage: scripts/bench.sh --micro [criterion args] | --e2e [--duration-s N] [--sweep] [--profile] [--no-record] [--no-build]" >&2; exit 2 ;;
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

# Ports of the peers (the Fencepost cluster uses cluster.sh's: 6667+, 10710+, 10730+, 9100+).
influx_port=18086
vm_port=18428

# A port already taken would have the loaders measure someone else's server.
for port in 6667 6668 6669 10710 10730 10731 10732 9100 9101 9102 9200 $influx_port $((influx_port + 2)) $vm_port; do
    if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
        echo "port $port on 127.0.0.1 is in use; stop what listens there first" >&2
        exit 1
    fi
done

# ---------------------------------------------------------------------------------------------
echo "== installing what is missing"
if ! command -v influxd >/dev/null || ! command -v victoria-metrics >/dev/null; then
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq influxdb victoria-metrics >/dev/null
fi
command -v curl >/dev/null || DEBIAN_FRONTEND=noninteractive apt-get install -y -qq curl >/dev/null
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
bin=target/release

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

json_field() { # file key → the number after "key":
    sed -E "s/.*\"$2\":(-?[0-9.eE+-]+).*/\\1/" "$1"
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

wait_http() { # URL expected-status
    for _ in $(seq 1 100); do
        if [ "$(curl -s -o /dev/null -w '%{http_code}' "$1" 2>/dev/null)" = "$2" ]; then return 0; fi
        sleep 0.2
    done
    echo "   $1 did not answer $2 within 20 s" >&2
    return 1
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
mkdir -p "$tmp/influx"
cat > "$tmp/influx/influxdb.conf" <<EOF
reporting-disabled = true
bind-address = "127.0.0.1:$((influx_port + 2))"
[meta]
  dir = "$tmp/influx/meta"
[data]
  dir = "$tmp/influx/data"
  wal-dir = "$tmp/influx/wal"
  wal-fsync-delay = "0s"
  query-log-enabled = false
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
