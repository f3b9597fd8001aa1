#!/usr/bin/env bash
# Cold build cost of the spike against a tokio-only baseline: each build starts from an empty
# target directory (under target/, git-ignored). Crates are fetched first and not timed, so the
# figures are compile time only. Prints Markdown table rows.
set -euo pipefail
cd "$(dirname "$0")"
root=$PWD/target/cold
cargo fetch -q && (cd baseline-tokio && cargo fetch -q)

build() { # label, package dir, cargo build args...
    local label=$1 dir=$2
    shift 2
    rm -rf "${root:?}/$label"
    local times units
    # wall, user and system seconds; CPU time is the figure that other load on the machine
    # disturbs least.
    times=$( { TIMEFORMAT='%R %U %S'; time (cd "$dir" && CARGO_TARGET_DIR="$root/$label" cargo build -q "$@") ; } 2>&1 | tail -1)
    units=$(find "$root/$label" -name '*.rlib' -path '*/deps/*' | wc -l)
    read -r wall user sys <<<"$times"
    printf '| %s | %.0f s | %.0f s | %s | %s |\n' "$label" "$wall" "$(echo "$user + $sys" | bc)" "$units" "$(cut -d' ' -f1-3 /proc/loadavg)"
}

echo "| build | cold wall time | CPU time (user+sys) | rlibs built | load average after |"
echo "|---|---:|---:|---:|---|"
build tokio-release baseline-tokio --release
build tokio-debug baseline-tokio
build spike-debug .
build spike-release . --release

size() { # label, binary
    local stripped
    stripped=$(mktemp)
    strip -o "$stripped" "$2"
    printf '| %s | %s KiB | %s KiB stripped |\n' "$1" "$(( $(stat -c %s "$2") / 1024 ))" "$(( $(stat -c %s "$stripped") / 1024 ))"
    rm -f "$stripped"
}
echo
echo "| binary | size | stripped |"
echo "|---|---:|---:|"
size "baseline-tokio (release)" "$root/tokio-release/release/baseline-tokio"
size "spike (release, debug=1)" "$root/spike-release/release/spike"
size "spike (debug)" "$root/spike-debug/debug/spike"
