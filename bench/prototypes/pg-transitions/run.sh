#!/usr/bin/env bash
# Prototypes of PostgreSQL job transitions, measured in SQL against a hopper
# schema (see README.md). Usage: ./run.sh [--reps N] [--jobs N]
# Needs psql and HOPPER_TEST_POSTGRES_URL (a database this script may create
# another database beside); builds hopper from this checkout.
set -euo pipefail
REPS=3
JOBS=20000
while [ $# -gt 0 ]; do
	case "$1" in
	--reps) REPS=$2; shift 2 ;;
	--jobs) JOBS=$2; shift 2 ;;
	*) echo "usage: $0 [--reps N] [--jobs N]" >&2; exit 2 ;;
	esac
done
BASE=${HOPPER_TEST_POSTGRES_URL:?set HOPPER_TEST_POSTGRES_URL}
HERE=$(cd "$(dirname "$0")" && pwd)
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
(cd "$HERE/../../.." && go build -o "$TMP/hopper" ./cmd/hopper)
DB=hopper_proto_transitions
admin() { psql -qX "$BASE" -c "$1"; }
admin "DROP DATABASE IF EXISTS $DB"
admin "CREATE DATABASE $DB"
URL=$(python3 -c 'import sys, urllib.parse as u; p = u.urlsplit(sys.argv[1]); print(u.urlunsplit(p._replace(path="/" + sys.argv[2])))' "$BASE" "$DB")
"$TMP/hopper" bench --driver postgres --db "$URL" --jobs "$JOBS" --workers 100 --keep >/dev/null
Q=$(psql -qXAt "$URL" -c "SELECT queue FROM hopper.jobs LIMIT 1")
P=(psql -qX "$URL" -v ON_ERROR_STOP=1)
PGOPTIONS="-c proto.queue=$Q -c client_min_messages=warning"
export PGOPTIONS
"${P[@]}" -f "$HERE/feeds.sql"
trig() { # the jobs update trigger: current (the schema's) | lookup | max | off | stmt | keyed
	"${P[@]}" -c "DROP TRIGGER IF EXISTS proto_change_key ON hopper.jobs" -c "DROP INDEX IF EXISTS hopper.proto_changes_entities" \
		-c "DROP TRIGGER jobs_change_update ON hopper.jobs"
	local fn=hopper.jobs_change_update
	case "$1" in
	off) fn="" ;;
	lookup) fn=hopper.proto_change_lookup ;;
	max) fn=hopper.proto_change_max ;;
	stmt) fn=hopper.proto_change_stmt ;;
	keyed)
		fn=hopper.proto_change_stmt
		"${P[@]}" -c "CREATE TRIGGER proto_change_key BEFORE UPDATE ON hopper.jobs FOR EACH ROW EXECUTE FUNCTION hopper.proto_change_key()" \
			-c "CREATE INDEX proto_changes_entities ON hopper.proto_changes USING gin (entity_ids)"
		;;
	esac
	"${P[@]}" -c "CREATE TRIGGER jobs_change_update AFTER UPDATE ON hopper.jobs REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION ${fn:-hopper.jobs_change_update}()"
	[ -n "$fn" ] || "${P[@]}" -c "ALTER TABLE hopper.jobs DISABLE TRIGGER jobs_change_update"
}
N=$((200 * 50))
printf '%-34s %12s %12s %12s\n' "variant (10,000 claims and finishes)" "claims ms" "finishes ms" "µs/job"
for rep in $(seq "$REPS"); do
	for v in lookup:current current:current max:current off:current stmt:current keyed:current off:split; do
		feed=${v%%:*} shape=${v#*:}
		trig "$feed"
		"${P[@]}" -f "$HERE/setup.sql" >/dev/null
		mapfile -t ms < <("${P[@]}" -f "$HERE/$shape.sql" | awk '/^Time:/ {print $2}')
		"${P[@]}" -c "ALTER TABLE hopper.jobs ENABLE TRIGGER jobs_change_update" >/dev/null
		printf '%-34s %12s %12s %12s\n' "$shape, feed $feed" "${ms[0]}" "${ms[1]}" \
			"$(awk -v a="${ms[0]}" -v b="${ms[1]}" -v n=$N 'BEGIN {printf "%.1f", (a + b) * 1000 / n}')"
	done
done
trig current
admin "DROP DATABASE $DB"
