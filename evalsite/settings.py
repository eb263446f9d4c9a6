"""evalsite settings, read from the environment (through ``evalsite.env``).

No variables at all gives the embedded mode: SQLite in WAL mode, the in-memory
channel layer and runs executed inside the server process. ``DATABASE_URL`` and
``REDIS_URL`` switch to PostgreSQL and Redis.
"""

from __future__ import annotations

import importlib.util
import os
from datetime import timedelta
from pathlib import Path

from django.core.exceptions import ImproperlyConfigured

# Before anything that imports httpx (evalsite.env does).
import evalsite.lean_imports  # noqa: F401
from evalsite.databases import databases
from evalsite.env import (
    env_bool,
    env_choice,
    env_fernet_keys,
    env_int,
    env_list,
    env_network_rules,
    env_prices,
    env_secret_bindings,
    env_str,
    local_secret_key,
)
from runs.private_files import private_dir

BASE_DIR = Path(__file__).resolve().parent.parent

DATA_DIR = Path(env_str("EVALSITE_DATA_DIR", str(BASE_DIR / "var")))
# The database, keys and uploads live here: no other account may look in
# (a sandboxed program, any local user). Tightened if an earlier start left
# it open.
private_dir(DATA_DIR)

# Debug pages (and Django's log of every SQL query, which slows a run down)
# only when asked for.
DEBUG = env_bool("EVALSITE_DEBUG", default=False)
SECRET_KEY = env_str("EVALSITE_SECRET_KEY") or local_secret_key(DATA_DIR)
ALLOWED_HOSTS = env_list(
    "EVALSITE_ALLOWED_HOSTS", ["127.0.0.1", "localhost", "[::1]", "testserver"]
)
CSRF_TRUSTED_ORIGINS = env_list("EVALSITE_CSRF_TRUSTED_ORIGINS", [])
# Where people reach the dashboard (https://evals.example.org): links in what
# leaves the site, such as the gate's pull-request report. Unset: paths only.
EVALSITE_BASE_URL = env_str("EVALSITE_BASE_URL").strip().rstrip("/")
if EVALSITE_BASE_URL and not EVALSITE_BASE_URL.startswith(("http://", "https://")):
    raise ImproperlyConfigured(
        f"EVALSITE_BASE_URL must start with http:// or https://, not "
        f"{EVALSITE_BASE_URL!r}"
    )

# Daphne serves the site from its own command (`daphne evalsite.asgi:...`), which
# installs its reactor before Django starts: as an app it would only replace
# `runserver`, at the cost of importing Twisted in every process (evalrun,
# evalworker, migrate), about 0.2 s of CPU each.
INSTALLED_APPS = [
    # The admin's modules are found when the URLs load (evalsite/urls.py), not
    # at set-up: a command that serves no page (evalrun, evalworker, migrate)
    # does not import every page's code through them. The system checks load
    # the URLs before the admin's checks run, so those still see every class.
    "django.contrib.admin.apps.SimpleAdminConfig",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "whitenoise.runserver_nostatic",
    "django.contrib.staticfiles",
    "django.contrib.humanize",
    "channels",
    "runs",
    "axes",
]

# Every middleware here must be able to run synchronously (a plain function or
# class, or MiddlewareMixin; never async-only): evalsite.handlers runs the whole
# chain, the view and the template in ONE worker thread per request, and
# refuses to start otherwise. Under Django's own ASGI handler each
# MiddlewareMixin costs two thread switches per request (15 for a page).
# Code that must run before Django reads the request (e.g. a body-size limit)
# goes in ASGI middleware around the application in evalsite/asgi.py.
# tests/test_http_performance_shape.py counts the switches: at most one.
MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    # Daphne serves no files: WhiteNoise serves static files, before the login check.
    "evalsite.middleware.StaticFiles",  # WhiteNoise, async-capable
    # Below WhiteNoise: static files keep their own headers.
    "evalsite.middleware.ContentSecurityPolicy",
    "evalsite.middleware.PrivateCacheControl",
    "evalsite.middleware.ApiJsonErrors",
    "evalsite.middleware.MultipartHeader",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.auth.middleware.LoginRequiredMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    # Turns a refused log-in into the lockout page. Async-capable and, on any
    # other request, one attribute lookup after the view: no thread hop.
    "axes.middleware.AxesMiddleware",
]

# django-ninja is no installed app: Django imports every app's package at
# set-up, and ninja's imports its whole API machinery (about 0.1 s of every
# command that serves no page, evalrun's included). What the app gave, its
# docs page's template and static files, is found from its directory (located
# without importing it); runs/web/api.py renders the page from this site.
ninja_spec = importlib.util.find_spec("ninja")
if ninja_spec is None or ninja_spec.origin is None:
    raise ImproperlyConfigured("django-ninja is not installed")
NINJA_DIR = Path(ninja_spec.origin).parent

ROOT_URLCONF = "evalsite.urls"
ASGI_APPLICATION = "evalsite.asgi.application"
# Worker threads that serve HTTP requests (evalsite.handlers); each keeps its
# database connection. Python runs one thread at a time, so more threads add
# no speed (1, 2, 4 and 8 measured alike under bench/http_bench.py), but
# enough of them keep pages answering while some requests wait on the
# database's write lock or parse an upload. Under the mixed load with a run
# going, 4 spent less CPU a page than 8 (threads contending for the
# interpreter's lock) and left more of it to the run (bench/README.md).
EVALSITE_HTTP_THREADS = env_int("EVALSITE_HTTP_THREADS", 4, minimum=1)
# "Send one request" to a target, per user: at most this many waiting at a
# time and this many a minute (runs/targets/try_throttle.py; shared through Redis).
# EVALSITE_TRY_CONCURRENCY, the first name, is still read (a system check says
# the new one): "concurrency" is a run's option.
EVALSITE_TRIES_AT_ONCE = env_int(
    "EVALSITE_TRIES_AT_ONCE",
    env_int("EVALSITE_TRY_CONCURRENCY", 2, minimum=1),
    minimum=1,
)
EVALSITE_TRY_PER_MINUTE = env_int("EVALSITE_TRY_PER_MINUTE", 20, minimum=1)

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates", NINJA_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]


# Database: SQLite in WAL mode unless DATABASE_URL names another one.
DATABASE_URL = env_str("DATABASE_URL")
DATABASES = databases(DATABASE_URL, data_dir=DATA_DIR, checkout=BASE_DIR)
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

REDIS_URL = env_str("REDIS_URL")
# A live page's socket waits for its run's events in BZPOPMIN calls that
# block for 5 s on the server (channels_redis' brpop_timeout), while redis-py
# gives up on any read after 5 s (its default socket timeout): an answer a
# moment late on a loaded machine raised TimeoutError in the consumer and
# closed the page's socket. Reads wait longer than the server blocks.
CHANNEL_LAYER_READ_SECONDS = 15
if REDIS_URL:
    CHANNEL_LAYERS = {
        "default": {
            "BACKEND": "channels_redis.core.RedisChannelLayer",
            "CONFIG": {
                "hosts": [
                    {
                        "address": REDIS_URL,
                        "socket_timeout": CHANNEL_LAYER_READ_SECONDS,
                    }
                ],
                "capacity": 1000,
                "expiry": 30,
            },
        }
    }
else:
    CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}

# Sessions are read through a cache in front of the database: a signed-in page
# no longer reads its session row each time. Every write goes to both, so a
# sign-out ends the session at once. With Redis the cache is shared by every
# server process; without it, it is this process's memory, which suits the
# embedded mode (one server process). The user's row is still read on every
# request, so deactivating an account or changing its password still ends its
# sessions at once, from any process.
_LOCAL_CACHE = "django.core.cache.backends.locmem.LocMemCache"
CACHES = {
    "default": {"BACKEND": _LOCAL_CACHE},
    "sessions": (
        {
            "BACKEND": "evalsite.signed_cache.PooledRedisCache",
            "LOCATION": REDIS_URL,
            "KEY_PREFIX": "evalsite-session",
            # Signed JSON under keyed names, never pickles: whatever else
            # reaches the Redis server can neither run code in this process
            # nor read session ids off its keys (evalsite/signed_cache.py).
            "KEY_FUNCTION": "evalsite.signed_cache.hashed_key",
            "OPTIONS": {"serializer": "evalsite.signed_cache.SessionCacheSerializer"},
        }
        if REDIS_URL
        else {
            "BACKEND": _LOCAL_CACHE,
            "LOCATION": "sessions",
            "OPTIONS": {"MAX_ENTRIES": 10_000},
        }
    ),
}
SESSION_ENGINE = "django.contrib.sessions.backends.cached_db"
SESSION_CACHE_ALIAS = "sessions"

# Which launcher executes runs: "local" runs them inside the server process;
# "procrastinate" splits them into shards that `manage.py evalworker`
# processes execute, on any number of machines (README, "Scaling out").
EVALSITE_EXECUTOR = env_choice("EVALSITE_EXECUTOR", "local", ("local", "procrastinate"))
# Resume runs left "running" when the server starts (embedded mode).
EVALSITE_RESUME_ON_START = env_bool("EVALSITE_RESUME_ON_START", default=True)

# -- distributed execution (procrastinate) ---------------------------------------

# procrastinate keeps its jobs in PostgreSQL: its app (and its tables) exist
# only there, so SQLite installations migrate and run as before.
_POSTGRES = DATABASES["default"]["ENGINE"] == "django.db.backends.postgresql"
if _POSTGRES:
    INSTALLED_APPS.insert(INSTALLED_APPS.index("runs"), "procrastinate.contrib.django")
if EVALSITE_EXECUTOR == "procrastinate":
    if not _POSTGRES:
        raise ImproperlyConfigured(
            "EVALSITE_EXECUTOR=procrastinate needs DATABASE_URL to name a "
            "PostgreSQL database (postgres://...): its jobs live there"
        )
    if not REDIS_URL:
        raise ImproperlyConfigured(
            "EVALSITE_EXECUTOR=procrastinate needs REDIS_URL (redis://...): "
            "workers publish live progress through it"
        )
# Items per shard: one procrastinate job each. A crash repeats at most one
# shard's unstored items, and a run spreads over at most total/size workers.
EVALSITE_SHARD_SIZE = env_int("EVALSITE_SHARD_SIZE", 500, minimum=10)
if EVALSITE_SHARD_SIZE > 100_000:
    raise ImproperlyConfigured(
        f"EVALSITE_SHARD_SIZE must be at most 100000, not {EVALSITE_SHARD_SIZE}"
    )
# The procrastinate queue that shards are deferred to (evalworker --queues).
EVALSITE_QUEUE = env_str("EVALSITE_QUEUE", "evalsite").strip() or "evalsite"
# A worker that has not beaten for this long is stalled: its shards are given
# to other workers (it beats every third of it).
EVALSITE_STALL_SECONDS = env_int("EVALSITE_STALL_SECONDS", 30, minimum=2)
# A worker told to stop (SIGTERM) finishes its shards for this long, then
# hands back what is left; a second signal hands it back at once.
EVALSITE_WORKER_GRACE_SECONDS = env_int("EVALSITE_WORKER_GRACE_SECONDS", 60, minimum=0)
PROCRASTINATE_IMPORT_PATHS = ["runs.executor.distributed", "runs.alerts.tasks"]

# Python callables that a `python` target may call, as dotted paths.
EVALSITE_PYTHON_TARGETS = env_list(
    "EVALSITE_PYTHON_TARGETS",
    ["runs.targets.examples.echo", "runs.targets.examples.reverse"],
)

# Python callables that an agent's `python` tool may call, as dotted paths.
EVALSITE_PYTHON_TOOLS = env_list(
    "EVALSITE_PYTHON_TOOLS",
    ["runs.tools.examples.add", "runs.tools.examples.lookup"],
)

# Third-party targets and scorers, as dotted paths (comma-separated): modules
# whose classes register themselves with @register, or the classes themselves.
# They are imported when the app starts; see README, "Plug-ins".
EVALSITE_PLUGINS = env_list("EVALSITE_PLUGINS", [])

# Threads that run scorers' CPU work off the event loop, per process (bounded:
# further scorers wait their turn, within the run's scorer timeout).
EVALSITE_SCORER_WORKERS = env_int("EVALSITE_SCORER_WORKERS", 4, minimum=1)
# The most of them (and of each pool of scorer processes) one project's runs
# hold at once; never all of a pool of two or more, so that a project whose
# scorers overrun their timeout waits for itself while others go on.
EVALSITE_SCORER_WORKERS_PER_PROJECT = env_int(
    "EVALSITE_SCORER_WORKERS_PER_PROJECT",
    max(1, EVALSITE_SCORER_WORKERS // 2),
    minimum=1,
)

# -- secrets and outbound requests ------------------------------------------------

# Project secrets are encrypted with these keys, kept out of the database.
EVALSITE_SECRETS_KEYS = env_fernet_keys("EVALSITE_SECRETS_KEY", DATA_DIR)
EVALSITE_ENV_SECRETS = env_secret_bindings("EVALSITE_ENV_SECRETS")
# Public addresses only: services on this machine's loopback (a status page,
# the server's own pages) are out of targets' reach unless the operator adds
# "loopback" (a model server on this machine) or an address of it.
EVALSITE_TARGET_ALLOW = env_network_rules("EVALSITE_TARGET_ALLOW", ("public",))
EVALSITE_TARGET_DENY = env_network_rules("EVALSITE_TARGET_DENY", ())

_VALIDATORS = "django.contrib.auth.password_validation"
AUTH_PASSWORD_VALIDATORS = [
    {"NAME": f"{_VALIDATORS}.UserAttributeSimilarityValidator"},
    {"NAME": f"{_VALIDATORS}.MinimumLengthValidator"},
    {"NAME": f"{_VALIDATORS}.CommonPasswordValidator"},
    {"NAME": f"{_VALIDATORS}.NumericPasswordValidator"},
]
# Log-in attempts are throttled per username and client address (django-axes):
# after AXES_FAILURE_LIMIT failures, that pair is refused, even with the right
# password, until the cool-off has passed. A successful log-in clears the count.
# Operators list and clear lockouts in the admin or with `axes_reset`.
# runs.projects.auth_backend.UserBackend is Django's ModelBackend with a cheaper read
# of the signed-in user (one per request).
AUTHENTICATION_BACKENDS = [
    "axes.backends.AxesStandaloneBackend",
    "runs.projects.auth_backend.UserBackend",
]
AXES_FAILURE_LIMIT = env_int("EVALSITE_LOGIN_FAILURE_LIMIT", 5, minimum=1)
AXES_COOLOFF_TIME = timedelta(
    minutes=env_int("EVALSITE_LOGIN_COOLOFF_MINUTES", 15, minimum=1)
)
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"]]
AXES_RESET_ON_SUCCESS = True
# Attempts during a lockout do not extend it.
AXES_RESET_COOL_OFF_ON_FAILURE_DURING_LOCKOUT = False
AXES_LOCKOUT_CALLABLE = "runs.projects.login_throttle.lockout_response"
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "runs:run_list"
LOGOUT_REDIRECT_URL = "login"

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
# The site speaks English only. With translation machinery on, every number and
# date a template shows looks up the active language in a context-local
# variable: about a tenth of a page's time, for nothing.
USE_I18N = False
USE_TZ = True

STATIC_URL = "static/"
STATICFILES_DIRS = [BASE_DIR / "static", NINJA_DIR / "static"]
# collectstatic's output; WhiteNoise also serves straight from static/.
STATIC_ROOT = DATA_DIR / "static"
STATIC_ROOT.mkdir(parents=True, exist_ok=True)
# Serve straight from static/ too, so that no collectstatic is needed.
WHITENOISE_USE_FINDERS = True
WHITENOISE_AUTOREFRESH = DEBUG

# The largest body read into memory whole (a JSON request, form fields).
DATA_UPLOAD_MAX_MEMORY_SIZE = env_int(
    "EVALSITE_MAX_UPLOAD_BYTES", 50 * 1024 * 1024, minimum=1024
)
# Request bodies and uploaded files beyond this go to a temporary file on disk.
FILE_UPLOAD_MAX_MEMORY_SIZE = 2 * 1024 * 1024
# The largest dataset file an upload may carry (it is parsed whole: all or nothing).
EVALSITE_MAX_DATASET_BYTES = env_int(
    "EVALSITE_MAX_DATASET_BYTES", 200 * 1024 * 1024, minimum=1024
)
# Request bodies over these sizes are refused (413) before they are read: any
# request's, and that of a request without a signed-in session or an API key.
EVALSITE_MAX_REQUEST_BYTES = env_int(
    "EVALSITE_MAX_REQUEST_BYTES",
    max(EVALSITE_MAX_DATASET_BYTES, DATA_UPLOAD_MAX_MEMORY_SIZE) + 1024 * 1024,
    minimum=1024,
)
EVALSITE_MAX_ANONYMOUS_REQUEST_BYTES = env_int(
    "EVALSITE_MAX_ANONYMOUS_REQUEST_BYTES", 1024 * 1024, minimum=1024
)

# -- HTTPS deployments and browser protections ------------------------------------

# Behind TLS: secure cookies and a redirect of plain HTTP to HTTPS.
EVALSITE_HTTPS = env_bool("EVALSITE_HTTPS", default=False)
SESSION_COOKIE_SECURE = CSRF_COOKIE_SECURE = EVALSITE_HTTPS
SECURE_SSL_REDIRECT = env_bool("EVALSITE_SSL_REDIRECT", default=EVALSITE_HTTPS)
# Strict-Transport-Security; browsers remember it, so it is opt-in.
SECURE_HSTS_SECONDS = env_int("EVALSITE_HSTS_SECONDS", 0, minimum=0)
SECURE_HSTS_INCLUDE_SUBDOMAINS = env_bool("EVALSITE_HSTS_INCLUDE_SUBDOMAINS")
SECURE_HSTS_PRELOAD = env_bool("EVALSITE_HSTS_PRELOAD")
# The header by which a TLS-terminating proxy says the request came over HTTPS
# (e.g. X-Forwarded-Proto); trust it only behind a proxy that sets it itself.
_proxy_header = env_str("EVALSITE_PROXY_SSL_HEADER").strip()
if _proxy_header:
    if not _proxy_header.replace("-", "").isalnum():
        raise ImproperlyConfigured(
            f"EVALSITE_PROXY_SSL_HEADER must be a header name, not {_proxy_header!r}"
        )
    SECURE_PROXY_SSL_HEADER = (
        "HTTP_" + _proxy_header.upper().replace("-", "_"),
        "https",
    )
SESSION_COOKIE_HTTPONLY = True
# Pages send their CSRF token in a header taken from the page, never the cookie.
CSRF_COOKIE_HTTPONLY = True

# Content-Security-Policy: scripts, styles and connections only from this site,
# nothing inline (no inline handlers, no eval: see htmx-config in base.html).
# "enforce" (default), "report-only" or "off".
EVALSITE_CSP = env_choice("EVALSITE_CSP", "enforce", ("enforce", "report-only", "off"))
_CSP_POLICY = {
    "default-src": ["'self'"],
    "script-src": ["'self'"],
    "style-src": ["'self'"],
    "img-src": ["'self'", "data:"],
    "font-src": ["'self'"],
    "connect-src": ["'self'"],
    "object-src": ["'none'"],
    "base-uri": ["'none'"],
    "form-action": ["'self'"],
    "frame-ancestors": ["'none'"],
}
SECURE_CSP = _CSP_POLICY if EVALSITE_CSP == "enforce" else {}
SECURE_CSP_REPORT_ONLY = _CSP_POLICY if EVALSITE_CSP == "report-only" else {}

# The largest item a dataset may hold, measured as its compact JSON.
EVALSITE_MAX_ITEM_BYTES = env_int("EVALSITE_MAX_ITEM_BYTES", 1024 * 1024, minimum=1024)
# What an editor can save: scorers per run, and a target's configuration
# (measured as compact JSON), so that no page or figure grows without bound.
EVALSITE_MAX_SCORERS = env_int("EVALSITE_MAX_SCORERS", 50, minimum=1)
EVALSITE_MAX_TARGET_CONFIG_BYTES = env_int(
    "EVALSITE_MAX_TARGET_CONFIG_BYTES", 64 * 1024, minimum=1024
)
# A dataset's columns (CSV) or distinct fields (any format) at most.
EVALSITE_MAX_COLUMNS = env_int("EVALSITE_MAX_COLUMNS", 2000, minimum=10)
# An OTLP trace request (/api/v1/otlp/v1/traces), as inflated when gzipped,
# and the spans it may hold: an exporter sends batches of some hundreds.
EVALSITE_MAX_OTLP_BYTES = env_int(
    "EVALSITE_MAX_OTLP_BYTES", 8 * 1024 * 1024, minimum=1024
)
EVALSITE_MAX_OTLP_SPANS = env_int("EVALSITE_MAX_OTLP_SPANS", 20_000, minimum=1)
# A YAML file is parsed whole, at about 40 times its size in memory and some
# seconds per MiB even with libyaml: far smaller than other files.
EVALSITE_MAX_YAML_BYTES = env_int(
    "EVALSITE_MAX_YAML_BYTES", 4 * 1024 * 1024, minimum=1024
)
# Reading (parsing and checking) one dataset file stops after this much CPU
# time: a bound on the work of one request, even after its client left.
# Checking a JSON Lines file costs about 0.2 s of CPU per MiB, so 300 s leaves
# a file at the dataset limit ample room.
EVALSITE_MAX_PARSE_SECONDS = env_int("EVALSITE_MAX_PARSE_SECONDS", 300, minimum=1)
# An uploaded file waits this long under EVALSITE_DATA_DIR/uploads for the
# confirmation of its field mapping; each user keeps at most a few such files.
EVALSITE_UPLOAD_TTL_SECONDS = env_int("EVALSITE_UPLOAD_TTL_SECONDS", 3600, minimum=60)

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "loggers": {
        "runs": {
            "handlers": ["console"],
            "level": env_str("EVALSITE_LOG_LEVEL", "INFO"),
        },
    },
}

# -- scorers ------------------------------------------------------------------------

# Python callables that a `python` scorer may call, as dotted paths.
EVALSITE_PYTHON_SCORERS = env_list(
    "EVALSITE_PYTHON_SCORERS",
    ["runs.scorers.examples.non_empty", "runs.scorers.examples.starts_with_expected"],
)

# -- code execution (runs/sandbox/) -------------------------------------------------
# auto and bubblewrap: bubblewrap, and code_exec refuses to run where it cannot
# create its namespaces (never a silent fallback); limits: chosen by the
# operator, for a server running as root where namespaces are unavailable:
# each program as a fresh uid, sockets denied by a seccomp filter.
EVALSITE_SANDBOX = env_choice(
    "EVALSITE_SANDBOX", "auto", ("auto", "bubblewrap", "limits")
)
# Programs run at once per process; the rest wait their turn.
EVALSITE_SANDBOX_WORKERS = env_int(
    "EVALSITE_SANDBOX_WORKERS", os.cpu_count() or 1, minimum=1
)
# The interpreter programs run on; empty: the server's, when an unprivileged
# user can run it, else python3.
EVALSITE_SANDBOX_PYTHON = env_str("EVALSITE_SANDBOX_PYTHON")
# Ceilings on what a code_exec scorer may ask for, per program: parameters
# above them are refused, and stored ones are held to them.
EVALSITE_SANDBOX_MAX_SECONDS = env_int("EVALSITE_SANDBOX_MAX_SECONDS", 60, minimum=1)
EVALSITE_SANDBOX_MAX_MEMORY_MB = env_int(
    "EVALSITE_SANDBOX_MAX_MEMORY_MB", 1024, minimum=64
)
EVALSITE_SANDBOX_MAX_PROCESSES = env_int(
    "EVALSITE_SANDBOX_MAX_PROCESSES", 64, minimum=1
)
EVALSITE_SANDBOX_MAX_FILE_SIZE_MB = env_int(
    "EVALSITE_SANDBOX_MAX_FILE_SIZE_MB", 64, minimum=1
)
EVALSITE_SANDBOX_MAX_OPEN_FILES = env_int(
    "EVALSITE_SANDBOX_MAX_OPEN_FILES", 256, minimum=16
)
EVALSITE_SANDBOX_MAX_OUTPUT_KB = env_int(
    "EVALSITE_SANDBOX_MAX_OUTPUT_KB", 1024, minimum=1
)


# -- tokens and cost -----------------------------------------------------------

# US dollars per million prompt and completion tokens, by model. No vendor's
# prices are shipped: they change without notice, and a stale one would show
# a wrong cost as if it were right; set them here (EVALSITE_PRICES, JSON) or
# in the admin (Model prices), whose rows win. The one default is the offline
# demo model's, a made-up price so that a fresh install shows costs.
EVALSITE_PRICES = env_prices("EVALSITE_PRICES", {"demo": [1.0, 2.0]})


# -- regression alerts -------------------------------------------------------------

# Attempts to send one alert to one channel, the back-off before a retry
# (exponential from this many seconds, with full jitter), and each attempt's
# time limit.
EVALSITE_ALERT_ATTEMPTS = env_int("EVALSITE_ALERT_ATTEMPTS", 4, minimum=1)
EVALSITE_ALERT_RETRY_SECONDS = env_int("EVALSITE_ALERT_RETRY_SECONDS", 2, minimum=0)
EVALSITE_ALERT_TIMEOUT_SECONDS = env_int(
    "EVALSITE_ALERT_TIMEOUT_SECONDS", 10, minimum=1
)
# Email alerts go through Django's default mailer: SMTP to EVALSITE_SMTP_HOST
# (with a user, password and STARTTLS when given), or the console when
# EVALSITE_EMAIL=console (to try channels without a mail server).
_SMTP_OPTIONS: dict[str, object] = {
    "host": env_str("EVALSITE_SMTP_HOST", "localhost"),
    "port": env_int("EVALSITE_SMTP_PORT", 25, minimum=1),
    "use_tls": env_bool("EVALSITE_SMTP_TLS"),
    "timeout": 30,
}
if env_str("EVALSITE_SMTP_USER"):
    _SMTP_OPTIONS |= {
        "username": env_str("EVALSITE_SMTP_USER"),
        "password": env_str("EVALSITE_SMTP_PASSWORD"),
    }
MAILERS = {
    "default": (
        {"BACKEND": "django.core.mail.backends.console.EmailBackend"}
        if env_choice("EVALSITE_EMAIL", "smtp", ("smtp", "console")) == "console"
        else {
            "BACKEND": "django.core.mail.backends.smtp.EmailBackend",
            "OPTIONS": _SMTP_OPTIONS,
        }
    )
}
DEFAULT_FROM_EMAIL = env_str("EVALSITE_EMAIL_FROM", "evalsite@localhost")
# -- saved evaluations ---------------------------------------------------------

# Called with a run once it has ended (runs/executor/endings.py): the saved
# evaluation that made it compares it with its baseline and says so.
EVALSITE_RUN_END_HOOKS = ["runs.evaluations.run_end.run_ended"]
# Embedded mode: the server runs the evaluations' schedules (one server at a
# time, whatever the number). Off, no schedule starts a run in this server.
EVALSITE_SCHEDULES = env_bool("EVALSITE_SCHEDULES", default=True)
