#!/usr/bin/env bash
# `make distributed`: the distributed mode on this machine, as a working
# example: a web server and $WORKERS workers (default 2) on PostgreSQL
# ($DATABASE_URL, default the local server's "evalsite" database, made when
# missing) and Redis ($REDIS_URL). Ctrl-C stops them all, the workers gracefully.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${BIN:-.venv/bin}
HOST=${HOST:-127.0.0.1}
PORT=${PORT:-8000}
WORKERS=${WORKERS:-2}
export DATABASE_URL=${DATABASE_URL:-postgres://postgres@127.0.0.1:5432/evalsite}
export REDIS_URL=${REDIS_URL:-redis://127.0.0.1:6379/0}
export EVALSITE_EXECUTOR=procrastinate

"$BIN/python" - <<'PY'
import os
import psycopg
from psycopg import sql

url = os.environ["DATABASE_URL"]
base, _, name = url.rpartition("/")
with psycopg.connect(f"{base}/postgres", autocommit=True) as conn:
    if not conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name]).fetchone():
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
        print(f"created database {name}")
PY
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
    setsid "$BIN/python" manage.py evalworker --concurrency 2 &
    pids+=($!)
done
"$BIN/daphne" -b "$HOST" -p "$PORT" evalsite.asgi:application &
pids+=($!)
echo "web server on http://$HOST:$PORT/ with $WORKERS workers (Ctrl-C stops them)"
wait
