#!/usr/bin/env bash
# Quickstart: builds the release binaries, starts 1 ConfigNode + 3 DataNodes with replication 3 on
# 127.0.0.1, writes tablets through one DataNode (`fencepost bench`), reads them back through
# another, runs SQL with the `fencepost` CLI, and checks that every region's replicas hold identical data (`fencepost verify`).
# The cluster keeps running; stop it with `scripts/cluster.sh stop -b <base dir>` (printed at the
# end).
set -euo pipefail
cd "$(dirname "$0")/.."

base=${FENCEPOST_BASE:-/tmp/fencepost-quickstart}

echo "== building release binaries (first build takes a few minutes)"
cargo build --release -p confignode -p datanode -p fencepost-cli --bins

echo "== starting 1 ConfigNode + 3 DataNodes, replication 3, under $base"
# One-hour time partitions, so the quickstart's 17 hours of data span several partitions.
CN_EXTRA_ARGS="--time-partition-interval-ms 3600000 ${CN_EXTRA_ARGS:-}" \
    scripts/cluster.sh start -c 1 -d 3 -r 3 -b "$base"

echo "== waiting for every DataNode to hold its lease"
for _ in $(seq 1 120); do
    if ! scripts/cluster.sh status -b "$base" | grep -q "lease NORMAL" ; then sleep 0.5; continue; fi
    if [ "$(scripts/cluster.sh status -b "$base" | grep -c "lease NORMAL")" = 3 ]; then break; fi
    sleep 0.5
done
scripts/cluster.sh status -b "$base"

all=127.0.0.1:6667,127.0.0.1:6668,127.0.0.1:6669
echo "== writing through 127.0.0.1:6667: 3 devices x 2 series x 1000 rows one minute apart (fencepost bench)"
# About 17 hours of data: several one-hour time partitions, so several regions per device.
target/release/fencepost --endpoints 127.0.0.1:6667 bench --database root.quickstart \
    --devices 3 --measurements 2 --rows-per-tablet 1000 --tablets 3 --clients 1 \
    --start-time 1700000000000 --step-ms 60000

echo "== reading them back through 127.0.0.1:6669"
target/release/fencepost --endpoints 127.0.0.1:6669,127.0.0.1:6668,127.0.0.1:6667 -e "
    SELECT COUNT(s0), COUNT(s1) FROM root.quickstart.d0;
    SELECT COUNT(s0), COUNT(s1) FROM root.quickstart.d1;
    SELECT COUNT(s0), COUNT(s1) FROM root.quickstart.d2;
    SELECT s0, s1 FROM root.quickstart.d1 WHERE time >= 1700000000000 AND time < 1700000180000;
    SHOW CLUSTER"

echo "== the fencepost CLI: SQL through 127.0.0.1:6668"
target/release/fencepost --endpoints 127.0.0.1:6668,127.0.0.1:6667,127.0.0.1:6669 -e "
    CREATE DATABASE root.cli;
    INSERT INTO root.cli.d1(time, temperature, status) VALUES (1, 21.5, 'ok'), (2, 22.0, 'ok'), (3, 35.5, 'hot');
    SELECT temperature, status FROM root.cli.d1 WHERE time >= 0 AND time < 10;
    SELECT LAST temperature FROM root.cli.d1;
    SHOW REGIONS;
    SHOW LEASES;
    SHOW LOCAL LEASE"

echo "== replica digests of every region (fencepost verify)"
target/release/fencepost --endpoints $all verify

echo
echo "The cluster is running: logs and data under $base."
echo "Status:  scripts/cluster.sh status -b $base"
echo "Stop:    scripts/cluster.sh stop -b $base"
