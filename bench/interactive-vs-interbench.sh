#!/usr/bin/env bash
# schedlab interactive vs interbench v0.31 (Con Kolivas): the same tasks and
# loads, interleaved row by row (issue 15's peer check).
#
# Usage: bench/interactive-vs-interbench.sh [INTERBENCH_SRC]
#
# interbench is built in a temp dir, never inside the project, from
# INTERBENCH_SRC (argument 1 or the environment): a clone or a bare mirror
# of ckolivas/interbench (commit e612a65, v0.31, is taken from it with `git
# archive`) or a plain directory holding its sources. Without one it is
# cloned from INTERBENCH_GIT (default its GitHub URL). INTERBENCH names an
# already built binary instead.
#
# Each row (task x load) runs `interbench -t SECS -c -W TASK -w LOAD`, then
# `schedlab run interactive:task=TASK,loads=LOAD,duration=SECSs --repeat 1
# --warmup 0 --invocations 1` (the order alternates row by row), so both
# measure SECS of the same task under the same load, moments apart.
# interbench calibrates once (FIFO 99, its loops_per_ms file in its scratch
# dir); schedlab calibrates in its first row and every later row reuses that
# figure (`calibration=`), as interbench reuses its file. Both loads' burn
# count is the CPU count (interbench's -L default).
#
# Printed per round and row: each tool's latency mean +/- sd and max (ms), %
# desired CPU and % deadlines met, the CPU time (ms) of each tool's
# emulated task and the ratios schedlab/interbench of the mean latency, of %
# deadlines met and of that CPU time; then their median per row over the
# rounds, rows more than 20 % apart flagged (explain each with evidence in
# docs/measurements.md). Differences by design: docs/live.md, "interactive".
#
# The emulated task's CPU time shows how much work each tool really did:
# each sizes its work by its own calibration, and where the CPU's speed
# drifts between them the same row does different work. Each tool runs
# under a watcher that reads the CPU time of every thread of its process
# tree every 20 ms (/proc/TID/schedstat, or stat's utime+stime when
# schedstat is off) until the thread exits, so a thread's last 20 ms may be
# missed (the watcher itself takes about 2 % of a CPU). The task is
# interbench's emulation thread (the first thread its bench process
# creates; that process is forked after the load process) and schedlab's
# measuring thread (named schedlab-interactive, "schedlab-intera" in comm).
# KEEP also keeps these records (cpu.TOOL.ROUND.TASK.LOAD.json): their tids
# are what a `perf sched timehist` of the row needs.
#
# Env: SECS (10; interbench rounds it up to a multiple of 10), ROUNDS (1),
# TASKS (audio video x gaming), LOADS (none video x burn write read
# compile), INTERBENCH_SRC, INTERBENCH_GIT, INTERBENCH, IB_DIR (interbench's
# scratch dir: its 1 GB read file and calibration; default a temp dir),
# SCHEDLAB (a built schedlab binary; default: build the release one),
# KEEP (a dir for the raw outputs), BUILD_ONLY=1 (build both, run nothing). Run as root (interbench's
# timekeeper is FIFO), alone on the machine. A full round at SECS=10 takes
# about 10 minutes (26 rows x 2 x 10 s, plus start-up).
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${ROUNDS:-1}
SECS=${SECS:-10}
TASKS=${TASKS:-audio video x gaming}
LOADS=${LOADS:-none video x burn write read compile}
INTERBENCH_SRC=${1:-${INTERBENCH_SRC:-}}
INTERBENCH_GIT=${INTERBENCH_GIT:-https://github.com/ckolivas/interbench.git}
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$PWD/target}
case $SECS in '' | *[!0-9]* | 0) echo "SECS must be a whole number of seconds above 0, not '$SECS'" >&2; exit 2 ;; esac
case $ROUNDS in '' | *[!0-9]* | 0) echo "ROUNDS must be a whole number above 0, not '$ROUNDS'" >&2; exit 2 ;; esac
# interbench runs whole tens of seconds; schedlab runs as long.
SECS=$(( (SECS + 9) / 10 * 10 ))
TMP=$(mktemp -d)
# KEEP=DIR keeps both tools' raw outputs (schedlab's JSON holds the kernel
# counters, e.g. run delay, that explain a row).
trap 'if [ -n "${KEEP:-}" ]; then mkdir -p "$KEEP" && cp "$TMP"/ib.* "$TMP"/sl.* "$TMP"/cpu.* "$KEEP"/ 2>/dev/null; fi; rm -rf "$TMP"' EXIT

# The watcher: `cpuwatch.py OUT.json CMD...` runs CMD and writes, per thread
# of its tree, tid, tgid, ppid, comm, start (ticks) and its last CPU time.
cat >"$TMP/cpuwatch.py" <<'PY'
import json, os, signal, subprocess, sys, time

TICK_NS = 1_000_000_000 // os.sysconf("SC_CLK_TCK")
out, cmd = sys.argv[1], sys.argv[2:]
child = subprocess.Popen(cmd)
# Ctrl-C reaches the whole group: the command decides how to end.
signal.signal(signal.SIGINT, signal.SIG_IGN)
seen = {}

def stat_fields(path):
    s = open(path).read()
    f = s[s.rindex(")") + 2 :].split()
    # f[0] is field 3 (state): ppid is field 4, utime 14, stime 15, starttime 22.
    return int(f[1]), int(f[11]) + int(f[12]), int(f[19])

def walk(pid):
    """Adds the new threads of pid and its descendants; refreshes comm."""
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return
    for tid in map(int, tids):
        base = f"/proc/{pid}/task/{tid}"
        try:
            # A thread names itself after it starts, a child after its exec.
            comm = open(f"{base}/comm").read().rstrip("\n")
            if tid in seen:
                seen[tid]["comm"] = comm
            else:
                ppid, ticks, start = stat_fields(f"{base}/stat")
                # Kept open: a pread per poll is the cheapest read.
                fd = os.open(f"{base}/schedstat", os.O_RDONLY)
                seen[tid] = {"tid": tid, "tgid": pid, "ppid": ppid, "comm": comm, "start": start,
                             "cpu_ns": ticks * TICK_NS, "fd": fd, "base": base}
            kids = open(f"{base}/children").read().split()
        except OSError:
            continue
        for k in kids:
            walk(int(k))

def read(rec):
    try:
        ns = int(os.pread(rec["fd"], 128, 0).split()[0])
        if ns == 0:  # sched_info off: clock ticks instead
            ns = stat_fields(f"{rec['base']}/stat")[1] * TICK_NS
        rec["cpu_ns"] = max(rec["cpu_ns"], ns)
    except (OSError, ValueError, IndexError):
        # It exited: its last reading stands.
        os.close(rec["fd"])
        rec["fd"] = None

polls = 0
while child.poll() is None:
    if polls % 5 == 0:
        walk(child.pid)
    for rec in seen.values():
        if rec["fd"] is not None:
            read(rec)
    polls += 1
    time.sleep(0.02)
with open(out, "w") as f:
    json.dump([{k: v for k, v in r.items() if k not in ("fd", "base")} for r in seen.values()], f)
sys.exit(child.returncode if child.returncode >= 0 else 128 - child.returncode)
PY

if [ -z "${INTERBENCH:-}" ]; then
	command -v make >/dev/null || { echo "make not found: apt-get install make" >&2; exit 2; }
	src=$TMP/interbench-src
	mkdir -p "$src"
	if [ -n "$INTERBENCH_SRC" ] && [ -f "$INTERBENCH_SRC/interbench.c" ] && ! git -C "$INTERBENCH_SRC" rev-parse -q --verify e612a65 >/dev/null 2>&1; then
		cp -r "$INTERBENCH_SRC"/. "$src"
	elif [ -n "$INTERBENCH_SRC" ]; then
		git -C "$INTERBENCH_SRC" rev-parse -q --verify e612a65 >/dev/null 2>&1 \
			|| { echo "$INTERBENCH_SRC is neither interbench's sources nor a clone holding commit e612a65 (v0.31)" >&2; exit 2; }
		git -C "$INTERBENCH_SRC" archive e612a65 | tar -x -C "$src"
	else
		command -v git >/dev/null || { echo "git not found: apt-get install git, or give INTERBENCH_SRC" >&2; exit 2; }
		git clone -q "$INTERBENCH_GIT" "$TMP/clone"
		git -C "$TMP/clone" archive e612a65 | tar -x -C "$src"
	fi
	make -s -C "$src" CC="${CC:-cc}" >"$TMP/make.log" 2>&1 || { cat "$TMP/make.log" >&2; exit 1; }
	INTERBENCH=$src/interbench
fi
"$INTERBENCH" -h 2>&1 | grep -q "interbench v 0.31" || { echo "$INTERBENCH is not interbench v0.31" >&2; exit 2; }
if [ -n "${SCHEDLAB:-}" ]; then
	SL=$SCHEDLAB
else
	cargo build --release -q -p schedlab-cli
	SL=$CARGO_TARGET_DIR/release/schedlab
fi
echo "interbench: $INTERBENCH (v0.31); schedlab: $SL; $SECS s per row, $ROUNDS round(s)"
if [ "${BUILD_ONLY:-0}" = 1 ]; then
	exit 0
fi
[ "$(id -u)" = 0 ] || echo "warning: not root: interbench's timekeeper cannot be FIFO, its results are unreliable" >&2
IB_DIR=${IB_DIR:-$TMP/ib-run}
mkdir -p "$IB_DIR"

ib_name() {
	case $1 in
		none) echo None ;; audio) echo Audio ;; video) echo Video ;; x) echo X ;; gaming) echo Gaming ;;
		burn) echo Burn ;; write) echo Write ;; read) echo Read ;; compile) echo Compile ;;
		*) echo "unknown task or load '$1' (tasks: audio video x gaming; loads: none video x burn write read compile)" >&2; return 2 ;;
	esac
}
for w in $TASKS $LOADS; do ib_name "$w" >/dev/null; done
for t in $TASKS; do case $t in audio | video | x | gaming) ;; *) echo "'$t' is a load, not a task (audio video x gaming)" >&2; exit 2 ;; esac; done

cal=0
row=0
for r in $(seq 1 "$ROUNDS"); do
	for t in $TASKS; do
		for l in $LOADS; do
			# interbench does not measure a task against its own kind.
			[ "$t" = "$l" ] && continue
			ib() {
				# Its read file, loops_per_ms and log live in its working directory.
				(cd "$IB_DIR" && python3 "$TMP/cpuwatch.py" "$TMP/cpu.ib.$r.$t.$l.json" "$INTERBENCH" -t "$SECS" -c -W "$(ib_name "$t")" -w "$(ib_name "$l")") \
					>"$TMP/ib.$r.$t.$l.txt" 2>"$TMP/ib.$r.$t.$l.err" || { cat "$TMP/ib.$r.$t.$l.err" >&2; exit 1; }
			}
			sl() {
				local json=$TMP/sl.$r.$t.$l.json
				python3 "$TMP/cpuwatch.py" "$TMP/cpu.sl.$r.$t.$l.json" "$SL" --db "$TMP/sl.db" run "interactive:task=$t,loads=$l,duration=${SECS}s,calibration=$cal" \
					--invocations 1 --repeat 1 --warmup 0 --export-json "$json" >/dev/null 2>"$json.err" \
					|| { cat "$json.err" >&2; exit 1; }
				if [ "$cal" = 0 ]; then
					cal=$(python3 -c 'import json,sys
for m in json.load(open(sys.argv[1]))["benchmarks"][0]["metrics"]:
    if m["name"] == "calibration_loops_per_ms": print(int(m["data"]["values"][0]))' "$json")
				fi
			}
			if [ $((row % 2)) = 0 ]; then ib; sl; else sl; ib; fi
			row=$((row + 1))
			echo "round $r: $t under $l done ($row rows)" >&2
		done
	done
done
echo "schedlab calibration: $cal loops/ms; interbench: $(cat "$IB_DIR/interbench.loops_per_ms" 2>/dev/null || echo '?') loops/ms (different loops)"

python3 - "$TMP" <<'PY'
import glob, json, os, re, statistics, sys
tmp = sys.argv[1]

def interbench(path):
    """(mean, sd, max ms, desired %, deadlines % or None) of the one row in an interbench output."""
    for line in open(path):
        m = re.match(r"(\w+)\s+([\d.]+) \+/- ([\d.]+)\s+([\d.]+)\s+([\d.e+]+)(?:\s+([\d.e+]+))?\s*$", line)
        if m and m.group(1) != "Load":
            g = [float(x) if x else None for x in m.groups()[1:]]
            return tuple(g)
    raise SystemExit(f"no interbench row in {path}: {open(path).read()}")

def schedlab(path):
    b = json.load(open(path))["benchmarks"][0]
    task = b["params"]["task"]
    ms = {m["name"]: m["data"] for m in b["metrics"]}
    one = lambda n: ms[f"{n}.{task}"]["values"][0] if f"{n}.{task}" in ms else None
    ms_ = lambda n: one(n) / 1e6
    return (ms_("latency_mean"), ms_("latency_sd"), ms_("latency_max"), one("desired_cpu"), one("deadlines_met"))

def task_cpu_ms(path, tool):
    """CPU time (ms) of the emulated task's thread in a cpuwatch record, or None."""
    try:
        recs = json.load(open(path))
    except (OSError, ValueError):
        return None
    if tool == "sl":
        # One measuring thread per row; comm holds 15 bytes of its name.
        ns = [x["cpu_ns"] for x in recs if x["comm"] == "schedlab-intera"]
        return sum(ns) / 1e6 if ns else None
    # interbench forks its load process, then its bench process, whose
    # first new thread runs the task (its timekeeper is the second).
    procs = {x["tid"]: x for x in recs if x["tid"] == x["tgid"]}
    roots = [x for x in procs.values() if x["ppid"] not in procs]
    kids = [x for x in procs.values() if roots and x["ppid"] == roots[0]["tid"]]
    if len(roots) != 1 or len(kids) != 2:
        return None
    bench = max(kids, key=lambda x: (x["start"], x["tid"]))
    threads = [x for x in recs if x["tgid"] == bench["tid"] and x["tid"] != bench["tid"]]
    return min(threads, key=lambda x: (x["start"], x["tid"]))["cpu_ns"] / 1e6 if threads else None

def f(v, w=6, p=2):
    return f"{'-':>{w}}" if v is None else f"{v:{w}.{p}f}"

def ratio(a, b, floor):
    # interbench prints 0.1 ms steps: below one step there is no ratio.
    return b / a if (a is not None and b is not None and a >= floor) else None

rows = {}
print(f"{'rnd':>3} {'task':>6} {'load':>7} | {'interbench: mean +/- sd, max ms':>31} {'cpu%':>5} {'dl%':>5} |"
      f" {'schedlab: mean +/- sd, max ms':>29} {'cpu%':>5} {'dl%':>5} | {'lat':>5} {'dl':>5} |"
      f" {'task CPU ms: ib':>15} {'sl':>6} {'ratio':>5}")
for path in sorted(glob.glob(f"{tmp}/sl.*.json")):
    _, r, t, l, _ = os.path.basename(path).split(".")
    ib, sl = interbench(f"{tmp}/ib.{r}.{t}.{l}.txt"), schedlab(path)
    lr, dr = ratio(ib[0], sl[0], 0.1), ratio(ib[4], sl[4], 1e-9)
    ic, sc = task_cpu_ms(f"{tmp}/cpu.ib.{r}.{t}.{l}.json", "ib"), task_cpu_ms(f"{tmp}/cpu.sl.{r}.{t}.{l}.json", "sl")
    cr = ratio(ic, sc, 1e-9)
    rows.setdefault((t, l), []).append((lr, dr, ic, sc, cr))
    print(f"{r:>3} {t:>6} {l:>7} | {f(ib[0],8)} +/- {f(ib[1],8)} {f(ib[2],8)} {f(ib[3],5,1)} {f(ib[4],5,1)} |"
          f" {f(sl[0],7,3)} +/- {f(sl[1],7,3)} {f(sl[2],8)} {f(sl[3],5,1)} {f(sl[4],5,1)} | {f(lr,5)} {f(dr,5)} |"
          f" {f(ic,15,0)} {f(sc,6,0)} {f(cr,5)}")
print()
print("median schedlab/interbench per row over the rounds (-: no ratio, interbench's mean below its 0.1 ms")
print("print step, or no deadlines); * = more than 20 % apart: explain it with evidence in docs/measurements.md;")
print("task CPU: the emulated task's CPU time (ms) in each tool and their ratio, the work each really did")
for (t, l), rs in sorted(rows.items()):
    med = lambda i: statistics.median(xs) if (xs := [x[i] for x in rs if x[i] is not None]) else None
    lat, dl, ic, sc, cr = (med(i) for i in range(5))
    flag = "*" if any(v is not None and abs(v - 1) > 0.2 for v in (lat, dl)) else " "
    print(f"{flag} {t:>6} {l:>7}  latency mean {f(lat)}  deadlines met {f(dl)}"
          f"  task CPU ms: interbench {f(ic,6,0)} schedlab {f(sc,6,0)} ratio {f(cr)}")
PY
