#!/usr/bin/env bash
# Are schedlab's verdicts right on this machine? Live A/A and A/B checks of
# `compare` (issue 10; figures in docs/statistics.md).
#
#  1. calibrate: CAL_RUNS A/A runs of the default suite -> a noise profile;
#  2. A/A: PAIRS pairs of back-to-back default-suite runs, each compared with
#     the profile and with a fixed 2 % band: the share of tested rows called
#     "better"/"worse"/"changed" is the false-verdict rate (goal <= 5 %);
#  3. A/B: AB_PAIRS pairs of pipe same-cpu under a nice-0 burn on its CPU,
#     at nice 0 against nice 10 (a real, large change): found every time?
#
# Env: CAL_RUNS (5), PAIRS (10; 0 skips calibration and A/A), AB_PAIRS (5).
# Uses a temporary store.
set -euo pipefail
cd "$(dirname "$0")/.."
CAL_RUNS=${CAL_RUNS:-5}
PAIRS=${PAIRS:-10}
AB_PAIRS=${AB_PAIRS:-5}
cargo build --release -q -p schedlab-cli
S="$PWD/target/release/schedlab"
DBDIR=$(mktemp -d)
trap 'rm -rf "$DBDIR"' EXIT
export SCHEDLAB_DB=$DBDIR/verdicts.db

echo "# kernel=$(uname -r) cpus=$(nproc) load=$(cut -d' ' -f1-3 /proc/loadavg) cal_runs=$CAL_RUNS pairs=$PAIRS"
if [ "$PAIRS" -gt 0 ]; then
	"$S" calibrate --runs "$CAL_RUNS" >"$DBDIR/calibrate.txt" 2>&1 || { cat "$DBDIR/calibrate.txt"; exit 1; }
	grep '^saved as noise profile' "$DBDIR/calibrate.txt"
fi

# (verdict cells, tested cells) of one comparison's CSV: tested = cells with
# an interval; wrong = better/worse/changed.
count() {
	awk -F, 'NR > 1 && $10 != "" { t++ } NR > 1 && ($15 == "better" || $15 == "worse" || $15 == "changed") { w++ }
		END { printf "%d %d\n", w + 0, t + 0 }'
}

total_w=0 total_t=0 fixed_w=0 fixed_t=0
for i in $(seq "$PAIRS"); do
	"$S" run >/dev/null 2>&1
	"$S" run >/dev/null 2>&1
	read -r w t < <("$S" compare last~1 last --export-csv - | count)
	read -r fw ft < <("$S" compare last~1 last --noise 2% --export-csv - | count)
	echo "A/A pair $i: profile $w of $t rows; fixed 2% band $fw of $ft rows (load $(cut -d' ' -f1 /proc/loadavg))"
	total_w=$((total_w + w)) total_t=$((total_t + t)) fixed_w=$((fixed_w + fw)) fixed_t=$((fixed_t + ft))
done
[ "$PAIRS" -eq 0 ] || awk -v w=$total_w -v t=$total_t -v fw=$fixed_w -v ft=$fixed_t 'BEGIN {
	printf "A/A live: %d of %d tested rows got a verdict = %.2f%% (noise profile); %d of %d = %.2f%% (fixed 2%% band)\n",
		w, t, 100 * w / t, fw, ft, 100 * fw / ft }'

found=0
for i in $(seq "$AB_PAIRS"); do
	"$S" run pipe:placement=same-cpu,loops=5000 --cpus 0 --load burn:1,cpus=0 --name "ab-nice0-$i" >/dev/null 2>&1
	"$S" run pipe:placement=same-cpu,loops=5000 --cpus 0 --load burn:1,cpus=0 --nice 10 --name "ab-nice10-$i" >/dev/null 2>&1
	line=$("$S" compare "ab-nice0-$i" "ab-nice10-$i" --export-csv - | awk -F, '$2 == "round_trips_per_s" && $10 != ""' | tail -1)
	echo "A/B pair $i: $(echo "$line" | awk -F, '{ printf "%s -> ratio %.3f [%+.1f%%, %+.1f%%] %s", $6, $9, 100 * $10, 100 * $11, $15 }')"
	case "$line" in *,worse) found=$((found + 1)) ;; esac
done
echo "A/B live: nice 10 against nice 0 under a burn found worse in $found of $AB_PAIRS pairs"
