#!/usr/bin/env bash
# schedlab fileio vs fio running the same job: one job, sequential write of
# SIZE KiB in BLOCK-byte calls to a new file in DIR, then a sequential read
# of it (ioengine=psync: pwrite/pread, like schedlab), buffered or O_DIRECT,
# interleaved ROUNDS times on the same CPU set. Prints each round's KiB/s
# (KB = 1024 bytes, fio's "bw" unit too) and the median schedlab/fio ratio
# of both figures. Goal: within 5 %.
#
# What makes fio's job match schedlab's (each is fio's default otherwise):
#   --create_serialize=0  fio would lay out (write and fsync) the file for the
#                         read job before the write job starts, so the write
#                         job would overwrite an existing file instead of
#                         extending a new one;
#   --invalidate=0        fio drops the file's page cache before each job;
#                         schedlab does not (E1 did not), so reads hit memory;
#   --fallocate=none      fio would preallocate; schedlab extends the file;
#   --gtod_reduce=1 --scramble_buffers=0
#                         fio's per-I/O clock reads and buffer scrambling; the
#                         compared figure is the whole phase's throughput.
# Even so fio spends more per call than schedlab's loop (its io_u machinery):
# with 1 KiB page-cache calls (~1.5 us each) that shows as schedlab being
# faster; with BLOCK=65536 the data path dominates and the two should agree.
# fio's bw comes from a runtime in whole ms: keep each phase >= 200 ms.
#
# Env: SIZE (KiB, 262144: schedlab's default), BLOCK (bytes, 1024), CACHE
# (page|direct), FSYNC (no|yes: fio's end_fsync), DIR (default: the temp
# dir), ROUNDS (5), CPUS (taskset list for both, default: all), SCHEDLAB
# (the schedlab binary; default: the release build).
set -euo pipefail
cd "$(dirname "$0")/.."
SIZE=${SIZE:-262144}
BLOCK=${BLOCK:-1024}
CACHE=${CACHE:-page}
FSYNC=${FSYNC:-no}
DIR=${DIR:-${TMPDIR:-/tmp}}
ROUNDS=${ROUNDS:-5}
CPUS=${CPUS:-$(cat /sys/devices/system/cpu/online)}
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$PWD/target}
command -v fio >/dev/null || { echo "fio is not installed (apt-get install fio)" >&2; exit 2; }
if [ -z "${SCHEDLAB:-}" ]; then
	cargo build --release -q -p schedlab-cli
	SCHEDLAB=$CARGO_TARGET_DIR/release/schedlab
fi
WORK=$(mktemp -d)
FIOFILE=$DIR/schedlab-fio-$$.tmp
trap 'rm -rf "$WORK"; rm -f "$FIOFILE"' EXIT
case $CACHE in page) DIRECT=0 ;; direct) DIRECT=1 ;; *) echo "CACHE must be page or direct" >&2; exit 2 ;; esac
case $FSYNC in no) END_FSYNC=0 ;; yes) END_FSYNC=1 ;; *) echo "FSYNC must be no or yes" >&2; exit 2 ;; esac

# "write read" KiB/s of one schedlab invocation (one repetition, no warm-up, like fio).
schedlab_kib() {
	taskset -c "$CPUS" "$SCHEDLAB" --db "$WORK/bench.db" run \
		"fileio:size=$SIZE,block=$BLOCK,cache=$CACHE,fsync=$FSYNC,dir=$DIR" \
		--invocations 1 --repeat 1 --warmup 0 --json - 2>"$WORK/schedlab.err" | python3 -c '
import json, sys
run = json.load(sys.stdin)
b = next(b for b in run["benchmarks"] if b["name"] == "fileio")
m = {x["name"]: x["data"]["values"][0] for x in b["metrics"] if x["data"]["type"] == "samples"}
print(m["write_kb_per_s"], m["read_kb_per_s"])
' || { cat "$WORK/schedlab.err" >&2; exit 1; }
}

# "write read" KiB/s of one fio run: a write job, then (stonewall) a read job of the same file.
fio_kib() {
	rm -f "$FIOFILE"
	taskset -c "$CPUS" fio --name=global --filename="$FIOFILE" --size="${SIZE}k" --bs="$BLOCK" \
		--ioengine=psync --numjobs=1 --direct=$DIRECT --end_fsync=$END_FSYNC --invalidate=0 \
		--fallocate=none --create_serialize=0 --gtod_reduce=1 --scramble_buffers=0 \
		--output-format=json --name=write --rw=write --name=read --rw=read --stonewall >"$WORK/fio.json"
	rm -f "$FIOFILE"
	python3 -c '
import json, sys
jobs = {j["jobname"]: j for j in json.load(open(sys.argv[1]))["jobs"]}
print(jobs["write"]["write"]["bw_bytes"] / 1024, jobs["read"]["read"]["bw_bytes"] / 1024)
' "$WORK/fio.json"
}

median() { sort -g | awk '{ v[NR] = $1 } END { if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

echo "# size=${SIZE}KiB block=$BLOCK cache=$CACHE fsync=$FSYNC dir=$DIR rounds=$ROUNDS cpus=$CPUS kernel=$(uname -r) $(fio --version)"
: >"$WORK/ratios-write"
: >"$WORK/ratios-read"
for round in $(seq 1 "$ROUNDS"); do
	if [ $((round % 2)) = 1 ]; then
		f=$(fio_kib)
		s=$(schedlab_kib)
	else
		s=$(schedlab_kib)
		f=$(fio_kib)
	fi
	read -r sw sr <<<"$s"
	read -r fw fr <<<"$f"
	rw=$(awk -v a="$sw" -v b="$fw" 'BEGIN { print a / b }')
	rr=$(awk -v a="$sr" -v b="$fr" 'BEGIN { print a / b }')
	printf 'round %d: write KiB/s fio %12.0f schedlab %12.0f ratio %.3f | read KiB/s fio %12.0f schedlab %12.0f ratio %.3f\n' \
		"$round" "$fw" "$sw" "$rw" "$fr" "$sr" "$rr"
	echo "$rw" >>"$WORK/ratios-write"
	echo "$rr" >>"$WORK/ratios-read"
done
mw=$(median <"$WORK/ratios-write")
mr=$(median <"$WORK/ratios-read")
printf 'median ratio schedlab/fio: write %.3f (%+.1f %%), read %.3f (%+.1f %%); goal within 5 %%\n' \
	"$mw" "$(echo "$mw" | awk '{ print ($1 - 1) * 100 }')" "$mr" "$(echo "$mr" | awk '{ print ($1 - 1) * 100 }')"
