# evalsite: `make run` serves the dashboard, `make test` runs the whole suite.
SHELL := /bin/bash
VENV := .venv
BIN := $(VENV)/bin
PYTHON ?= $(shell command -v python3.13 || command -v python3.12 || command -v python3)
HOST ?= 127.0.0.1
PORT ?= 8000
# Extra Daphne options, e.g. -v 0 (no access log) or --access-log FILE.
DAPHNE_ARGS ?=

.PHONY: run distributed test install install-test serve migrate demo lint format vendor bench bench-http bench-analysis bench-code-exec clean

$(BIN)/python:
	$(PYTHON) -c 'import sys; assert sys.version_info >= (3, 12), "evalsite needs Python 3.12 or newer"'
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

$(VENV)/.installed: $(BIN)/python pyproject.toml
	$(BIN)/pip install --quiet -e .
	touch $@

$(VENV)/.installed-test: $(VENV)/.installed pyproject.toml
	$(BIN)/pip install --quiet -e '.[test]'
	touch $@

install: $(VENV)/.installed

install-test: $(VENV)/.installed-test

migrate: install
	$(BIN)/python manage.py migrate --no-input

# The demo user's password is made on the first start and printed then, once.
demo: migrate
	$(BIN)/python manage.py seed_demo --host $(HOST) --port $(PORT)

run: demo
	$(BIN)/python manage.py collectstatic --no-input --verbosity 0
	$(BIN)/daphne -b $(HOST) -p $(PORT) $(DAPHNE_ARGS) evalsite.asgi:application

# The distributed mode on this machine's PostgreSQL and Redis: two web server
# processes on one address and two workers (WEB=N, WORKERS=N for others;
# DATABASE_URL, REDIS_URL to choose others).
# Without DATABASE_URL it runs as a PostgreSQL role of its own, with a password
# kept in the data directory; the local superuser only creates it.
distributed: install
	BIN=$(BIN) HOST=$(HOST) PORT=$(PORT) ./scripts/distributed.sh

test: install-test
	./scripts/test.sh

lint: install-test
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

format: install-test
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

# Re-vendor the front-end packages from npm (package.json pins them).
vendor:
	npm install --no-save --no-audit --no-fund
	cp node_modules/htmx.org/dist/htmx.min.js node_modules/htmx.org/LICENSE static/vendor/htmx/
	cp node_modules/htmx-ext-ws/dist/ws.min.js node_modules/htmx-ext-ws/LICENSE static/vendor/htmx-ext-ws/
	mkdir -p static/vendor/chart.js
	cp node_modules/chart.js/dist/chart.umd.min.js node_modules/chart.js/LICENSE.md static/vendor/chart.js/
	# The source map is not vendored: drop the comment that points to it.
	sed -i '/^\/\/# sourceMappingURL=/d' static/vendor/chart.js/chart.umd.min.js

bench: install-test
	$(BIN)/python bench/run.py

# Daphne serving pages and the API to 50 concurrent clients (needs `hey`).
bench-http: install
	$(BIN)/python bench/http_bench.py

# Analysis pages and endpoints on two runs of 100,000 items (SQLite, or a
# scratch PostgreSQL database on DATABASE_URL's server).
bench-analysis: install
	$(BIN)/python bench/analysis_bench.py

# The code_exec scorer over the 164 HumanEval problems, with and without
# bubblewrap, and the cost of one sandboxed program.
bench-code-exec: install-test
	$(BIN)/python bench/code_exec_bench.py

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache
