#!/usr/bin/env bash
# Two builds of hopper, alternated on PostgreSQL: builds REV_A and REV_B of
# this repository (any git revision; "." is the working tree), then runs
# `hopper bench --driver postgres` A B A B…, each on a fresh database, and
# prints jobs/s, client CPU per job and the PostgreSQL server's CPU per job
# (its backends, reaped by the postmaster: run it as a user who may read
# the postmaster's /proc stat, on a machine where nothing else uses the
# server).
#
#   HOPPER_TEST_POSTGRES_URL=postgres://postgres@127.0.0.1:5432/test?sslmode=disable \
#     bench/ab.sh HEAD~1 . [--reps 3] [--jobs 60000] [--workers 2000]
set -euo pipefail
[ $# -ge 2 ] || { echo "usage: $0 REV_A REV_B [--reps N] [--jobs N] [--workers N]" >&2; exit 2; }
A=$1 B=$2
shift 2
REPS=3 JOBS=60000 W=2000
while [ $# -gt 0 ]; do
	case "$1" in
	--reps) REPS=$2; shift 2 ;;
	--jobs) JOBS=$2; shift 2 ;;
	--workers) W=$2; shift 2 ;;
	*) echo "usage: $0 REV_A REV_B [--reps N] [--jobs N] [--workers N]" >&2; exit 2 ;;
	esac
done
BASE=${HOPPER_TEST_POSTGRES_URL:?set HOPPER_TEST_POSTGRES_URL}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
TMP=$(mktemp -d)
cleanup() {
	for s in a b; do git -C "$ROOT" worktree remove --force "$TMP/$s" 2>/dev/null || true; done
	rm -rf "$TMP"
}
trap cleanup EXIT
build() { # build SIDE REV
	if [ "$2" = . ]; then
		(cd "$ROOT" && go build -o "$TMP/hopper-$1" ./cmd/hopper)
	else
		git -C "$ROOT" worktree add -q --detach "$TMP/$1" "$2"
		(cd "$TMP/$1" && go build -o "$TMP/hopper-$1" ./cmd/hopper)
	fi
}
build a "$A"
build b "$B"
DB=hopper_ab
URL=$(python3 -c 'import sys, urllib.parse as u; p = u.urlsplit(sys.argv[1]); print(u.urlunsplit(p._replace(path="/" + sys.argv[2])))' "$BASE" "$DB")
DATA=$(psql -qXAt "$BASE" -c "SHOW data_directory")
PM=$(head -1 "$DATA/postmaster.pid" 2>/dev/null || true)
HZ=$(getconf CLK_TCK)
ticks() { { [ -n "$PM" ] && awk '{ sub(/^.*\) /, ""); print $14 + $15 }' "/proc/$PM/stat" 2>/dev/null; } || echo 0; }
one() { # one SIDE LABEL
	psql -qX "$BASE" -c "DROP DATABASE IF EXISTS $DB" -c "CREATE DATABASE $DB" 2>/dev/null
	# The previous run's dirty pages written out now, not by a checkpoint
	# during this run (as bench/run.sh's settle does).
	psql -qX "$BASE" -c "CHECKPOINT" && sync
	local t0 t1 out
	t0=$(ticks)
	out=$("$TMP/hopper-$1" bench --driver postgres --db "$URL" --jobs "$JOBS" --workers "$W" --keep 2>&1)
	sleep 0.3 # the run's backends exit with its connections
	t1=$(ticks)
	printf '%-12s %8s jobs/s  client %5s µs/job  server %6s µs/job\n' "$2" \
		"$(awk '/work:/ {print $2}' <<<"$out")" "$(awk '/cpu:/ {print $2}' <<<"$out")" \
		"$(awk -v a="$t0" -v b="$t1" -v j="$JOBS" -v hz="$HZ" 'BEGIN { printf "%.1f", (b - a) / hz * 1e6 / j }')"
}
echo "$JOBS no-op jobs, $W workers, PostgreSQL; server CPU includes the insert phase"
for rep in $(seq "$REPS"); do one a "A $A"; one b "B $B"; done
psql -qX "$BASE" -c "DROP DATABASE IF EXISTS $DB" 2>/dev/null
