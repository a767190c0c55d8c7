#!/usr/bin/env bash
# schedlab shell (copies=1) vs the same script run in a plain sh loop, timed
# externally with date +%s%N around RUNS runs. Both run the very files the
# benchmark writes (examples/shell_workload.rs) under /bin/sh with the same
# environment (PATH, LC_ALL=C), interleaved ROUNDS times, same CPU set.
# Prints each mean time per script run, the median schedlab/sh ratio and the
# difference. Goal: schedlab's script_time mean within 5 % of the plain loop.
#
# Env: RUNS (300 runs per loop round), DURATION (2000 ms per schedlab
# repetition, after a warm-up one), ROUNDS (5), CPUS (taskset list for both,
# default: all), SCHEDLAB (command taking "shell:PARAMS" that prints the mean
# script_time in ns; default: the release `schedlab run`, through
# bench/figure.py).
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS=${RUNS:-300}
DURATION=${DURATION:-2000}
ROUNDS=${ROUNDS:-5}
CPUS=${CPUS:-$(cat /sys/devices/system/cpu/online)}
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$PWD/target}
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
cargo build --release -q -p schedlab-live --example shell_workload
SCRIPT=$("$CARGO_TARGET_DIR/release/examples/shell_workload" "$WORK" 1)
if [ -z "${SCHEDLAB:-}" ]; then
	cargo build --release -q -p schedlab-cli
	SCHEDLAB="python3 bench/figure.py --stat mean script_time $CARGO_TARGET_DIR/release/schedlab --db $WORK/bench.db run"
fi

# Mean ns per run of RUNS runs (after one untimed run), in a plain sh with
# the environment schedlab gives its scripts.
plain_loop() {
	taskset -c "$CPUS" env -i PATH="$PATH" LC_ALL=C /bin/sh -c '
		script=$1 dir=$2 runs=$3
		/bin/sh "$script" "$dir" || exit 1
		t0=$(date +%s%N)
		i=0
		while [ "$i" -lt "$runs" ]; do
			/bin/sh "$script" "$dir" || exit 1
			i=$((i + 1))
		done
		t1=$(date +%s%N)
		echo $(( (t1 - t0) / runs ))
	' sh "$SCRIPT" "$WORK/c0" "$RUNS"
}

schedlab_mean() {
	taskset -c "$CPUS" $SCHEDLAB "shell:copies=1,duration=$DURATION" --invocations 1 --repeat 1 --warmup 1 2>/dev/null
}

median() { sort -g | awk '{ v[NR] = $1 } END { if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

echo "# runs=$RUNS duration=${DURATION}ms rounds=$ROUNDS cpus=$CPUS sh=$(readlink -f /bin/sh) kernel=$(uname -r)"
: >"$WORK/ratios"
for round in $(seq 1 "$ROUNDS"); do
	if [ $((round % 2)) = 1 ]; then
		p=$(plain_loop)
		s=$(schedlab_mean)
	else
		s=$(schedlab_mean)
		p=$(plain_loop)
	fi
	r=$(echo "$s $p" | awk '{ print $1 / $2 }')
	printf 'round %d: sh loop %8.3f ms  schedlab %8.3f ms  schedlab/sh %.3f\n' "$round" \
		"$(echo "$p" | awk '{ print $1 / 1e6 }')" "$(echo "$s" | awk '{ print $1 / 1e6 }')" "$r"
	echo "$r" >>"$WORK/ratios"
done
m=$(median <"$WORK/ratios")
printf 'median ratio schedlab/sh %.3f  difference %+.1f %% (goal: within 5 %%)\n' "$m" "$(echo "$m" | awk '{ print ($1 - 1) * 100 }')"
