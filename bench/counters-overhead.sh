#!/usr/bin/env bash
# What the always-on kernel counters (kernel.* metrics, issue 19) cost: the
# same `schedlab run` of each case with counters (default) and with
# --no-counters, interleaved ROUNDS times (alternating which goes first), on
# the same CPU set. Prints every round and, per case, the median ratio
# with/without of the headline figure:
#   pipe       round_trips_per_s (higher is better: a ratio below 1 is a loss)
#   hackbench  total_time        (lower is better: a ratio above 1 is a loss)
# and, as the run-to-run noise to hold it against, the spread (max/min) of
# the without-counters figures over the rounds. Goal: the ratio's distance
# from 1 within that noise. Run it alone on a quiet machine.
#
# Env: SCHEDLAB (a built binary; default: a release build of this tree),
# ROUNDS (7; at least 5), REPEAT (3) measured repetitions per run,
# CPUS (taskset list for every run, default: all online), CASES (default
# below; pipe:* and hackbench:* specs).
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${ROUNDS:-7}
REPEAT=${REPEAT:-3}
CPUS=${CPUS:-$(cat /sys/devices/system/cpu/online)}
CASES=${CASES:-"pipe:placement=same-cpu pipe:placement=cross-cpu hackbench:groups=10 hackbench:groups=10,mode=thread"}
[ "$ROUNDS" -ge 5 ] || { echo "ROUNDS must be at least 5 (a median of fewer says little)" >&2; exit 2; }
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$PWD/target}
if [ -z "${SCHEDLAB:-}" ]; then
	cargo build --release -q -p schedlab-cli
	SCHEDLAB=$CARGO_TARGET_DIR/release/schedlab
fi
DBDIR=$(mktemp -d)
trap 'rm -rf "$DBDIR"' EXIT
SL="$SCHEDLAB --db $DBDIR/bench.db run --invocations 1 --repeat $REPEAT --warmup 1"

metric_of() {
	case $1 in
	pipe*) echo round_trips_per_s ;;
	hackbench*) echo total_time ;;
	*) echo "no headline known for $1 (pipe:* or hackbench:*)" >&2; exit 2 ;;
	esac
}

median() { sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

echo "# rounds=$ROUNDS repeat=$REPEAT cpus=$CPUS kernel=$(uname -r) perf_event_paranoid=$(cat /proc/sys/kernel/perf_event_paranoid 2>/dev/null || echo ?)"
printf '%-34s %5s %14s %14s %7s\n' case round without with ratio
for spec in $CASES; do
	m=$(metric_of "$spec")
	ratios=() offs=()
	for round in $(seq 1 "$ROUNDS"); do
		off() { taskset -c "$CPUS" python3 bench/figure.py "$m" $SL "$spec" --no-counters; }
		on() { taskset -c "$CPUS" python3 bench/figure.py "$m" $SL "$spec"; }
		if [ $((round % 2)) = 1 ]; then a=$(off); b=$(on); else b=$(on); a=$(off); fi
		r=$(echo "$b $a" | awk '{ printf "%.4f", $1 / $2 }')
		ratios+=("$r") offs+=("$a")
		printf '%-34s %5s %14.6g %14.6g %7s\n' "$spec" "$round" "$a" "$b" "$r"
	done
	med=$(printf '%s\n' "${ratios[@]}" | median)
	noise=$(printf '%s\n' "${offs[@]}" | sort -g | awk 'NR == 1 { lo = $1 } { hi = $1 } END { printf "%.4f", hi / lo }')
	echo "median $spec with/without ($m) = $med; without-counters spread max/min = $noise"
done
