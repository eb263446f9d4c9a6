#!/usr/bin/env bash
# `make distributed`: the distributed mode on this machine, as a working
# example: $WEB web server processes (default 2, `manage.py serve`: Daphne
# processes sharing one listening socket) and $WORKERS workers (default 2) on
# PostgreSQL and Redis ($REDIS_URL). Ctrl-C stops them all, the workers
# gracefully.
#
# Without $DATABASE_URL it runs as a PostgreSQL role of its own, not as a
# superuser: the role $PG_NAME (default evalsite), with a password made once
# and kept in $EVALSITE_DATA_DIR/postgres_password (mode 0600), owning the
# database $PG_NAME. $PG_ADMIN_URL (default the local server's passwordless
# postgres superuser) is used only to create them, or to hand over a database
# an earlier version made as the superuser.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${BIN:-.venv/bin}
HOST=${HOST:-127.0.0.1}
PORT=${PORT:-8000}
WORKERS=${WORKERS:-2}
WEB=${WEB:-2}
export REDIS_URL=${REDIS_URL:-redis://127.0.0.1:6379/0}
export EVALSITE_EXECUTOR=procrastinate

if [ -z "${DATABASE_URL:-}" ]; then
    DATABASE_URL=$(
        PG_ADMIN_URL=${PG_ADMIN_URL:-postgres://postgres@127.0.0.1:5432/postgres} \
        PG_NAME=${PG_NAME:-evalsite} "$BIN/python" scripts/postgres_role.py
    )
fi
export DATABASE_URL
case $REDIS_URL in
    *://:*@* | *://*:*@*) ;;
    *) echo "warning: $REDIS_URL has no password: anything that reaches it can read" \
        "and write live progress and signed-in sessions (README, Scaling out)" >&2 ;;
esac

"$BIN/python" manage.py migrate --no-input
"$BIN/python" manage.py seed_demo --host "$HOST" --port "$PORT"
"$BIN/python" manage.py collectstatic --no-input --verbosity 0

pids=()
stop() {
    trap - EXIT INT TERM
    for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
    wait
}
trap stop EXIT INT TERM
# Each worker in a session of its own: Ctrl-C in the terminal reaches this
# script only, whose trap sends each worker one SIGTERM (it finishes its
# shards); a second signal would hand them back unfinished.
for _ in $(seq "$WORKERS"); do
    setsid "$BIN/python" manage.py evalworker --shards 2 &
    pids+=($!)
done
# serve passes the one SIGTERM (or the terminal's SIGINT) on to each of its
# Daphne processes, and ends when they have.
"$BIN/python" manage.py serve --host "$HOST" --port "$PORT" --processes "$WEB" &
pids+=($!)
echo "web server on http://$HOST:$PORT/ ($WEB processes) with $WORKERS workers" \
    "(Ctrl-C stops them)"
wait
