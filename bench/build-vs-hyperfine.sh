#!/usr/bin/env bash
# schedlab build vs hyperfine: the same `make -jJOBS` of the same C project,
# with the same untimed clean step before every build (schedlab clean=,
# hyperfine --prepare), one warm-up build each, interleaved ROUNDS times on
# the same CPU set. Prints each side's mean wall time per build, the median
# schedlab/hyperfine ratio and what schedlab adds. Goal: <= 1 %.
#
# The project is generated here in the shape of schedlab's own (UNITS files
# of FUNCS functions, cc -O2, no ccache) and given to schedlab as cmd=, so
# both tools run the very same command. hyperfine runs it without a shell
# (-N); schedlab through /bin/sh -c, which is part of what it adds.
#
# Env: UNITS (16), FUNCS (30), JOBS (2), RUNS (3) builds per side per round,
# ROUNDS (5), CPUS (taskset list for both, default: all), SCHEDLAB (command
# taking "build:PARAMS" that prints the mean wall time in s; default: the
# release `schedlab run`, through bench/figure.py).
set -euo pipefail
cd "$(dirname "$0")/.."
UNITS=${UNITS:-16}
FUNCS=${FUNCS:-30}
JOBS=${JOBS:-2}
RUNS=${RUNS:-3}
ROUNDS=${ROUNDS:-5}
CPUS=${CPUS:-$(cat /sys/devices/system/cpu/online)}
command -v hyperfine >/dev/null || { echo "needs hyperfine (apt install hyperfine)" >&2; exit 2; }
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$PWD/target}
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
if [ -z "${SCHEDLAB:-}" ]; then
	cargo build --release -q -p schedlab-cli
	SCHEDLAB="python3 $PWD/bench/figure.py wall_time $CARGO_TARGET_DIR/release/schedlab --db $WORK/bench.db run"
fi

# The project: the same kind of code as schedlab's generated one.
PROJ=$WORK/proj
mkdir -p "$PROJ"
python3 - "$PROJ" "$UNITS" "$FUNCS" <<'EOF'
import sys
d, units, funcs = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
body = """static unsigned f%(k)d(unsigned x, const unsigned *t)
{
    unsigned a = x * 2654435761u + %(seed)du;
    for (int i = 0; i < 16; i++) {
        a ^= a << 13;
        a ^= a >> 17;
        a ^= a << 5;
        switch ((a + (unsigned)i) & 7u) {
        case 0: a += t[i & 15] * %(k3)du; break;
        case 1: a -= t[(i + 3) & 15] ^ %(k5)du; break;
        case 2: a *= t[(i + 7) & 15] | 1u; break;
        case 3: a = (a >> 3) | (a << 29); break;
        default: a += (unsigned)i * %(k7)du;
        }
    }
    return a;
}
"""
for u in range(units):
    with open(f"{d}/u{u}.c", "w") as f:
        for k in range(funcs):
            f.write(body % dict(k=k, seed=u * 1000 + k, k3=k + 3, k5=k + 5, k7=k + 7))
        table = ", ".join(str((u * 31 + i * 7) % 97) for i in range(16))
        f.write(f"unsigned u{u}(unsigned x)\n{{\n    static const unsigned t[16] = {{{table}}};\n    unsigned s = x;\n")
        f.writelines(f"    s += f{k}(s, t);\n" for k in range(funcs))
        f.write("    return s;\n}\n")
with open(f"{d}/main.c", "w") as f:
    f.writelines(f"unsigned u{u}(unsigned);\n" for u in range(units))
    f.write("int main(void)\n{\n    unsigned s = 1;\n")
    f.writelines(f"    s = u{u}(s);\n" for u in range(units))
    f.write("    return (int)(s & 1u);\n}\n")
objs = " ".join([f"u{u}.o" for u in range(units)] + ["main.o"])
with open(f"{d}/Makefile", "w") as f:
    f.write(f"CC := $(shell command -v cc)\nCFLAGS := -O2\nexport CCACHE_DISABLE := 1\nOBJS := {objs}\n\n"
            "prog: $(OBJS)\n\t$(CC) -o $@ $(OBJS)\n\n%.o: %.c\n\t$(CC) $(CFLAGS) -c -o $@ $<\n\n"
            ".PHONY: clean\nclean:\n\trm -f $(OBJS) prog\n")
EOF
BUILD="make -s -C $PROJ -j$JOBS"
CLEAN="make -s -C $PROJ clean"
# schedlab's logs go to the work dir, not the repository.
cd "$WORK"

median() { sort -g | awk '{ v[NR] = $1 } END { if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
hyper() {
	# Output to a file, as schedlab logs it. (No `-s none`: with it hyperfine
	# 1.15 reports the --prepare make as failing.)
	taskset -c "$CPUS" hyperfine -N --warmup 1 --runs "$RUNS" --prepare "$CLEAN" \
		--output "$WORK/hyperfine-build.log" --export-json "$WORK/h.json" "$BUILD" >/dev/null
	python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["results"][0]["mean"])' "$WORK/h.json"
}
sched() {
	taskset -c "$CPUS" $SCHEDLAB "build:cmd='$BUILD',clean='$CLEAN',jobs=$JOBS" \
		--repeat "$RUNS" --warmup 1 --invocations 1 2>/dev/null
}

echo "# units=$UNITS funcs=$FUNCS jobs=$JOBS runs=$RUNS rounds=$ROUNDS cpus=$CPUS kernel=$(uname -r) $(hyperfine --version)"
: >"$WORK/ratios"
for round in $(seq 1 "$ROUNDS"); do
	if [ $((round % 2)) = 1 ]; then
		h=$(hyper)
		s=$(sched)
	else
		s=$(sched)
		h=$(hyper)
	fi
	r=$(echo "$s $h" | awk '{ print $1 / $2 }')
	printf 'round %d: hyperfine %.4f s  schedlab %.4f s  schedlab/hyperfine %.4f\n' "$round" "$h" "$s" "$r"
	echo "$r" >>"$WORK/ratios"
done
m=$(median <"$WORK/ratios")
printf 'median ratio schedlab/hyperfine %.4f  schedlab adds %.2f %% (goal <= 1 %%)\n' "$m" "$(echo "$m" | awk '{ print ($1 - 1) * 100 }')"
