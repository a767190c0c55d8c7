#!/usr/bin/env bash
# schedlab interactive vs interbench v0.31 (Con Kolivas), same tasks and
# loads, interleaved rounds (issue 15's peer check).
#
# interbench is built from its public repository in a temp dir (never part
# of the project): INTERBENCH_GIT (default its GitHub URL; a local clone or
# a bare mirror works too) at commit e612a65 (v0.31, 2016-10). Each round
# runs `interbench -t SECS -c -L CPUS -x Ring -x Memload` (every task
# against None, Video, X, Burn, Write, Read, Compile; as root so that its
# timekeeper is FIFO) in a scratch directory, then `schedlab run
# interactive:duration=SECSs --invocations 1 --repeat 1 --warmup 0`, so each
# row measures SECS on both sides. Both calibrate their own work loop.
#
# Printed per round and task x load: interbench's latency mean (ms) and %
# deadlines met, schedlab's `latency_mean.T` and `deadlines_met.T`, and the
# ratios schedlab/interbench; then the median ratio per row over the rounds.
# Rows whose ratio is off by more than 20 % are flagged for an explanation
# (docs/measurements.md). Differences to expect by design (docs/live.md):
# schedlab times a wake-up from its own clock read (timer latency included,
# tens of us), interbench from its FIFO timekeeper; interbench charges a late
# period's missed intervals onto one sample, schedlab charges each skipped
# period its own lateness; schedlab's compile load is a real cc, interbench's
# is burn + write + read; interbench's X ramp runs over its whole 10 s row,
# schedlab's within each repetition (here one repetition of SECS).
#
# Env: ROUNDS (3), SECS (10, a multiple of 10: interbench rounds up),
# TASKS (audio video x gaming), INTERBENCH_GIT, INTERBENCH (a built
# interbench binary: skips the clone and build), BUILD_ONLY=1 (build
# interbench and schedlab, run nothing).
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${ROUNDS:-3}
SECS=${SECS:-10}
TASKS=${TASKS:-audio video x gaming}
INTERBENCH_GIT=${INTERBENCH_GIT:-https://github.com/ckolivas/interbench.git}
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$PWD/target}
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

if [ -z "${INTERBENCH:-}" ]; then
	command -v git >/dev/null || { echo "git not found: apt-get install git" >&2; exit 2; }
	command -v make >/dev/null || { echo "make not found: apt-get install make" >&2; exit 2; }
	git clone -q "$INTERBENCH_GIT" "$TMP/interbench-src"
	git -C "$TMP/interbench-src" -c advice.detachedHead=false checkout -q e612a65
	make -s -C "$TMP/interbench-src" CC="${CC:-cc}" >"$TMP/make.log" 2>&1 || { cat "$TMP/make.log" >&2; exit 1; }
	INTERBENCH=$TMP/interbench-src/interbench
fi
"$INTERBENCH" -h 2>&1 | grep -q "interbench v 0.31" || { echo "$INTERBENCH is not interbench v0.31" >&2; exit 2; }
cargo build --release -q -p schedlab-cli
SL=$CARGO_TARGET_DIR/release/schedlab
echo "interbench: $INTERBENCH (v0.31); schedlab: $SL"
if [ "${BUILD_ONLY:-0}" = 1 ]; then
	exit 0
fi
[ "$(id -u)" = 0 ] || echo "warning: not root: interbench's timekeeper cannot be FIFO, its results are unreliable" >&2
CPUS=$(nproc)
mkdir -p "$TMP/ib-run"
task_args=""
for t in $TASKS; do
	case $t in
		audio) task_args="$task_args -W Audio" ;;
		video) task_args="$task_args -W Video" ;;
		x) task_args="$task_args -W X" ;;
		gaming) task_args="$task_args -W Gaming" ;;
		*) echo "unknown task $t (audio video x gaming)" >&2; exit 2 ;;
	esac
done
sl_tasks=$(echo "$TASKS" | tr ' ' ',')

for r in $(seq 1 "$ROUNDS"); do
	# interbench writes its read file, loops_per_ms and log in the working directory.
	(cd "$TMP/ib-run" && "$INTERBENCH" -t "$SECS" -c -L "$CPUS" -x Ring -x Memload $task_args) >"$TMP/ib.$r.txt" 2>"$TMP/ib.$r.err" \
		|| { cat "$TMP/ib.$r.err" >&2; exit 1; }
	"$SL" --db "$TMP/sl.db" run "interactive:task=$sl_tasks,duration=${SECS}s" --invocations 1 --repeat 1 --warmup 0 \
		--export-json "$TMP/sl.$r.json" >/dev/null 2>"$TMP/sl.$r.err" || { cat "$TMP/sl.$r.err" >&2; exit 1; }
done

python3 - "$TMP" "$ROUNDS" <<'PY'
import json, re, statistics, sys
tmp, rounds = sys.argv[1], int(sys.argv[2])
LOADS = {"none": "None", "video": "Video", "x": "X", "burn": "Burn", "write": "Write", "read": "Read", "compile": "Compile"}

def interbench(path):
    """{(task, load): (mean ms, deadlines met % or None)} from interbench's table."""
    out, task = {}, None
    for line in open(path):
        m = re.match(r"--- Benchmarking simulated cpu of (\w+)", line)
        if m:
            task = m.group(1).lower()
            continue
        m = re.match(r"(\w+)\s+([\d.]+) \+/- ([\d.]+)\s+([\d.]+)\s+([\d.]+)(?:\s+([\d.]+))?", line)
        if task and m and m.group(1) != "Load":
            dl = float(m.group(6)) if m.group(6) else None
            out[(task, m.group(1).lower())] = (float(m.group(2)), dl)
    return out

def schedlab(path):
    out = {}
    for b in json.load(open(path))["benchmarks"]:
        task = b["params"]["task"]
        ms = {m["name"]: m["data"] for m in b["metrics"]}
        mean = ms[f"latency_mean.{task}"]
        dl = ms.get(f"deadlines_met.{task}")
        for i, load in enumerate(mean["labels"]):
            out[(task, load)] = (mean["values"][i] / 1e6, dl["values"][i] if dl else None)
    return out

ratios = {}
print(f"{'round':>5} {'task':>7} {'load':>8} | {'ib ms':>8} {'sl ms':>8} {'sl/ib':>6} | {'ib dl%':>6} {'sl dl%':>6} {'sl/ib':>6}")
for r in range(1, rounds + 1):
    ib, sl = interbench(f"{tmp}/ib.{r}.txt"), schedlab(f"{tmp}/sl.{r}.json")
    for key in sorted(sl):
        if key not in ib:
            continue
        (im, idl), (sm, sdl) = ib[key], sl[key]
        # interbench prints 0.1 ms steps (us with -r): below one step there is no ratio.
        lr = sm / im if im >= 0.1 else float("nan")
        dr = sdl / idl if (idl and sdl is not None) else float("nan")
        ratios.setdefault(key, []).append((lr, dr))
        f = lambda v: "-" if v is None else f"{v:.1f}"
        print(f"{r:>5} {key[0]:>7} {key[1]:>8} | {im:8.3f} {sm:8.3f} {lr:6.2f} | {f(idl):>6} {f(sdl):>6} {dr:6.2f}")
print()
print("median schedlab/interbench per row (rounds; nan: interbench's mean is below its 0.1 ms print step);")
print("* = more than 20 % apart: explain it with evidence (a trace, a counter) in docs/measurements.md")
for key, rs in sorted(ratios.items()):
    med = lambda xs: statistics.median(xs) if xs else float("nan")
    lat = med([x for x, _ in rs if x == x])
    dl = med([y for _, y in rs if y == y])
    flag = "*" if any(v == v and abs(v - 1) > 0.2 for v in (lat, dl)) else " "
    print(f"{flag} {key[0]:>7} {key[1]:>8}  latency mean {lat:6.2f}  deadlines met {dl:6.2f}")
PY
