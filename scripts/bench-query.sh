# The body of `scripts/bench.sh --query` (sourced by it, with its helpers and its $tmp; see its
# header): TSBS devops queries against Fencepost RF=1 and RF=3, InfluxDB 1.x and VictoriaMetrics
# over the same points, one system at a time.

hosts=1000 days=3 runs=50 record=1 build=1 rf3=1
while [ $# -gt 0 ]; do
    case "$1" in
        --hosts) hosts=$2; shift 2 ;;
        --days) days=$2; shift 2 ;;
        --runs) runs=$2; shift 2 ;;
        --no-rf3) rf3=0; shift ;;
        --no-record) record=0; shift ;;
        --no-build) build=0; shift ;;
        *) echo "unknown flag $1" >&2; exit 2 ;;
    esac
done
command_line="scripts/bench.sh --query --hosts $hosts --days $days --runs $runs"
[ $rf3 = 1 ] || command_line+=" --no-rf3"
if ! [[ $hosts =~ ^[0-9]+$ && $days =~ ^[0-9]+$ ]] || [ "$hosts" -lt 8 ] || [ $((hosts % 4)) != 0 ] || [ "$days" -lt 1 ]; then
    echo "--hosts must be a multiple of 4 and at least 8; --days at least 1" >&2
    exit 2
fi

metrics=10
interval_ms=10000
rows=$((days * 8640))           # rows per host: one every 10 s
rows_per_tablet=864             # a tenth of a day; 10 tablets a day per host
tablets=$((hosts * rows / rows_per_tablet))
points=$((hosts * metrics * rows))
# Midnight UTC, 2023-11-15: in the past, so every window of the queries is whole.
start_ms=1700006400000
load_args=(--devices "$hosts" --measurements $metrics --rows-per-tablet $rows_per_tablet
    --tablets "$tablets" --start-time $start_ms --values walk2dp --interval-ms $interval_ms
    --clients 4 --json)
query_args=(--hosts "$hosts" --metrics $metrics --start-ms $start_ms --rows $rows
    --interval-ms $interval_ms --runs "$runs")

require_free_ports 6667 6668 6669 10710 10730 9100 9200 $influx_port $((influx_port + 2)) $vm_port
install_peers
echo "== machine: $(machine_facts), load average $(cut -d' ' -f1-3 /proc/loadavg)"
echo "== $points points: $hosts hosts × $metrics metrics × $rows rows (every 10 s for $days days), walk2dp"
if [ $build = 1 ]; then
    echo "== building release binaries"
    cargo build --release -q -p confignode -p datanode -p fencepost-cli
    cargo build --release -q -p fencepost-benches --bin peerload --bin querybench
fi

# query_load NAME LOADER ARGS...: loads the points; fails the bench unless every one was taken.
query_load() {
    local name=$1; shift
    local started=$SECONDS
    "$@" "${load_args[@]}" > "$tmp/$name.load.json" 2> "$tmp/$name.load.log" || true
    if [ "$(json_field "$tmp/$name.load.json" points 2>/dev/null || echo 0)" != "$points" ] \
        || [ "$(json_field "$tmp/$name.load.json" errors)" != 0 ]; then
        echo "   $name: not every point was acknowledged:" >&2
        tail -n 20 "$tmp/$name.load.log" >&2
        exit 1
    fi
    echo "   $name: loaded in $((SECONDS - started)) s"
}

# query_run NAME TARGET ADDRESS: the timed queries into $tmp/NAME.json.
query_run() {
    local name=$1 target=$2 address=$3
    if ! "$bin/querybench" --target "$target" --address "$address" "${query_args[@]}" \
        > "$tmp/$name.json" 2> "$tmp/$name.query.log"; then
        echo "   $name: querybench failed:" >&2
        tail -n 20 "$tmp/$name.query.log" >&2
        exit 1
    fi
    grep -h '"error"' "$tmp/$name.query.log" | sed "s/^/   $name: /" >&2 || true
}

# fencepost_quiet: waits (≤ 300 s) until no DataNode has a compaction pending.
fencepost_quiet() {
    local port pending waited=0
    sleep 6 # one compaction round counts the pending work
    while [ $waited -lt 300 ]; do
        pending=0
        for port in "$@"; do
            pending=$((pending + $(curl -s --max-time 2 "http://127.0.0.1:$port/metrics" \
                | awk '$1 == "compaction_pending_partitions" {s += $2} END {print s + 0}')))
        done
        [ "$pending" = 0 ] && return 0
        sleep 1; waited=$((waited + 1))
    done
    echo "   compaction still pending after 300 s; measured as is" >&2
}

query_fencepost() {
    local name=$1 nodes=$2 base="$tmp/$1" ports=(9100)
    cluster_bases+=("$base")
    scripts/cluster.sh start -c 1 -d "$nodes" -r "$nodes" -b "$base" > /dev/null
    [ "$nodes" = 1 ] || ports=(9100 9101 9102)
    for _ in $(seq 1 60); do
        timeout 20 "$bin/fencepost" bench --database root.warmup --devices 1 --measurements 1 \
            --rows-per-tablet 1 --clients 1 --tablets 1 > /dev/null 2>&1 && break
        sleep 1
    done
    query_load "$name" "$bin/fencepost" bench --database root.bench
    "$bin/fencepost" -e "FLUSH" > /dev/null
    fencepost_quiet "${ports[@]}"
    query_run "$name" fencepost 127.0.0.1:6667
    scripts/cluster.sh stop -b "$base" > /dev/null
    rm -rf "$base"
}

query_influxdb() {
    local dir="$tmp/influxdb" waited=0
    start_settling_influxdb "$dir"
    local pid=$peer_pid
    query_load influxdb "$bin/peerload" --target influxdb --tag-devices \
        --address "127.0.0.1:$influx_port" --db bench
    # Snapshotted to TSM once the cache is cold: the WAL empties.
    while [ -n "$(find "$dir/wal" -type f -size +0 2>/dev/null)" ] && [ $waited -lt 300 ]; do
        sleep 1; waited=$((waited + 1))
    done
    sleep 5
    query_run influxdb influxdb "127.0.0.1:$influx_port"
    kill "$pid"; wait "$pid" 2>/dev/null || true
    rm -rf "$dir"
}

query_victoriametrics() {
    local dir="$tmp/vm"
    start_victoriametrics "$dir"
    local pid=$peer_pid
    query_load victoriametrics "$bin/peerload" --target victoriametrics --tag-devices \
        --address "127.0.0.1:$vm_port" --db bench
    curl -s -o /dev/null "http://127.0.0.1:$vm_port/internal/force_flush"
    sleep 5
    query_run victoriametrics victoriametrics "127.0.0.1:$vm_port"
    kill "$pid"; wait "$pid" 2>/dev/null || true
    rm -rf "$dir"
}

systems=(fencepost-rf1)
echo "== Fencepost, 1 ConfigNode + 1 DataNode, RF=1"
query_fencepost fencepost-rf1 1
if [ $rf3 = 1 ]; then
    echo "== Fencepost, 1 ConfigNode + 3 DataNodes, RF=3"
    query_fencepost fencepost-rf3 3
    systems+=(fencepost-rf3)
fi
echo "== InfluxDB $(dpkg-query -W -f '${Version}' influxdb 2>/dev/null || echo "?")"
query_influxdb
echo "== VictoriaMetrics $(dpkg-query -W -f '${Version}' victoria-metrics 2>/dev/null || echo "?")"
query_victoriametrics
systems+=(influxdb victoriametrics)

# One row per query: p50 / p99 per system, Fencepost RF=1 against the faster peer (p50), and
# whether each answer's numbers equal Fencepost RF=1's.
python3 - "$tmp" "${systems[@]}" > "$tmp/query.md" <<'EOF'
import json, sys
tmp, systems = sys.argv[1], sys.argv[2:]
runs = {s: {q["query"]: q for q in json.load(open(f"{tmp}/{s}.json"))} for s in systems}
names = list(runs[systems[0]])
print("| query | " + " | ".join(f"{s} p50 / p99 ms" for s in systems) + " | RF=1 vs faster peer (p50) | same answer as RF=1 |")
print("|---|" + "---|" * (len(systems) + 2))
for name in names:
    cells, peers, same = [], [], []
    base = runs[systems[0]][name]
    for s in systems:
        q = runs[s].get(name, {"error": "not run"})
        if "error" in q:
            cells.append("n/a")
            if s != systems[0]:
                same.append(f"{s}: n/a ({q['error'][:60]})")
            continue
        cells.append(f"{q['p50_ms']:.2f} / {q['p99_ms']:.2f}")
        if s in ("influxdb", "victoriametrics"):
            peers.append(q["p50_ms"])
        if s != systems[0] and "digest" in base:
            same.append(f"{s}: {'=' if q['digest'] == base['digest'] else '≠'} ({q['values']} values)")
    ratio = "n/a"
    if peers and "p50_ms" in base:
        ratio = f"{min(peers) / base['p50_ms']:.1f}×"
    print(f"| {name} | " + " | ".join(cells) + f" | {ratio} | {'; '.join(same)} |")
EOF
echo
cat "$tmp/query.md"
if [ $record = 1 ]; then
    {
        echo
        echo "## $(date -u +%Y-%m-%d) queries: TSBS devops over $points points (issue 40)"
        echo
        echo "\`$command_line\` — $(machine_facts); InfluxDB $(dpkg-query -W -f '${Version}' influxdb 2>/dev/null || echo "?"),"
        echo "VictoriaMetrics $(dpkg-query -W -f '${Version}' victoria-metrics 2>/dev/null || echo "?"). $hosts hosts × $metrics metrics every 10 s for $days days"
        echo "(walk2dp), loaded, flushed and settled, then each query $runs times with random parameters,"
        echo "one at a time from one client (Fencepost: the gRPC session; peers: HTTP). Ratios > 1× mean"
        echo "Fencepost RF=1 is faster. \"=\" means the numbers of the seeded check answer are equal"
        echo "(6 significant digits)."
        echo
        cat "$tmp/query.md"
    } >> benches/RESULTS.md
    echo "== appended to benches/RESULTS.md"
fi
exit 0
