#!/usr/bin/env bash
# The whole suite: on SQLite, then on PostgreSQL with the Redis channel layer
# when those services answer. With CI=true an unreachable service, a missing
# browser or a bubblewrap that cannot run is a failure rather than a skip.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${BIN:-.venv/bin}
PG_HOST=${PG_HOST:-127.0.0.1}
PG_PORT=${PG_PORT:-5432}
REDIS_HOST=${REDIS_HOST:-127.0.0.1}
REDIS_PORT=${REDIS_PORT:-6379}
ci=${CI:-false}

answers() {  # host port
    "$BIN/python" - "$1" "$2" <<'PY'
import socket, sys
try:
    socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=2).close()
except OSError:
    sys.exit(1)
PY
}

# A real browser for the page-flow test (Debian's chromium) and bubblewrap
# for the code-execution sandbox's tests, in one apt-get.
missing=()
command -v chromium >/dev/null 2>&1 || missing+=(chromium)
command -v bwrap >/dev/null 2>&1 || missing+=(bubblewrap)
if [ ${#missing[@]} -gt 0 ]; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
        echo "installing ${missing[*]} for the browser and sandbox tests"
        (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}") \
            >/dev/null 2>&1 || echo "could not install ${missing[*]}"
    fi
fi

"$BIN/ruff" check .
"$BIN/ruff" format --check .
# The type checker, configured in pyproject.toml ([tool.mypy]); its cache is
# .mypy_cache, so a run after a small change checks little again.
"$BIN/mypy"

# Each pass runs over EVALSITE_TEST_WORKERS pytest-xdist processes (2 unless
# set; 0: in one process): its tests mostly wait on programs they start, so two
# processes a pass keep the cores busy. Each worker has a test database and a
# Redis database of its own (tests/conftest.py). Arguments given to this script
# come after, so a -n of one's own wins.
workers=(-n "${EVALSITE_TEST_WORKERS:-2}")
sqlite_suite() {
    env -u DATABASE_URL -u REDIS_URL "$BIN/pytest" "${workers[@]}" "$@"
}
# The PostgreSQL pass leaves out the tests whose programs run on a SQLite
# database of their own (browser pages, evalrun, Daphne in a subprocess) and
# those that use no database (the sandbox's): they ran, exactly so, in the
# SQLite pass (tests/conftest.py says how many).
postgres_suite() {
    DATABASE_URL="postgres://postgres@$PG_HOST:$PG_PORT/evalsite" \
    REDIS_URL="redis://$REDIS_HOST:$REDIS_PORT/0" \
    EVALSITE_TEST_PASS=postgres \
        "$BIN/pytest" "${workers[@]}" "$@"
}

if ! { answers "$PG_HOST" "$PG_PORT" && answers "$REDIS_HOST" "$REDIS_PORT"; }; then
    if [ "$ci" = true ]; then
        echo "PostgreSQL ($PG_HOST:$PG_PORT) or Redis ($REDIS_HOST:$REDIS_PORT) does not answer" >&2
        exit 1
    fi
    echo "== suite on SQLite, in-memory channel layer =="
    sqlite_suite "$@"
    echo "PostgreSQL or Redis does not answer: the PostgreSQL suite was not run" >&2
    exit 0
fi

if [ "${EVALSITE_TEST_SERIAL:-false}" = true ]; then
    echo "== suite on SQLite, in-memory channel layer =="
    sqlite_suite "$@"
    echo "== suite on PostgreSQL, Redis channel layer =="
    postgres_suite "$@"
    exit 0
fi

# The two passes share nothing (a SQLite file per process, their own temporary
# directories, free ports, a PostgreSQL test database per checkout), so they
# run at once: each mostly waits on one core. Each prints as it goes, every
# line under its pass's name; the exit codes come last.
logs=$(mktemp -d)
trap 'rm -rf "$logs"' EXIT
echo "== suite on SQLite and on PostgreSQL at once (EVALSITE_TEST_SERIAL=true: one after the other) =="
echo "   [sqlite]   SQLite, in-memory channel layer"
echo "   [postgres] PostgreSQL, Redis channel layer"
labelled() {  # label command...: the command's output, line by line, labelled
    local label=$1
    shift
    PYTHONUNBUFFERED=1 "$@" 2>&1 | while IFS= read -r line; do
        printf '%s %s\n' "$label" "$line"
    done
    return "${PIPESTATUS[0]}"
}
labelled "[sqlite]  " sqlite_suite --basetemp="$logs/sqlite-tmp" "$@" &
sqlite_pid=$!
labelled "[postgres]" postgres_suite --basetemp="$logs/postgres-tmp" "$@" &
postgres_pid=$!
sqlite_rc=0
wait "$sqlite_pid" || sqlite_rc=$?
postgres_rc=0
wait "$postgres_pid" || postgres_rc=$?
echo "== suite on SQLite, in-memory channel layer: exit $sqlite_rc =="
echo "== suite on PostgreSQL, Redis channel layer: exit $postgres_rc =="
[ "$sqlite_rc" = 0 ] && [ "$postgres_rc" = 0 ]
