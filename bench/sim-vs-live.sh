#!/usr/bin/env bash
# Sim against live on this machine (issue 17, item 4): calibrate the
# simulator's costs here (`sim --calibrate`), then for each workload run it
# live and simulate it with eevdf (this kernel's scheduler) at this
# machine's HZ and CPU count with `--calibration last`, and print
# `schedlab compare LIVE SIM` (live is the baseline; the sim column's ratio
# is sim/live). Goals: CPU shares by nice within 2 percentage points;
# wake-up latency medians within a factor of 2.
#
#   hackbench  groups=$HB_GROUPS (sockets, processes)      messages_per_s, total_time
#   hogs       nice 0/5, 0/10, 0/19 on one CPU             cpu_share, fair_share_error, cpu_busy
#   wakeup     samples=$SAMPLES, one RT + one normal waiter  rt.latency, normal.latency
#   pipe       same-cpu (sim: 1 CPU) and cross-cpu (sim: 2 CPUs)  round_trips_per_s
#
# A timing measurement: run it alone on a quiet machine.
# Env: SCHEDLAB (a built binary; default: a release build of this tree),
# QUICK=1 (tiny sizes: proves the script works, figures mean nothing),
# INVOCATIONS (3) live invocations and SEEDS (3) simulated seeds per side,
# REPEAT (3), HB_GROUPS (2), SAMPLES (300), DURATION (5s, each hogs
# repetition; the simulated hogs run this long too), KEEP (a store path to
# keep; default: a temporary one).
set -euo pipefail
cd "$(dirname "$0")/.."
QUICK=${QUICK:-0}
if [ "$QUICK" = 1 ]; then
	INVOCATIONS=${INVOCATIONS:-1} SEEDS=${SEEDS:-1} REPEAT=${REPEAT:-1}
	HB_GROUPS=${HB_GROUPS:-1} SAMPLES=${SAMPLES:-20} DURATION=${DURATION:-200ms}
	PIPE_LOOPS=2000 HB_LOOPS=10 CAL=--quick
else
	INVOCATIONS=${INVOCATIONS:-3} SEEDS=${SEEDS:-3} REPEAT=${REPEAT:-3}
	HB_GROUPS=${HB_GROUPS:-2} SAMPLES=${SAMPLES:-300} DURATION=${DURATION:-5s}
	PIPE_LOOPS=200000 HB_LOOPS=100 CAL=
fi
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$PWD/target}
if [ -z "${SCHEDLAB:-}" ]; then
	cargo build --release -q -p schedlab-cli
	SCHEDLAB=$CARGO_TARGET_DIR/release/schedlab
fi
if [ -n "${KEEP:-}" ]; then DB=$KEEP; else
	DBDIR=$(mktemp -d)
	trap 'rm -rf "$DBDIR"' EXIT
	DB=$DBDIR/sim-vs-live.db
fi
SL="$SCHEDLAB --db $DB"

# This kernel's HZ: its config, else measured from the tick (jiffies are
# not exported; /proc/timer_list's "jiffies" over a known sleep is).
hz_of_kernel() {
	local cfg
	for cfg in /proc/config.gz "/boot/config-$(uname -r)"; do
		[ -r "$cfg" ] || continue
		local hz
		hz=$( (zcat -f "$cfg" 2>/dev/null) | sed -n 's/^CONFIG_HZ=\([0-9]*\)$/\1/p')
		[ -n "$hz" ] && { echo "$hz"; return; }
	done
	if [ -r /proc/timer_list ]; then
		local j0 j1
		j0=$(awk '/^jiffies:/ {print $2; exit}' /proc/timer_list)
		sleep 1
		j1=$(awk '/^jiffies:/ {print $2; exit}' /proc/timer_list)
		# The nearest of the kernel's choices.
		local d=$((j1 - j0)) best=1000 h
		for h in 100 250 300 1000; do
			[ $(((d - h) * (d - h))) -lt $(((d - best) * (d - best))) ] && best=$h
		done
		echo "$best"
		return
	fi
	echo "cannot read this kernel's HZ (no /proc/config.gz, /boot/config-$(uname -r) or /proc/timer_list): set HZ=" >&2
	exit 2
}
HZ=${HZ:-$(hz_of_kernel)}
NCPU=$(nproc)
echo "== host $(hostname), $(uname -r), HZ $HZ, $NCPU CPUs; live: $INVOCATIONS invocation(s) x $REPEAT; sim: eevdf, $SEEDS seed(s)"

echo "== calibration"
$SL sim --calibrate $CAL

LIVE="$SL run --invocations $INVOCATIONS --repeat $REPEAT --warmup 1"
SIM="$SL sim --policy eevdf --calibration last --hz $HZ --seeds $SEEDS"
pair() { # title, live spec, sim CPUs, sim workload, sim duration[, live flags]
	echo
	echo "== $1"
	# shellcheck disable=SC2086
	$LIVE ${6:-} "$2" >/dev/null
	$SIM --cpus "$3" --workload "$4" --duration "$5" >/dev/null
	$SL compare last~1 last
}
pair "hackbench groups=$HB_GROUPS" "hackbench:groups=$HB_GROUPS,loops=$HB_LOOPS" "$NCPU" \
	"hackbench:groups=$HB_GROUPS,loops=$HB_LOOPS" 600s
for n in 5 10 19; do
	pair "hogs nice 0/$n on one CPU" "hogs:nice=0,$n,duration=$DURATION" 1 "hogs:nice=0,$n" "$DURATION"
done
# Live wakeup runs under hackbench:10 (E3's load); the sim's groups= is that load.
WAKE_LOAD=10 WAKE_FLAGS=
# The samples' span (10 ms apart) and a margin: a longer simulated span
# under hackbench costs events for nothing (600 s was refused as too big).
WAKE_SECS=$(( SAMPLES / 100 * 2 + 2 ))
[ "$QUICK" = 1 ] && WAKE_LOAD=0 WAKE_FLAGS="--load none"
pair "wakeup samples=$SAMPLES (load hackbench:$WAKE_LOAD)" "wakeup:samples=$SAMPLES,interval=10ms,waiters=1" "$NCPU" \
	"wakeup:samples=$SAMPLES,interval=10ms,groups=$WAKE_LOAD" "$WAKE_SECS"s "$WAKE_FLAGS"
pair "pipe same-cpu" "pipe:placement=same-cpu,loops=$PIPE_LOOPS" 1 "pipe" 1s
if [ "$NCPU" -ge 2 ]; then
	pair "pipe cross-cpu" "pipe:placement=cross-cpu,loops=$PIPE_LOOPS" 2 "pipe" 1s
fi
