#!/usr/bin/env bash
# Issue 5's speed goals, measured (a benchmark, not a test):
#   - `schedlab compare` over 100 stored runs takes under 1 s;
#   - importing a 1,000,000-sample latency file takes under 1 s.
# Usage: bench/compare-import-speed.sh [path/to/schedlab]
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${1:-target/release/schedlab}
[ -x "$bin" ] || cargo build --release -q -p schedlab-cli
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
db="$work/results.db"

# 100 stored runs with real data: simulated wakeup latencies (histograms)
# and per-task shares, 5 seeds each (the sim default).
for seed in $(seq 1 100); do
    "$bin" --db "$db" sim --policy cfs --workload 'wakeup[samples=300]' --seed "$seed" --duration 5s >/dev/null
done

ids=$(seq 1 100 | tr '\n' ' ')
t0=$(date +%s.%N)
"$bin" --db "$db" compare $ids >/dev/null
t1=$(date +%s.%N)
"$bin" --db "$db" compare 1 100 >/dev/null
t2=$(date +%s.%N)

# One million latencies, one per line, in microseconds.
python3 - "$work/lat.txt" <<'PY'
import random, sys
random.seed(1)
with open(sys.argv[1], "w") as f:
    for _ in range(1_000_000):
        f.write(f"{random.lognormvariate(3.0, 0.6):.3f}\n")
PY
t3=$(date +%s.%N)
"$bin" --db "$db" import "$work/lat.txt" --format samples --unit us >/dev/null
t4=$(date +%s.%N)

awk -v a="$t0" -v b="$t1" -v c="$t2" -v d="$t3" -v e="$t4" 'BEGIN {
    printf "compare of 100 runs (100 columns): %.3f s (goal < 1 s)\n", b - a
    printf "compare of 2 runs in a 100-run store: %.3f s\n", c - b
    printf "import of 1,000,000 samples: %.3f s (goal < 1 s)\n", e - d
}'
