#!/usr/bin/env bash
# Benchmarks. `--micro` (the only mode until the cluster binaries exist) runs the criterion
# component benches: WAL vs raft-engine, memtable, storage engine with the lease gate on and off.
# Prints the machine's own disk limits first so figures can be read against them.
set -euo pipefail
cd "$(dirname "$0")/.."

mode=${1:---micro}
case "$mode" in
    --micro) ;;
    *) echo "usage: scripts/bench.sh [--micro]   (end-to-end cluster benches arrive with the DataNode service)" >&2; exit 2 ;;
esac

tmp=$(mktemp -d "${TMPDIR:-/tmp}/fencepost-bench.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

echo "== machine: $(nproc) cores, $(free -g | awk '/Mem:/ {print $2}') GiB, $(uname -r)"
echo "== disk: sequential write with fdatasync (256 MiB)"
dd if=/dev/zero of="$tmp/dd" bs=1M count=256 conv=fdatasync 2>&1 | tail -n 1
rm -f "$tmp/dd"
sync
sleep 2

echo "== criterion benches"
cargo bench -p fencepost-benches -- "${@:2}"
