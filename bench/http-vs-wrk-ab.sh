#!/usr/bin/env bash
# schedlab http vs wrk and ab, against the same nginx page (10,701 bytes, the
# size of Debian's stock Apache page) on a loopback port, interleaved ROUNDS
# times (odd rounds tools first, even rounds schedlab first). Prints each
# round's figures, then the median of each ratio against its goal:
#
#   client throughput, keep-alive:  schedlab closed loop (duration=DUR,
#       concurrency=20, client_threads=2) / wrk -t2 -c20 -dDUR   goal >= 0.9
#   client throughput, no keep-alive: schedlab requests=N,concurrency=20
#       / ab -n N -c 20                                          goal >= 1.0
#   client accuracy: schedlab mean response_time / the mean of ab's own
#       per-request times (its -e percentiles; same n and c, same server)
#                                                                 goal within 10 %
#       and the same with schedlab's client on one thread (client_threads=1),
#       as ab's is. Both clients keep C requests outstanding all the time, so
#       by Little's law each one's mean is C / its own requests/s: the line
#       "outstanding" prints mean x requests/s / C for each (1.0: every
#       connection always busy). The mean ratio is then the inverse of the
#       throughput ratio: a client faster than ab reports shorter times, the
#       difference being ab's own queueing (one thread reading every
#       response in turn, its CPU shared with the server).
#   built-in server: wrk's requests/s against schedlab's built-in server
#       (server=event, then server=threads) / against nginx      goal >= 1.0
#   open loop: schedlab rate=RATE for DUR, achieved / asked        goal within 1 %
#
# The built-in server is kept up for wrk by a schedlab soak of the same
# length at 1 request/s (rate=1) on a fixed port; the soak's own 1 req/s is
# noise next to wrk's load.
#
# Env: ROUNDS (5), N (5000), C (20), DUR (5) seconds, RATE (2000) req/s,
# SERVER_CPUS and CLIENT_CPUS (taskset lists for the server and the load
# tools; default: unpinned, all sharing the CPUs as ab does on one host),
# NGINX (nginx binary, default: from PATH or /usr/sbin), SCHEDLAB (the
# schedlab binary; default: the release build).
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${ROUNDS:-5}
N=${N:-5000}
C=${C:-20}
DUR=${DUR:-5}
RATE=${RATE:-2000}
SERVER_CPUS=${SERVER_CPUS:-}
CLIENT_CPUS=${CLIENT_CPUS:-}
NGINX=${NGINX:-$(command -v nginx || echo /usr/sbin/nginx)}
for tool in wrk ab python3; do
	command -v "$tool" >/dev/null || { echo "needs $tool (apt install wrk apache2-utils python3)" >&2; exit 2; }
done
[ -x "$NGINX" ] || { echo "needs nginx (apt install nginx-light)" >&2; exit 2; }
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$PWD/target}
WORK=$(mktemp -d)
NGINX_PID=
cleanup() {
	[ -n "$NGINX_PID" ] && kill "$NGINX_PID" 2>/dev/null && wait "$NGINX_PID" 2>/dev/null
	rm -rf "$WORK"
}
trap cleanup EXIT
if [ -z "${SCHEDLAB:-}" ]; then
	cargo build --release -q -p schedlab-cli
	SCHEDLAB=$CARGO_TARGET_DIR/release/schedlab
fi
FIG="python3 $PWD/bench/figure.py"
DB=$WORK/bench.db
on() { if [ -n "$1" ]; then echo "taskset -c $1"; fi; }
SRV=$(on "$SERVER_CPUS")
CLI=$(on "$CLIENT_CPUS")
SCHED_CPUS=()
[ -n "$SERVER_CPUS" ] && SCHED_CPUS=(--cpus "$SERVER_CPUS")
CLIENT_PARAM=
[ -n "$CLIENT_CPUS" ] && CLIENT_PARAM=",client_cpus=$CLIENT_CPUS"

free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
wait_port() {
	python3 - "$1" <<'EOF'
import socket, sys, time
end = time.time() + 10
while time.time() < end:
    try:
        socket.create_connection(("127.0.0.1", int(sys.argv[1])), 0.2).close()
        sys.exit(0)
    except OSError:
        time.sleep(0.02)
sys.exit("the server did not come up")
EOF
}

# nginx on a loopback port, config and page in the work dir (readable by
# its workers, which run as nobody when nginx starts as root).
chmod 755 "$WORK"
mkdir -p "$WORK/html"
head -c 10701 /dev/zero | tr '\0' 'x' >"$WORK/html/index.html"
PORT=$(free_port)
cat >"$WORK/nginx.conf" <<EOF
daemon off;
worker_processes auto;
pid $WORK/nginx.pid;
error_log $WORK/error.log;
events { worker_connections 4096; }
http {
    access_log off;
    keepalive_requests 1000000;
    client_body_temp_path $WORK/body;
    proxy_temp_path $WORK/proxy;
    fastcgi_temp_path $WORK/fastcgi;
    uwsgi_temp_path $WORK/uwsgi;
    scgi_temp_path $WORK/scgi;
    server { listen 127.0.0.1:$PORT; root $WORK/html; }
}
EOF
$SRV "$NGINX" -p "$WORK" -c "$WORK/nginx.conf" &
NGINX_PID=$!
wait_port "$PORT"
URL=http://127.0.0.1:$PORT/

wrk_rps() { $CLI wrk -t2 -c"$C" -d"${DUR}s" "$1" | awk '/^Requests\/sec:/ { print $2 }'; }
ab_run() {
	$CLI ab -q -n "$N" -c "$C" -e "$WORK/ab.csv" "$URL" >"$WORK/ab.out"
	grep -q '^Failed requests: *0$' "$WORK/ab.out" || { echo "ab saw failed requests" >&2; cat "$WORK/ab.out" >&2; exit 1; }
	# Requests/s, then the mean of each request's own total time in ms, from
	# ab's percentile table (-e, 0.001 ms resolution; the trapezoid over the
	# 101 points). ab's "Time per request" line is not a per-request time:
	# it is concurrency x elapsed / requests, which counts the client's own
	# time between requests too.
	r=$(awk '/^Requests per second:/ { print $4 }' "$WORK/ab.out")
	t=$(awk -F, 'NR > 1 { v[n++] = $2 } END { for (i = 1; i < n; i++) s += (v[i-1] + v[i]) / 2; print s / (n - 1) }' "$WORK/ab.csv")
	echo "$r $t"
}
sl() { $FIG "$@"; }
sched_ka() {
	sl requests_per_s "$SCHEDLAB" --db "$DB" run --repeat 1 --warmup 1 --invocations 1 \
		"http:url=$URL,duration=${DUR}s,concurrency=$C,keepalive=on,client_threads=2$CLIENT_PARAM"
}
sched_ab() {
	# requests/s and the mean response time (ns) of one run; $1: more parameters.
	local args=("$SCHEDLAB" --db "$DB" run --repeat 1 --warmup 1 --invocations 1
		"http:url=$URL,requests=$N,concurrency=$C$CLIENT_PARAM${1:-}")
	python3 - "${args[@]}" <<'EOF'
import json, subprocess, sys
out = subprocess.run(sys.argv[1:] + ["--json", "-"], capture_output=True, text=True)
if out.returncode != 0:
    sys.exit(out.stderr)
b = json.loads(out.stdout)["benchmarks"][0]
m = {x["name"]: x["data"] for x in b["metrics"]}
h = m["response_time"]["histogram"]["buckets"]
mean = sum(v * c for v, c in h) / sum(c for _, c in h)
print(m["requests_per_s"]["values"][0], mean)
EOF
}
sched_open() {
	sl rate_achieved "$SCHEDLAB" --db "$DB" run --repeat 1 --warmup 1 --invocations 1 \
		"http:url=$URL,duration=${DUR}s,rate=$RATE,concurrency=$C,keepalive=on$CLIENT_PARAM"
}
builtin_wrk() {
	# The built-in server (model $1) kept up by a 1 req/s soak while wrk loads it.
	local port
	port=$(free_port)
	"$SCHEDLAB" --db "$DB" run --repeat 1 --warmup 0 --invocations 1 "${SCHED_CPUS[@]}" \
		"http:server=$1,listen=127.0.0.1:$port,duration=$((DUR + 3))s,rate=1,concurrency=1$CLIENT_PARAM" \
		>/dev/null 2>&1 &
	local soak=$!
	wait_port "$port"
	sleep 0.5
	wrk_rps "http://127.0.0.1:$port/"
	wait "$soak"
}

median() { sort -g | awk '{ v[NR] = $1 } END { if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
ratio() { echo "$1 $2" | awk '{ print $1 / $2 }'; }

echo "# rounds=$ROUNDS n=$N c=$C dur=${DUR}s rate=$RATE server_cpus=${SERVER_CPUS:-all} client_cpus=${CLIENT_CPUS:-all} kernel=$(uname -r) $("$NGINX" -v 2>&1) $(wrk -v 2>&1 | head -1 | cut -d' ' -f1-2)"
: >"$WORK/r.ka"; : >"$WORK/r.ab"; : >"$WORK/r.acc"; : >"$WORK/r.acc1"; : >"$WORK/r.ev"; : >"$WORK/r.th"; : >"$WORK/r.open"
: >"$WORK/l.ab"; : >"$WORK/l.s"; : >"$WORK/l.s1"
for round in $(seq 1 "$ROUNDS"); do
	if [ $((round % 2)) = 1 ]; then
		w=$(wrk_rps "$URL"); s_ka=$(sched_ka)
		read -r a_rps a_ms < <(ab_run); read -r s_rps s_ns < <(sched_ab); read -r s1_rps s1_ns < <(sched_ab ,client_threads=1)
	else
		s_ka=$(sched_ka); w=$(wrk_rps "$URL")
		read -r s1_rps s1_ns < <(sched_ab ,client_threads=1); read -r s_rps s_ns < <(sched_ab); read -r a_rps a_ms < <(ab_run)
	fi
	ev=$(builtin_wrk event)
	th=$(builtin_wrk threads)
	open=$(sched_open)
	ratio "$s_ka" "$w" >>"$WORK/r.ka"
	ratio "$s_rps" "$a_rps" >>"$WORK/r.ab"
	ratio "$(echo "$s_ns" | awk '{ print $1 / 1e6 }')" "$a_ms" >>"$WORK/r.acc"
	ratio "$(echo "$s1_ns" | awk '{ print $1 / 1e6 }')" "$a_ms" >>"$WORK/r.acc1"
	# Little's law: mean (s) x requests/s / C, 1.0 when C are always outstanding.
	echo "$a_ms $a_rps $C" | awk '{ print $1 / 1e3 * $2 / $3 }' >>"$WORK/l.ab"
	echo "$s_ns $s_rps $C" | awk '{ print $1 / 1e9 * $2 / $3 }' >>"$WORK/l.s"
	echo "$s1_ns $s1_rps $C" | awk '{ print $1 / 1e9 * $2 / $3 }' >>"$WORK/l.s1"
	ratio "$ev" "$w" >>"$WORK/r.ev"
	ratio "$th" "$w" >>"$WORK/r.th"
	echo "$open" >>"$WORK/r.open"
	printf 'round %d: wrk->nginx %.0f/s  schedlab(ka)->nginx %.0f/s  ab %.0f/s %.3f ms  schedlab %.0f/s %.3f ms  (1 thread %.0f/s %.3f ms)  wrk->builtin event %.0f/s threads %.0f/s  open loop %.4f of %s/s\n' \
		"$round" "$w" "$s_ka" "$a_rps" "$a_ms" "$s_rps" "$(echo "$s_ns" | awk '{ print $1 / 1e6 }')" "$s1_rps" "$(echo "$s1_ns" | awk '{ print $1 / 1e6 }')" "$ev" "$th" "$open" "$RATE"
done
printf 'median schedlab/wrk requests/s (keep-alive)   %.3f (goal >= 0.9)\n' "$(median <"$WORK/r.ka")"
printf 'median schedlab/ab requests/s                  %.3f (goal >= 1.0)\n' "$(median <"$WORK/r.ab")"
printf 'median schedlab/ab mean time per request       %.3f (goal 0.9 .. 1.1)\n' "$(median <"$WORK/r.acc")"
printf 'median same, client_threads=1                  %.3f (goal 0.9 .. 1.1)\n' "$(median <"$WORK/r.acc1")"
printf 'median outstanding (mean x req/s / C): ab %.3f  schedlab %.3f  schedlab 1 thread %.3f (1.0: C always outstanding)\n' \
	"$(median <"$WORK/l.ab")" "$(median <"$WORK/l.s")" "$(median <"$WORK/l.s1")"
printf 'median built-in event / nginx, served to wrk   %.3f (goal >= 1.0)\n' "$(median <"$WORK/r.ev")"
printf 'median built-in threads / nginx, served to wrk %.3f (goal >= 1.0)\n' "$(median <"$WORK/r.th")"
printf 'median open loop achieved / asked              %.4f (goal 0.99 .. 1.01)\n' "$(median <"$WORK/r.open")"
