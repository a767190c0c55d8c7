#!/usr/bin/env bash
# schedlab cyclic (nanosleep, FIFO 95, mlock) vs cyclictest, idle and under a
# hackbench load, interleaved rounds.
#
# cyclictest -m -p 95 -i INTERVAL -l LOOPS -h 1000 -q -a CPU -t 1 --json
# against schedlab run cyclic:interval=INTERVAL,loops=LOOPS --cpus CPU
# --repeat 1 --warmup 0 (defaults FIFO 95, mlockall, /dev/cpu_dma_latency 0
# like cyclictest). Both pinned to one CPU with one thread. The load, when
# on, is rt-tests `hackbench -g LOAD_GROUPS -l 100000000` running in the
# background for both tools alike (killed after each round).
# Average: cyclictest's JSON avg (exact, us) vs schedlab's histogram mean;
# p99: cyclictest's 1 us histogram bucket + 0.5 us (bucket middle) vs
# schedlab's HDR p99. Goal: schedlab/cyclictest <= 1.05 for both.
#
# Env: INTERVAL (1000 us), LOOPS (10000), ROUNDS (3), CPU (0), LOAD_GROUPS (10).
set -euo pipefail
cd "$(dirname "$0")/.."
INTERVAL=${INTERVAL:-1000}
LOOPS=${LOOPS:-10000}
ROUNDS=${ROUNDS:-3}
CPU=${CPU:-0}
LOAD_GROUPS=${LOAD_GROUPS:-10}
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$PWD/target}
command -v cyclictest >/dev/null || { echo "cyclictest not found: apt-get install rt-tests" >&2; exit 2; }
cargo build --release -q -p schedlab-cli
TMP=$(mktemp -d)
DB=$TMP/bench.db
SL="$CARGO_TARGET_DIR/release/schedlab --db $DB run cyclic:interval=$INTERVAL,loops=$LOOPS --cpus $CPU --repeat 1 --warmup 0"
LOADPID=
stop_load() { [ -n "$LOADPID" ] && kill "$LOADPID" 2>/dev/null && wait "$LOADPID" 2>/dev/null; LOADPID=; true; }
trap stop_load EXIT
start_load() { hackbench -g "$LOAD_GROUPS" -l 100000000 >/dev/null 2>&1 & LOADPID=$!; sleep 1; }
ct() { # prints "avg p99" in us
	cyclictest -m -p 95 -i "$INTERVAL" -l "$LOOPS" -h 1000 -q -a "$CPU" -t 1 --json="$TMP/ct.json" >/dev/null
	python3 - "$TMP/ct.json" <<'PY'
import json, sys
t = json.load(open(sys.argv[1]))["thread"]["0"]
h = sorted((int(k), v) for k, v in t["histogram"].items())
n = sum(v for _, v in h); acc = 0; p99 = None
for k, v in h:
    acc += v
    if acc >= 0.99 * n:
        p99 = k + 0.5; break
if p99 is None: p99 = float(t["max"])  # beyond the histogram (overflow)
print(t["avg"], p99)
PY
}
sl() { # prints "avg p99" in us
	local m p
	m=$(python3 bench/figure.py --stat mean latency $SL 2>/dev/null)
	p=$(python3 bench/figure.py --stat p99 latency $SL 2>/dev/null)
	echo "$m $p" | awk '{ printf "%.2f %.2f\n", $1 / 1000, $2 / 1000 }'
}
echo "# interval=${INTERVAL}us loops=$LOOPS rounds=$ROUNDS cpu=$CPU kernel=$(uname -r) cpuidle=$(cat /sys/devices/system/cpu/cpuidle/current_driver 2>/dev/null || echo none)"
printf '%-6s %5s %9s %9s %9s %9s %8s %8s\n' load round ct.avg sl.avg ct.p99 sl.p99 r.avg r.p99
for load in idle hackbench; do
	ra=(); rp=()
	for round in $(seq 1 "$ROUNDS"); do
		[ $load = hackbench ] && start_load
		if [ $((round % 2)) = 1 ]; then c=$(ct); s=$(sl); else s=$(sl); c=$(ct); fi
		stop_load
		read -r ca cp <<<"$c"
		read -r sa sp <<<"$s"
		a=$(echo "$sa $ca" | awk '{ printf "%.3f", $1 / $2 }')
		p=$(echo "$sp $cp" | awk '{ printf "%.3f", $1 / $2 }')
		ra+=("$a"); rp+=("$p")
		printf '%-6s %5s %9s %9s %9s %9s %8s %8s\n' "$load" "$round" "$ca" "$sa" "$cp" "$sp" "$a" "$p"
	done
	med() { printf '%s\n' "$@" | sort -n | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
	echo "median $load: avg schedlab/cyclictest = $(med "${ra[@]}"), p99 = $(med "${rp[@]}") (goal <= 1.05)"
done
