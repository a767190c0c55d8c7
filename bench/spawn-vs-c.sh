#!/usr/bin/env bash
# schedlab spawn vs a plain C fork/_exit/waitpid loop (bench/spawn.c), same
# count, interleaved ROUNDS times, same CPU set. Prints each rate
# (processes/s), the median schedlab/C ratio and the harness overhead
# (1 - ratio). Goal: overhead <= 3 %.
#
# Env: COUNT (5000), ROUNDS (5), CPUS (taskset list for both, default: all),
# SCHEDLAB (command taking "spawn:PARAMS" that prints the rate; default:
# the release `schedlab run`, through bench/figure.py).
set -euo pipefail
cd "$(dirname "$0")/.."
COUNT=${COUNT:-5000}
ROUNDS=${ROUNDS:-5}
CPUS=${CPUS:-$(cat /sys/devices/system/cpu/online)}
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$PWD/target}
BUILD=$CARGO_TARGET_DIR/bench-c
mkdir -p "$BUILD"
if [ -z "${SCHEDLAB:-}" ]; then
	cargo build --release -q -p schedlab-cli
	DBDIR=$(mktemp -d)
	trap 'rm -rf "$DBDIR"' EXIT
	SCHEDLAB_DB=$DBDIR/bench.db
	SCHEDLAB="python3 bench/figure.py processes_per_s $CARGO_TARGET_DIR/release/schedlab --db $SCHEDLAB_DB run --invocations 1"
fi
# Rebuild only when the source is newer (lets a prebuilt copy run where there is no cc).
[ "$BUILD/spawn" -nt bench/spawn.c ] || cc -O2 -o "$BUILD/spawn" bench/spawn.c

median() { sort -g | awk '{ v[NR] = $1 } END { if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

echo "# count=$COUNT rounds=$ROUNDS cpus=$CPUS kernel=$(uname -r)"
: >"$BUILD/ratios-spawn"
for round in $(seq 1 "$ROUNDS"); do
	if [ $((round % 2)) = 1 ]; then
		c=$(taskset -c "$CPUS" "$BUILD/spawn" "$COUNT")
		s=$(taskset -c "$CPUS" $SCHEDLAB "spawn:count=$COUNT" --repeat 1 --warmup 0 2>/dev/null)
	else
		s=$(taskset -c "$CPUS" $SCHEDLAB "spawn:count=$COUNT" --repeat 1 --warmup 0 2>/dev/null)
		c=$(taskset -c "$CPUS" "$BUILD/spawn" "$COUNT")
	fi
	r=$(echo "$s $c" | awk '{ print $1 / $2 }')
	printf 'round %d: c %10.1f  schedlab %10.1f  schedlab/c %.3f\n' "$round" "$c" "$s" "$r"
	echo "$r" >>"$BUILD/ratios-spawn"
done
m=$(median <"$BUILD/ratios-spawn")
printf 'median ratio schedlab/c %.3f  harness overhead %.1f %%\n' "$m" "$(echo "$m" | awk '{ print (1 - $1) * 100 }')"
