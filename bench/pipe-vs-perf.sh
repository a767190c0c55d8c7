#!/usr/bin/env bash
# schedlab pipe vs `perf bench sched pipe` (and a C reference with explicit
# pinning), same placement and loop count, interleaved ROUNDS times.
# Prints each rate (round trips/s) and the median schedlab/perf and
# schedlab/C ratios per placement. Goal: schedlab/perf >= 0.97.
#
# Placement: same-cpu = everything under `taskset -c $CPU_A` (perf's two tasks
# inherit it; schedlab pins both tasks to $CPU_A). cross-cpu = perf has no
# pinning option and taskset's mask is inherited by both tasks, so perf runs
# with bench/pin_fork.so preloaded: it wraps fork() and pins perf's parent to
# $CPU_A and its child to $CPU_B before their loops start; the C reference
# (bench/pipe.c) pins itself the same way; schedlab uses placement=cross-cpu
# with --cpus $CPU_A,$CPU_B.
#
# MODE=thread compares schedlab's mode=thread with `perf bench sched pipe -T`
# (two threads of one process), same-cpu only: perf's threads cannot be
# pinned apart, and the C reference has no thread mode.
#
# Env: LOOPS (200000), ROUNDS (3), MODE (process), LATENCY (yes), CPU_A (0), CPU_B (1), SCHEDLAB (command
# that takes "pipe:PARAMS --cpus LIST" and prints the rate; default: the
# release `schedlab run`, through bench/figure.py).
set -euo pipefail
cd "$(dirname "$0")/.."
LOOPS=${LOOPS:-200000}
ROUNDS=${ROUNDS:-3}
CPU_A=${CPU_A:-0}
CPU_B=${CPU_B:-1}
MODE=${MODE:-process}
# LATENCY=no: schedlab times only each repetition, as perf and the C loop do.
LATENCY=${LATENCY:-yes}
case $MODE in
process) PLACEMENTS="same-cpu cross-cpu"; PERF_T= ;;
thread) PLACEMENTS="same-cpu"; PERF_T=-T ;;
*) echo "MODE must be process or thread" >&2; exit 2 ;;
esac
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$PWD/target}
BUILD=$CARGO_TARGET_DIR/bench-c
mkdir -p "$BUILD"
HAVE_PERF=1
command -v perf >/dev/null || { echo "# perf not found (apt-get install linux-perf): comparing with the C reference only" >&2; HAVE_PERF=0; }
if [ -z "${SCHEDLAB:-}" ]; then
	cargo build --release -q -p schedlab-cli
	DBDIR=$(mktemp -d)
	trap 'rm -rf "$DBDIR"' EXIT
	SCHEDLAB_DB=$DBDIR/bench.db
	SCHEDLAB="python3 bench/figure.py round_trips_per_s $CARGO_TARGET_DIR/release/schedlab --db $SCHEDLAB_DB run --invocations 1"
fi
# Rebuild only when the source is newer (lets a prebuilt copy run where there is no cc).
[ "$BUILD/pipe" -nt bench/pipe.c ] || cc -O2 -o "$BUILD/pipe" bench/pipe.c
[ "$BUILD/pin_fork.so" -nt bench/pin_fork.c ] || cc -O2 -shared -fPIC -o "$BUILD/pin_fork.so" bench/pin_fork.c -ldl

perf_rate() {
	if [ "$HAVE_PERF" = 0 ]; then echo nan; return; fi
	if [ "$1" = same-cpu ]; then
		taskset -c "$CPU_A" perf bench sched pipe $PERF_T -l "$LOOPS"
	else
		taskset -c "$CPU_A" env LD_PRELOAD="$BUILD/pin_fork.so" PIN_PARENT_CPU="$CPU_A" PIN_CHILD_CPU="$CPU_B" \
			perf bench sched pipe -l "$LOOPS"
	fi | awk '/ops\/sec/ { print $1 }'
}
schedlab_rate() {
	$SCHEDLAB "pipe:loops=$LOOPS,placement=$1,mode=$MODE,latency=$LATENCY" --repeat 1 --warmup 0 --cpus "$CPU_A,$CPU_B" 2>/dev/null
}
c_rate() {
	if [ "$MODE" = thread ]; then echo nan; return; fi
	if [ "$1" = same-cpu ]; then "$BUILD/pipe" "$LOOPS" "$CPU_A" "$CPU_A"; else "$BUILD/pipe" "$LOOPS" "$CPU_A" "$CPU_B"; fi
}
ratio() { echo "$1 $2" | awk '{ if ($2 == "nan" || $2 == 0) print "nan"; else printf "%.4f\n", $1 / $2 }'; }
median() { grep -v nan | sort -g | awk '{ v[NR] = $1 } END { if (NR == 0) print "n/a"; else if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

echo "# mode=$MODE loops=$LOOPS rounds=$ROUNDS cpus=$CPU_A,$CPU_B kernel=$(uname -r) $( [ "$HAVE_PERF" = 1 ] && perf --version)"
for placement in $PLACEMENTS; do
	: >"$BUILD/ratios-perf" && : >"$BUILD/ratios-c"
	for round in $(seq 1 "$ROUNDS"); do
		# Rotate the order so no tool always runs first (or right after another).
		case $((round % 3)) in
		1) order="perf schedlab c" ;;
		2) order="schedlab c perf" ;;
		0) order="c perf schedlab" ;;
		esac
		for tool in $order; do
			case $tool in
			perf) p=$(perf_rate "$placement") ;;
			schedlab) s=$(schedlab_rate "$placement") ;;
			c) c=$(c_rate "$placement") ;;
			esac
		done
		printf '%-9s round %d: perf %12.1f  schedlab %12.1f  c %12.1f  schedlab/perf %s  schedlab/c %s\n' \
			"$placement" "$round" "$p" "$s" "$c" "$(ratio "$s" "$p")" "$(ratio "$s" "$c")"
		ratio "$s" "$p" >>"$BUILD/ratios-perf"
		ratio "$s" "$c" >>"$BUILD/ratios-c"
	done
	printf '%-9s median ratio: schedlab/perf %s  schedlab/c %s\n' "$placement" \
		"$(median <"$BUILD/ratios-perf")" "$(median <"$BUILD/ratios-c")"
done
