#!/usr/bin/env bash
# Runs hopper and its peers (River, DBOS, the raw-SQL floor) alternately on
# this machine, 3 repetitions each, and writes bench/results/<date>.md: the
# medians and their ratios, the machine, the versions and this command.
#
#   cd bench && ./run.sh                      # everything, 100,000 jobs, 3 reps
#   ./run.sh --quick --only sqlite            # smoke test: 10,000 jobs, 1 rep
#   ./run.sh --jobs 50000 --only postgres
#   ./run.sh --quick --jobs 2000 --only workflow   # a smaller smoke test
#
# --only: sqlite | postgres | latency | workflow | backlog (repeatable)
# PostgreSQL: $HOPPER_TEST_POSTGRES_URL, default
# postgres://postgres@127.0.0.1:5432/test?sslmode=disable; every PostgreSQL
# run gets a fresh database, dropped after it. SQLite runs use fresh files in
# a temporary directory.
set -euo pipefail

ARGS="$*"
JOBS=
REPS=3
QUICK=0
ONLY=()
LAT_RATE=200
LAT_DUR=10s
while [ $# -gt 0 ]; do
	case "$1" in
	--jobs) JOBS="$2"; shift 2 ;;
	--jobs=*) JOBS="${1#*=}"; shift ;;
	--reps) REPS="$2"; shift 2 ;;
	--quick) QUICK=1; shift ;;
	--only) ONLY+=("$2"); shift 2 ;;
	--only=*) ONLY+=("${1#*=}"); shift ;;
	-h|--help) sed -n '2,15p' "$0"; exit 0 ;;
	*) echo "run.sh: unknown argument $1" >&2; exit 2 ;;
	esac
done
if [ "$QUICK" = 1 ]; then
	JOBS=${JOBS:-10000}
	REPS=1
	LAT_DUR=5s
fi
JOBS=${JOBS:-100000}
WORKFLOWS=$((JOBS / 10))
BACKLOG_BIG=1000000
BACKLOG_SMALL=10000
if [ "$QUICK" = 1 ]; then
	BACKLOG_BIG=100000
	BACKLOG_SMALL=1000
fi

want() { # want GROUP: is GROUP selected by --only?
	[ ${#ONLY[@]} -eq 0 ] && return 0
	local o
	for o in "${ONLY[@]}"; do [ "$o" = "$1" ] && return 0; done
	return 1
}
for o in "${ONLY[@]+"${ONLY[@]}"}"; do
	case "$o" in sqlite|postgres|latency|workflow|backlog) ;; *) echo "run.sh: --only $o: want sqlite, postgres, latency, workflow or backlog" >&2; exit 2 ;; esac
done

cd "$(dirname "$0")"
BENCH_DIR=$(pwd)
PGURL=${HOPPER_TEST_POSTGRES_URL:-postgres://postgres@127.0.0.1:5432/test?sslmode=disable}
TMP=$(mktemp -d "${TMPDIR:-/tmp}/hopper-run-XXXXXX")
export TMPDIR="$TMP" # every program's fresh SQLite file lands here, and goes with it
cleanup() { rm -rf "$TMP"; }
trap cleanup EXIT

log() { printf '%s %s\n' "$(date +%H:%M:%S)" "$*" >&2; }

log "building hopper and the peers"
(cd .. && go build -o "$TMP/hopper" ./cmd/hopper)
go build -o "$TMP/" ./cmd/riverbench ./cmd/dbosbench ./cmd/floor ./cmd/benchtable
H="$TMP/hopper"
BT="$TMP/benchtable"
RAW="$TMP/raw.jsonl"
: >"$RAW"

# Is PostgreSQL there at all?
PG_OK=1
PG_VERSION=$("$BT" pgdb version "$PGURL" 2>"$TMP/pgerr") || { PG_OK=0; PG_VERSION="unreachable: $(tail -1 "$TMP/pgerr")"; }

# newdb prints the URL of a fresh database; dropdb drops it.
newdb() { "$BT" pgdb create "$PGURL"; }
dropdb() { "$BT" pgdb drop "$1" || log "could not drop $1"; }
# settle: before each measured run, write out what the runs before it left
# for the disk (PostgreSQL's dirty buffers, the page cache), so no run pays
# for another's writes.
settle() {
	if [ "$PG_OK" = 1 ]; then "$BT" pgdb settle "$PGURL" >/dev/null 2>&1 || true; fi
	sync
}

# CPU per job, beside the rates (less sensitive to a noisy machine): the
# CPU of the benchmark process and its children (this shell's reaped
# children), and, when PostgreSQL runs on this machine, the CPU of its
# backends that exited during the run (the run's connections and any
# autovacuum workers; the long-lived checkpointer and WAL writer are not
# counted). ticks PID prints PID's reaped children's CPU in clock ticks;
# secs A B the seconds between two counts (empty if either is).
CLK_TCK=$(getconf CLK_TCK 2>/dev/null || echo 100)
ticks() { awk '{ sub(/^.*\) /, ""); print $14 + $15 }' "/proc/$1/stat" 2>/dev/null || true; }
secs() { [ -n "$1" ] && [ -n "$2" ] && awk -v a="$1" -v b="$2" -v t="$CLK_TCK" 'BEGIN { printf "%.3f", (b - a) / t }' || true; }
PGPM=""
if [ "$PG_OK" = 1 ]; then PGPM=$("$BT" pgdb postmaster "$PGURL" 2>/dev/null) || PGPM=""; fi

N=0
# one GROUP ROW SIDE LABEL KIND -- command…
#   KIND is sqlite (no database) or postgres (a fresh database is passed as
#   --db URL, appended to the command). The run's JSON is recorded in RAW.
one() {
	local group="$1" row="$2" side="$3" label="$4" kind="$5"
	shift 6
	N=$((N + 1))
	local out="$TMP/out.$N" err="$TMP/err.$N" db=""
	local cmd=("$@")
	local shown="${cmd[*]} --json"
	shown="${shown//$TMP\//}"
	if [ "$kind" = postgres ]; then
		shown="$shown --db <fresh database>"
		if ! db=$(newdb 2>>"$err"); then
			log "  $label: could not create a database"
			"$BT" add "$RAW" "$group" "$row" "$side" "$label" "$out" "$err" "$shown"
			[ -n "${ALSO_GROUP:-}" ] && "$BT" add "$RAW" "$ALSO_GROUP" "$row" "$side" "$label" "$out" "$err" "$shown"
			return 0
		fi
		cmd+=(--db "$db")
	fi
	settle
	log "  $group | $label"
	local c0 s0="" c1 s1=""
	if [ -n "$PGPM" ] && [ "$kind" = postgres ]; then
		sleep 0.2 # the backends of settle and newdb, reaped before the count
		s0=$(ticks "$PGPM")
	fi
	c0=$(ticks $$)
	if ! timeout 3600 "${cmd[@]}" --json >"$out" 2>"$err"; then
		log "    failed: $(tail -1 "$err")"
	fi
	c1=$(ticks $$)
	if [ -n "$s0" ]; then
		sleep 0.3 # the run's backends exit with its connections
		s1=$(ticks "$PGPM")
	fi
	[ -n "$db" ] && dropdb "$db"
	BENCH_CPU_CLIENT_S=$(secs "$c0" "$c1") BENCH_CPU_SERVER_S=$(secs "$s0" "$s1") \
		"$BT" add "$RAW" "$group" "$row" "$side" "$label" "$out" "$err" "$shown"
	# ALSO_GROUP: the same run is a row of that group as well.
	if [ -n "${ALSO_GROUP:-}" ]; then
		BENCH_CPU_CLIENT_S=$(secs "$c0" "$c1") BENCH_CPU_SERVER_S=$(secs "$s0" "$s1") \
			"$BT" add "$RAW" "$ALSO_GROUP" "$row" "$side" "$label" "$out" "$err" "$shown"
	fi
}

# Does hopper do this? (hopper's postgres driver and workflow mode may not be
# in this checkout yet.)
HOPPER_PG=0
HOPPER_PG_WHY=""
if [ "$PG_OK" = 1 ]; then
	db=$(newdb)
	if "$H" bench --driver postgres --db "$db" --jobs 10 --workers 2 --json >"$TMP/probe" 2>"$TMP/probe.err"; then
		HOPPER_PG=1
	else
		HOPPER_PG_WHY=$(tail -1 "$TMP/probe.err")
	fi
	dropdb "$db"
fi
hopper_wf() { # hopper_wf sqlite|postgres: does `hopper bench --mode workflow` work?
	local db="" ok=1
	local cmd=("$H" bench --mode workflow --driver "$1" --jobs 10 --workers 2 --json)
	if [ "$1" = postgres ]; then
		[ "$HOPPER_PG" = 1 ] || return 1
		db=$(newdb)
		cmd+=(--db "$db")
	fi
	"${cmd[@]}" >"$TMP/probe" 2>"$TMP/probe.err" || ok=0
	[ -n "$db" ] && dropdb "$db"
	[ "$ok" = 1 ]
}

TUNED=(--fetch-cooldown 1ms --fetch-poll-interval 10ms)
RB="$TMP/riverbench"
FL="$TMP/floor"
DB="$TMP/dbosbench"

# ---------------------------------------------------------------- SQLite
if want sqlite; then
	for W in 100 2000; do
		G="Throughput on SQLite, $JOBS jobs, $W workers"
		log "$G"
		for rep in $(seq "$REPS"); do
			one "$G" "" hopper "hopper sqlite" sqlite -- "$H" bench --driver sqlite --jobs "$JOBS" --workers "$W"
			one "$G" "river-sqlite, default fetch" peer "river-sqlite default" sqlite -- "$RB" --driver sqlite --jobs "$JOBS" --workers "$W"
			one "$G" "river-sqlite, tuned fetch" peer "river-sqlite tuned" sqlite -- "$RB" --driver sqlite --jobs "$JOBS" --workers "$W" "${TUNED[@]}"
			if [ "$W" = 100 ]; then
				one "$G" "floor-sqlite realistic (a queue's row, indexes and change feed)" peer "floor-sqlite realistic" sqlite -- "$FL" --driver sqlite --shape realistic --jobs "$JOBS"
				one "$G" "floor-sqlite (synchronous=FULL)" peer "floor-sqlite FULL" sqlite -- "$FL" --driver sqlite --jobs "$JOBS"
				one "$G" "floor-sqlite (synchronous=NORMAL, extra row)" peer "floor-sqlite NORMAL" sqlite -- "$FL" --driver sqlite --jobs "$JOBS" --synchronous NORMAL
			fi
		done
		"$BT" note "$RAW" "$G" "hopper and river-sqlite run with SQLite synchronous=FULL (hopper's default); the NORMAL floor row only shows what FULL costs."
	done
fi

# ---------------------------------------------------------------- PostgreSQL
if want postgres; then
	if [ "$PG_OK" = 0 ]; then
		log "PostgreSQL: $PG_VERSION — skipping the PostgreSQL comparisons"
	else
		for W in 100 2000; do
			G="Throughput on PostgreSQL, $JOBS jobs, $W workers"
			log "$G"
			for rep in $(seq "$REPS"); do
				if [ "$HOPPER_PG" = 1 ]; then
					# --keep: the fresh database is dropped after the run, as
					# the peers' are, so the server's CPU counts no clean-up.
					one "$G" "" hopper "hopper postgres" postgres -- "$H" bench --driver postgres --jobs "$JOBS" --workers "$W" --keep
				fi
				one "$G" "river-pgx, default fetch" peer "river-pgx default" postgres -- "$RB" --driver pgx --jobs "$JOBS" --workers "$W"
				one "$G" "river-pgx, tuned fetch" peer "river-pgx tuned" postgres -- "$RB" --driver pgx --jobs "$JOBS" --workers "$W" "${TUNED[@]}"
				if [ "$W" = 100 ]; then
					one "$G" "floor-postgres" peer "floor-postgres" postgres -- "$FL" --driver postgres --jobs "$JOBS"
					one "$G" "dbos queue (one-step workflows, polling 10ms)" peer "dbos" postgres -- "$DB" --mode throughput --jobs "$JOBS" --workers "$W" --poll-interval 10ms
				fi
			done
			if [ "$HOPPER_PG" = 0 ]; then
				"$BT" note "$RAW" "$G" "hopper skipped: \`hopper bench --driver postgres\` failed in this checkout: $HOPPER_PG_WHY"
			fi
		done
	fi
fi

# ---------------------------------------------------------------- latency
if want latency; then
	G="Latency on SQLite, $LAT_RATE jobs/s for $LAT_DUR"
	log "$G"
	for rep in $(seq "$REPS"); do
		one "$G" "" hopper "hopper sqlite" sqlite -- "$H" bench --driver sqlite --mode latency --rate "$LAT_RATE" --duration "$LAT_DUR"
		one "$G" "river-sqlite, default fetch" peer "river-sqlite default" sqlite -- "$RB" --driver sqlite --mode latency --rate "$LAT_RATE" --duration "$LAT_DUR"
		one "$G" "river-sqlite, tuned fetch" peer "river-sqlite tuned" sqlite -- "$RB" --driver sqlite --mode latency --rate "$LAT_RATE" --duration "$LAT_DUR" "${TUNED[@]}"
	done
	if [ "$PG_OK" = 1 ]; then
		G="Latency on PostgreSQL, $LAT_RATE jobs/s for $LAT_DUR"
		log "$G"
		for rep in $(seq "$REPS"); do
			if [ "$HOPPER_PG" = 1 ]; then
				one "$G" "" hopper "hopper postgres" postgres -- "$H" bench --driver postgres --mode latency --rate "$LAT_RATE" --duration "$LAT_DUR"
			fi
			one "$G" "river-pgx, default fetch" peer "river-pgx default" postgres -- "$RB" --driver pgx --mode latency --rate "$LAT_RATE" --duration "$LAT_DUR"
			one "$G" "river-pgx, tuned fetch" peer "river-pgx tuned" postgres -- "$RB" --driver pgx --mode latency --rate "$LAT_RATE" --duration "$LAT_DUR" "${TUNED[@]}"
		done
		if [ "$HOPPER_PG" = 0 ]; then
			"$BT" note "$RAW" "$G" "hopper skipped: \`hopper bench --driver postgres\` failed in this checkout: $HOPPER_PG_WHY"
		fi
	fi
fi

# ---------------------------------------------------------------- backlog
if want backlog || want sqlite || want postgres; then
	for D in sqlite postgres; do
		if ! want backlog && ! want "$D"; then continue; fi
		if [ "$D" = postgres ] && [ "$HOPPER_PG" = 0 ]; then
			log "backlog on PostgreSQL: skipped, hopper has no PostgreSQL driver in this checkout"
			continue
		fi
		G="Backlog on $D (hopper only): $JOBS jobs, 100 workers, $BACKLOG_BIG vs $BACKLOG_SMALL far-future jobs stored first"
		log "$G"
		for rep in $(seq "$REPS"); do
			one "$G" "" hopper "hopper, backlog $BACKLOG_BIG" "$D" -- "$H" bench --driver "$D" --jobs "$JOBS" --workers 100 --backlog "$BACKLOG_BIG"
			one "$G" "hopper, backlog $BACKLOG_SMALL" peer "hopper, backlog $BACKLOG_SMALL" "$D" -- "$H" bench --driver "$D" --jobs "$JOBS" --workers 100 --backlog "$BACKLOG_SMALL"
		done
		"$BT" note "$RAW" "$G" "Here the \"hopper\" column is the big backlog and the \"peer\" column the small one: a ratio of 1.00× means the backlog costs nothing."
	done
fi

# ---------------------------------------------------------------- workflow
if want workflow; then
	for D in postgres sqlite; do
		if [ "$D" = postgres ] && [ "$PG_OK" = 0 ]; then continue; fi
		G="Workflows on $D: $WORKFLOWS 3-step no-op workflows, 100 at a time; 200 sequential"
		# Each run in the process that starts it: hopper's SkipQueue runs
		# and DBOS's RunWorkflow, each Start + Result from 100 goroutines.
		GD="Workflows on $D, each run in the process that starts it: $WORKFLOWS 3-step no-op workflows from 100 goroutines; 200 sequential"
		log "$G"
		HWF=0
		hopper_wf "$D" && HWF=1
		peer=dbos
		[ "$D" = sqlite ] && peer=dbos-sqlite
		for rep in $(seq "$REPS"); do
			if [ "$HWF" = 1 ]; then
				one "$G" "" hopper "hopper $D" "$D" -- "$H" bench --driver "$D" --mode workflow --jobs "$WORKFLOWS" --workers 100 --keep
				one "$GD" "" hopper "hopper $D direct" "$D" -- "$H" bench --driver "$D" --mode workflow --launch direct --jobs "$WORKFLOWS" --workers 100 --keep
			fi
			one "$G" "$peer, queue (concurrency 100, polling 10ms)" peer "$peer queue tuned" "$D" -- "$DB" --driver "$D" --mode workflow --workflows "$WORKFLOWS" --workers 100 --poll-interval 10ms
			ALSO_GROUP="$GD" one "$G" "$peer, RunWorkflow from 100 goroutines" peer "$peer direct" "$D" -- "$DB" --driver "$D" --mode workflow --workflows "$WORKFLOWS" --workers 100 --launch direct
			if [ "$D" = postgres ]; then
				one "$G" "$peer, queue (concurrency 100, default polling 1s; $((WORKFLOWS / 10)) workflows)" peer "$peer queue default" "$D" -- "$DB" --driver "$D" --mode workflow --workflows "$((WORKFLOWS / 10))" --workers 100
			fi
		done
		if [ "$HWF" = 0 ]; then
			"$BT" note "$RAW" "$GD" "hopper skipped: \`hopper bench --mode workflow --driver $D\` failed in this checkout: $(tail -1 "$TMP/probe.err")"
			"$BT" note "$RAW" "$G" "hopper skipped: \`hopper bench --mode workflow --driver $D\` failed in this checkout: $(tail -1 "$TMP/probe.err")"
		fi
		"$BT" note "$RAW" "$G" "With DBOS's default queue polling (1s) a queue with concurrency 100 starts at most ~100 workflows per second, so that row runs a tenth of the workflows."
	done
fi

# ---------------------------------------------------------------- report
mkdir -p results
OUT="results/$(date +%Y-%m-%d).md"
[ -e "$OUT" ] && OUT="results/$(date +%Y-%m-%d-%H%M%S).md"
ver() { go list -m -f '{{.Version}}' "$1" 2>/dev/null || echo "?"; }
HOPPER_REV=$(git -C .. rev-parse --short HEAD 2>/dev/null || echo "?")
if [ -n "$(git -C .. status --porcelain 2>/dev/null)" ]; then HOPPER_REV="$HOPPER_REV (with uncommitted changes)"; fi
{
	echo "# hopper benchmarks, $(date -u +'%Y-%m-%d %H:%M UTC')"
	echo
	echo "Command: \`cd bench && ./run.sh${ARGS:+ $ARGS}\` ($REPS repetition(s); each comparison alternates hopper and its peers, A B C … A B C …)."
	[ "$QUICK" = 1 ] && echo "**Quick smoke run (--quick): one repetition, 10,000 jobs — not a measurement to quote.**"
	echo
	echo "## Machine"
	echo
	echo "- CPU: $(nproc) cores available, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //')"
	echo "- RAM: $(awk '/MemTotal/ {printf "%.1f GiB", $2/1048576}' /proc/meminfo)"
	echo "- Load average when the report was written: $(cut -d' ' -f1-3 /proc/loadavg)"
	echo "- PostgreSQL: $PG_VERSION"
	echo "- Go: $(go version | cut -d' ' -f3-)"
	echo "- OS: $(uname -sr)"
	echo
	echo "## Versions"
	echo
	echo "- hopper: $HOPPER_REV"
	echo "- River: github.com/riverqueue/river $(ver github.com/riverqueue/river), riverpgxv5 $(ver github.com/riverqueue/river/riverdriver/riverpgxv5), riversqlite $(ver github.com/riverqueue/river/riverdriver/riversqlite)"
	echo "- DBOS Transact Go: $(ver github.com/dbos-inc/dbos-transact-golang)"
	echo "- pgx: $(ver github.com/jackc/pgx/v5); modernc.org/sqlite: $(ver modernc.org/sqlite)"
	echo
	echo "\"tuned fetch\" is River's FetchCooldown=1ms, FetchPollInterval=10ms (defaults: 100ms and 1s). See bench/README.md for what each program measures and how completions are counted."
	echo
	echo "## Results"
	echo
	"$BT" report "$RAW"
} >"$OUT"
cp "$RAW" "${OUT%.md}.jsonl"
log "wrote $BENCH_DIR/$OUT (raw runs: ${OUT%.md}.jsonl)"
