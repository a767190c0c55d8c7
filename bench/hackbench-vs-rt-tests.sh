#!/usr/bin/env bash
# schedlab hackbench vs rt-tests hackbench, same parameters, interleaved rounds.
#
# For each of process/thread x socket/pipe: `hackbench -g G -l L [-T] [-p]`
# (its "Time:") against `schedlab run hackbench:groups=G,loops=L,...
# --repeat 1 --warmup 0` (total_time), alternating which runs first. Prints
# every round and the median ratio schedlab/rt-tests per configuration.
# Goal: <= 1.03 (schedlab's time at most 3 % above rt-tests').
#
# Env: HB_GROUPS (10), LOOPS (1000), ROUNDS (3), CPUS (taskset list, default all),
# CONFIGS (default "process/socket process/pipe thread/socket thread/pipe").
set -euo pipefail
cd "$(dirname "$0")/.."
G=${HB_GROUPS:-10}
L=${LOOPS:-1000}
ROUNDS=${ROUNDS:-3}
CPUS=${CPUS:-$(cat /sys/devices/system/cpu/online)}
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$PWD/target}
command -v hackbench >/dev/null || { echo "rt-tests hackbench not found: apt-get install rt-tests" >&2; exit 2; }
cargo build --release -q -p schedlab-cli
DBDIR=$(mktemp -d)
trap 'rm -rf "$DBDIR"' EXIT
DB=$DBDIR/bench.db
SL="python3 bench/figure.py total_time $CARGO_TARGET_DIR/release/schedlab --db $DB run --invocations 1"
echo "# groups=$G loops=$L rounds=$ROUNDS cpus=$CPUS kernel=$(uname -r) $(hackbench --help 2>&1 | head -1)"
printf '%-16s %5s %10s %10s %7s\n' config round rt-tests schedlab ratio
CONFIGS=${CONFIGS:-process/socket process/pipe thread/socket thread/pipe}
for config in $CONFIGS; do
	mode=${config%/*} tr=${config#*/}
	{
		flags=""
		[ $mode = thread ] && flags="$flags -T"
		[ $tr = pipe ] && flags="$flags -p"
		ratios=()
		for round in $(seq 1 "$ROUNDS"); do
			rt() { taskset -c "$CPUS" hackbench -g "$G" -l "$L" $flags | awk '/^Time:/ { print $2 }'; }
			sl() { taskset -c "$CPUS" $SL "hackbench:groups=$G,loops=$L,mode=$mode,transport=$tr" --repeat 1 --warmup 0 2>/dev/null; }
			if [ $((round % 2)) = 1 ]; then a=$(rt); b=$(sl); else b=$(sl); a=$(rt); fi
			r=$(echo "$b $a" | awk '{ printf "%.3f", $1 / $2 }')
			ratios+=("$r")
			printf '%-16s %5s %10.3f %10.3f %7s\n' "$mode/$tr" "$round" "$a" "$b" "$r"
		done
		med=$(printf '%s\n' "${ratios[@]}" | sort -n | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }')
		echo "median $mode/$tr schedlab/rt-tests = $med (goal <= 1.03)"
	}
done
