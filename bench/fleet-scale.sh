#!/usr/bin/env bash
# schedlab's PostgreSQL store at fleet scale (issue 18), in three parts:
#
# 1. WRITERS hosts (each its own SQLite store with RUNS/WRITERS simulated
#    runs) push at once, as WRITERS processes, into one PostgreSQL store.
#    Checked: the server holds every run, and a checksum over every run's
#    uuid and raw metric data equals the hosts' (nothing lost or changed).
#    Then all push again: nothing may be added. Prints both wall times.
# 2. The store is grown server-side to HISTORY runs (copies of the pushed
#    runs under new uuids, labels included), then `history` (and `history
#    --by` the writers' label), `compare` of 100 runs against 100, `runs`
#    (by label too) and the browser's run list (`serve`: the first page, a
#    page in the middle and the last, by keyset) are timed against it.
#    Goals (issue 18): history and compare under 1 s each, a page of the
#    run list under 200 ms.
# 3. Sizes: rows and the on-disk size of tables and indexes, per run, for
#    docs/fleet.md's capacity figures.
#
# Env: WRITERS (16), RUNS (1000), HISTORY (100000), SCHEDLAB (the binary;
# default: a release build of this tree), PGURL (an existing
# database to use, e.g. postgres://me@localhost/bench; its schedlab schema
# is dropped first!). Without PGURL a throw-away cluster is started in a
# temporary directory (initdb + pg_ctl, as `nobody` when run as root) and
# removed at the end. Needs PostgreSQL's server binaries (Debian:
# postgresql) and psql. Run it alone on the machine: timings are its output.
set -euo pipefail
cd "$(dirname "$0")/.."
WRITERS=${WRITERS:-16}
RUNS=${RUNS:-1000}
HISTORY=${HISTORY:-100000}
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$PWD/target}
if [ -z "${SCHEDLAB:-}" ]; then
	cargo build --release -q -p schedlab-cli
	SCHEDLAB=$CARGO_TARGET_DIR/release/schedlab
fi
WORK=$(mktemp -d)
PGBIN=
SERVE_PID=
cleanup() {
	if [ -n "$SERVE_PID" ]; then kill "$SERVE_PID" 2>/dev/null || true; wait "$SERVE_PID" 2>/dev/null || true; fi
	if [ -n "$PGBIN" ]; then
		$AS "$PGBIN/pg_ctl" -D "$WORK/pg/data" -m fast stop >/dev/null 2>&1 || true
	fi
	rm -rf "$WORK"
}
trap cleanup EXIT
unset PGHOST PGPORT PGUSER PGDATABASE PGPASSFILE

if [ -z "${PGURL:-}" ]; then
	PGBIN=$(dirname "$(command -v initdb 2>/dev/null || ls -d /usr/lib/postgresql/*/bin/initdb | sort -V | tail -1)")
	[ -x "$PGBIN/pg_ctl" ] || { echo "needs PostgreSQL's initdb and pg_ctl (apt install postgresql)" >&2; exit 2; }
	AS=
	mkdir -p "$WORK/pg"
	echo bench-password >"$WORK/pg/pw"
	if [ "$(id -u)" = 0 ]; then
		chmod 755 "$WORK"
		chown -R nobody: "$WORK/pg"
		AS="runuser -u nobody --"
	fi
	PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
	(cd "$WORK/pg" && $AS "$PGBIN/initdb" -D "$WORK/pg/data" -U postgres --pwfile "$WORK/pg/pw" \
		--auth-local=trust --auth-host=scram-sha-256 -E UTF8 >/dev/null)
	# Durable settings (fsync on): the figures are those of a real server.
	(cd "$WORK/pg" && $AS "$PGBIN/pg_ctl" -D "$WORK/pg/data" -l "$WORK/pg/log" -w \
		-o "-p $PORT -k $WORK/pg -c listen_addresses=127.0.0.1 -c max_connections=100" start >/dev/null)
	PGURL="postgres://postgres:bench-password@127.0.0.1:$PORT/postgres"
fi
export PGURL
psql() { command psql "$PGURL" -v ON_ERROR_STOP=1 -qAt "$@"; }
psql -c "DROP SCHEMA IF EXISTS schedlab CASCADE" 2>/dev/null
SHOWN=$(python3 -c 'import re,sys; print(re.sub(r"//([^:@/]*):[^@/]*@", r"//\1@", sys.argv[1]))' "$PGURL")
echo "store: $SHOWN; $WRITERS writers, $RUNS runs; history over $HISTORY runs"

# Part 1: the hosts' stores, then the concurrent push.
per=$(((RUNS + WRITERS - 1) / WRITERS))
made=0
for w in $(seq 1 "$WRITERS"); do
	for k in $(seq 1 "$per"); do
		[ "$made" -lt "$RUNS" ] || break
		"$SCHEDLAB" --db "$WORK/host$w.db" sim --policy cfs --workload hogs --duration 10ms --seeds 1 \
			--seed "$((made + 1))" --label "writer=w$w" >/dev/null
		made=$((made + 1))
	done
done
checksum_hosts() {
	python3 - "$WORK" <<'EOF'
import glob, hashlib, sqlite3, sys
rows = []
for f in sorted(glob.glob(sys.argv[1] + "/host*.db")):
    c = sqlite3.connect(f)
    rows += c.execute("""SELECT r.uuid, b.seq, m.seq, m.data FROM runs r JOIN benchmarks b ON b.run_id = r.id
                         JOIN metrics m ON m.benchmark_id = b.id""").fetchall()
rows.sort()
print(len({r[0] for r in rows}), hashlib.sha256("\n".join(f"{u}|{b}|{m}|{d}" for u, b, m, d in rows).encode()).hexdigest())
EOF
}
checksum_server() {
	psql -c "COPY (SELECT r.uuid, b.seq, m.seq, m.data FROM schedlab.runs r JOIN schedlab.benchmarks b ON b.run_id = r.id
	                JOIN schedlab.metrics m ON m.benchmark_id = b.id) TO STDOUT WITH (FORMAT csv)" |
		python3 -c '
import csv, hashlib, sys
rows = sorted((u, int(b), int(m), d) for u, b, m, d in csv.reader(sys.stdin))
print(len({r[0] for r in rows}), hashlib.sha256("\n".join(f"{u}|{b}|{m}|{d}" for u, b, m, d in rows).encode()).hexdigest())'
}
push_all() {
	local pids=() failed=0
	for w in $(seq 1 "$WRITERS"); do
		[ -f "$WORK/host$w.db" ] || continue
		"$SCHEDLAB" --db "$WORK/host$w.db" push --to "$PGURL" >"$WORK/push$w.out" 2>&1 & pids+=($!)
	done
	for p in "${pids[@]}"; do wait "$p" || failed=$((failed + 1)); done
	[ "$failed" = 0 ] || { echo "$failed push(es) failed:" >&2; cat "$WORK"/push*.out >&2; exit 1; }
}
t0=$(date +%s.%N); push_all; t1=$(date +%s.%N)
want=$(checksum_hosts); got=$(checksum_server)
echo "first push: $(python3 -c "print(f'{$t1 - $t0:.2f}')") s for $RUNS runs from $WRITERS processes"
echo "  hosts:  runs/sha256 $want"
echo "  server: runs/sha256 $got"
[ "$want" = "$got" ] || { echo "MISMATCH: the server's runs differ from the hosts'" >&2; exit 1; }
t0=$(date +%s.%N); push_all; t1=$(date +%s.%N)
again=$(psql -c "SELECT count(*) FROM schedlab.runs")
echo "second push: $(python3 -c "print(f'{$t1 - $t0:.2f}')") s; runs on the server: $again (must be $RUNS)"
[ "$again" = "$RUNS" ] || exit 1

# Part 2: grow the store server-side, then time the reading commands.
psql <<EOF
DO \$\$
DECLARE n bigint;
BEGIN
  LOOP
    SELECT count(*) INTO n FROM schedlab.runs;
    EXIT WHEN n >= $HISTORY;
    CREATE TEMP TABLE src ON COMMIT DROP AS
      SELECT id FROM schedlab.runs ORDER BY id LIMIT least(n, $HISTORY - n);
    CREATE TEMP TABLE map ON COMMIT DROP AS
      SELECT s.id AS old, nextval(pg_get_serial_sequence('schedlab.runs', 'id')) AS new FROM src s;
    INSERT INTO schedlab.runs (id, name, kind, status, started_unix_ms, ended_unix_ms, schema_version, tool_name,
                               tool_version, git_rev, command_line, host, env_start, env_end, uuid, kernel,
                               cpu_model)
      SELECT m.new, NULL, kind, status, started_unix_ms, ended_unix_ms, schema_version, tool_name, tool_version,
             git_rev, command_line, host, env_start, env_end, gen_random_uuid(), kernel, cpu_model
      FROM schedlab.runs r JOIN map m ON m.old = r.id;
    INSERT INTO schedlab.run_labels (run_id, key, value)
      SELECT m.new, key, value FROM schedlab.run_labels l JOIN map m ON m.old = l.run_id;
    CREATE TEMP TABLE bmap ON COMMIT DROP AS
      SELECT b.id AS old, nextval(pg_get_serial_sequence('schedlab.benchmarks', 'id')) AS new, m.new AS run
      FROM schedlab.benchmarks b JOIN map m ON m.old = b.run_id;
    INSERT INTO schedlab.benchmarks (id, run_id, seq, name, bench_key, params, condition, condition_label, status,
                                     state, started_unix_ms, ended_unix_ms, repetitions, warmup, warnings,
                                     invocation, quick)
      SELECT bm.new, bm.run, seq, name, bench_key, params, condition, condition_label, status, state,
             started_unix_ms, ended_unix_ms, repetitions, warmup, warnings, invocation, quick
      FROM schedlab.benchmarks b JOIN bmap bm ON bm.old = b.id;
    INSERT INTO schedlab.metrics (benchmark_id, seq, name, unit, direction, headline, data_type, data)
      SELECT bm.new, seq, name, unit, direction, headline, data_type, data
      FROM schedlab.metrics x JOIN bmap bm ON bm.old = x.benchmark_id;
    CREATE TEMP TABLE cmap ON COMMIT DROP AS
      SELECT c.id AS old, nextval(pg_get_serial_sequence('schedlab.cases', 'id')) AS new, m.new AS run
      FROM schedlab.cases c JOIN map m ON m.old = c.run_id;
    INSERT INTO schedlab.cases (id, run_id, seq, name, bench_key, case_condition, condition_label, params, quick,
                                invocations)
      SELECT cm.new, cm.run, seq, name, bench_key, case_condition, condition_label, params, quick, invocations
      FROM schedlab.cases c JOIN cmap cm ON cm.old = c.id;
    INSERT INTO schedlab.case_metrics (case_id, seq, name, unit, direction, headline, is_default, histogram, value,
                                       ci_lo, ci_hi, p99, n, replicates)
      SELECT cm.new, seq, name, unit, direction, headline, is_default, histogram, value, ci_lo, ci_hi, p99, x.n,
             replicates
      FROM schedlab.case_metrics x JOIN cmap cm ON cm.old = x.case_id;
    DROP TABLE src; DROP TABLE map; DROP TABLE bmap; DROP TABLE cmap;
  END LOOP;
END \$\$;
ANALYZE;
EOF
echo "store grown to $(psql -c "SELECT count(*) FROM schedlab.runs") runs"
timed() {
	local t0 t1
	t0=$(date +%s.%N)
	"$SCHEDLAB" --db "$PGURL" "$@" >/dev/null
	t1=$(date +%s.%N)
	echo "  $(python3 -c "print(f'{$t1 - $t0:.3f}')") s: schedlab $*"
}
# 100 runs a side, or half the store each when it is smaller.
side=$(psql -c "SELECT least(100, count(*) / 2) FROM schedlab.runs")
ids=$(psql -c "SELECT string_agg(id::text, ',' ORDER BY id) FROM (SELECT id FROM schedlab.runs ORDER BY id LIMIT 2 * $side) t")
a=$(echo "$ids" | cut -d, -f"1-$side")
b=$(echo "$ids" | cut -d, -f"$((side + 1))-$((2 * side))")
timed runs --limit 100
timed runs --limit 100 --label writer=w1
timed compare "$a" "$b"
timed history sim:hogs
rows=$("$SCHEDLAB" --db "$PGURL" history sim:hogs --export-csv - | tail -n +2 | wc -l)
echo "  history sim:hogs has $rows rows (one per run)"
[ "$rows" = "$(psql -c "SELECT count(*) FROM schedlab.runs")" ] || { echo "history lost runs" >&2; exit 1; }
timed history sim:hogs --by label:writer

# The browser: the run list's first page, one in the middle and the last,
# each reached by its keyset link (`?before=ID`) as a browser follows them.
SPORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
"$SCHEDLAB" --db "$PGURL" serve --listen "127.0.0.1:$SPORT" >"$WORK/serve.out" 2>&1 &
SERVE_PID=$!
for _ in $(seq 1 100); do
	curl -s -o /dev/null "http://127.0.0.1:$SPORT/" && break
	sleep 0.1
done
mid=$(psql -c "SELECT id FROM schedlab.runs ORDER BY id OFFSET (SELECT count(*) / 2 FROM schedlab.runs) LIMIT 1")
low=$(psql -c "SELECT id FROM schedlab.runs ORDER BY id OFFSET 40 LIMIT 1")
for page in "/" "/?before=$mid" "/?before=$low" "/?label=writer%3Dw1"; do
	out=$(curl -s -o "$WORK/page.html" -w '%{http_code} %{time_total}' "http://127.0.0.1:$SPORT$page")
	rows=$(grep -o 'type="checkbox"' "$WORK/page.html" | wc -l)
	echo "  ${out#* } s: GET $page (HTTP ${out%% *}, $rows runs listed)"
	[ "${out%% *}" = 200 ] || { echo "the run list failed:" >&2; cat "$WORK/serve.out" >&2; exit 1; }
done
kill "$SERVE_PID"; wait "$SERVE_PID" 2>/dev/null || true; SERVE_PID=

# Part 3: what a run costs on disk.
psql -F ' ' <<'EOF'
SELECT 'rows: runs ' || (SELECT count(*) FROM schedlab.runs) || ', benchmarks ' || (SELECT count(*) FROM schedlab.benchmarks)
       || ', metrics ' || (SELECT count(*) FROM schedlab.metrics) || ', cases ' || (SELECT count(*) FROM schedlab.cases)
       || ', case metrics ' || (SELECT count(*) FROM schedlab.case_metrics);
SELECT 'size: tables ' || pg_size_pretty(sum(pg_table_size(c.oid))) || ', indexes ' || pg_size_pretty(sum(pg_indexes_size(c.oid)))
       || ', per run ' || pg_size_pretty(sum(pg_total_relation_size(c.oid)) / (SELECT count(*) FROM schedlab.runs))
FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = 'schedlab' AND c.relkind = 'r';
SELECT 'index ' || c.relname || ': ' || pg_size_pretty(pg_relation_size(c.oid))
FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = 'schedlab' AND c.relkind = 'i'
ORDER BY pg_relation_size(c.oid) DESC;
EOF
