"""evalsite settings, read from the environment.

No variables at all gives the embedded mode: SQLite in WAL mode, the in-memory
channel layer and runs executed inside the server process. ``DATABASE_URL`` and
``REDIS_URL`` switch to PostgreSQL and Redis.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import tempfile
from pathlib import Path

import dj_database_url
from django.core.exceptions import ImproperlyConfigured

BASE_DIR = Path(__file__).resolve().parent.parent

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off", ""}


def env_str(name: str, default: str = "") -> str:
    return os.environ.get(name, default)


def env_bool(name: str, default: bool = False) -> bool:
    raw = os.environ.get(name)
    if raw is None:
        return default
    value = raw.strip().lower()
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise ImproperlyConfigured(
        f"{name} must be a boolean (1/0, true/false), not {raw!r}"
    )


def env_int(name: str, default: int, *, minimum: int | None = None) -> int:
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ImproperlyConfigured(f"{name} must be an integer, not {raw!r}") from None
    if minimum is not None and value < minimum:
        raise ImproperlyConfigured(f"{name} must be at least {minimum}, not {value}")
    return value


def env_list(name: str, default: list[str]) -> list[str]:
    raw = os.environ.get(name)
    if raw is None:
        return list(default)
    return [part.strip() for part in raw.split(",") if part.strip()]


def env_choice(name: str, default: str, choices: tuple[str, ...]) -> str:
    value = os.environ.get(name, default).strip().lower()
    if value not in choices:
        raise ImproperlyConfigured(
            f"{name} must be one of {', '.join(choices)}, not {value!r}"
        )
    return value


DATA_DIR = Path(env_str("EVALSITE_DATA_DIR", str(BASE_DIR / "var")))


def local_secret_key(data_dir: Path) -> str:
    """A key made once for this installation and kept beside its database."""
    path = data_dir / "secret_key"
    if not path.exists():
        data_dir.mkdir(parents=True, exist_ok=True)
        with contextlib.suppress(FileExistsError):  # another process made it first
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "w") as f:
                f.write(secrets.token_urlsafe(50))
    return path.read_text().strip()


# Debug pages (and Django's log of every SQL query, which slows a run down)
# only when asked for.
DEBUG = env_bool("EVALSITE_DEBUG", default=False)
SECRET_KEY = env_str("EVALSITE_SECRET_KEY") or local_secret_key(DATA_DIR)
ALLOWED_HOSTS = env_list(
    "EVALSITE_ALLOWED_HOSTS", ["127.0.0.1", "localhost", "[::1]", "testserver"]
)
CSRF_TRUSTED_ORIGINS = env_list("EVALSITE_CSRF_TRUSTED_ORIGINS", [])

INSTALLED_APPS = [
    "daphne",
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "whitenoise.runserver_nostatic",
    "django.contrib.staticfiles",
    "django.contrib.humanize",
    "channels",
    "ninja",
    "runs",
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
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.auth.middleware.LoginRequiredMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]

ROOT_URLCONF = "evalsite.urls"
ASGI_APPLICATION = "evalsite.asgi.application"
# Worker threads that serve HTTP requests (evalsite.handlers); each keeps its
# database connection. Python runs one thread at a time, so more threads add
# no speed (1, 2, 4 and 8 measured alike under bench/http_bench.py), but
# enough of them keep pages answering while some requests wait on the
# database's write lock or parse an upload.
EVALSITE_HTTP_THREADS = env_int("EVALSITE_HTTP_THREADS", 8, minimum=1)

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
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
if DATABASE_URL:
    try:
        DATABASES = {
            "default": dj_database_url.parse(
                DATABASE_URL, conn_max_age=60, conn_health_checks=True
            )
        }
    except ValueError as exc:
        raise ImproperlyConfigured(
            f"DATABASE_URL is not a database URL: {exc}"
        ) from None
else:
    DATA_DIR.mkdir(parents=True, exist_ok=True)
    DATABASES = {
        "default": {
            "ENGINE": "django.db.backends.sqlite3",
            "NAME": DATA_DIR / "evalsite.sqlite3",
            # Executors call the database many times a second: keep connections.
            "CONN_MAX_AGE": 60,
            "CONN_HEALTH_CHECKS": True,
            "OPTIONS": {
                # WAL lets the dashboard read while a run writes; IMMEDIATE
                # takes the write lock up front so concurrent writers wait
                # (busy timeout) instead of failing on a lock upgrade.
                "init_command": (
                    "PRAGMA journal_mode=WAL;"
                    "PRAGMA synchronous=NORMAL;"
                    "PRAGMA foreign_keys=ON;"
                ),
                "transaction_mode": "IMMEDIATE",
                "timeout": 30,
            },
            # Tests run executors on other threads: a file (not the shared-cache
            # in-memory database, whose table locks ignore the busy timeout)
            # behaves like the real one. One per process, so suites can overlap.
            "TEST": {
                "NAME": str(
                    Path(tempfile.gettempdir()) / f"evalsite-test-{os.getpid()}.sqlite3"
                )
            },
        }
    }
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

REDIS_URL = env_str("REDIS_URL")
if REDIS_URL:
    CHANNEL_LAYERS = {
        "default": {
            "BACKEND": "channels_redis.core.RedisChannelLayer",
            "CONFIG": {"hosts": [REDIS_URL], "capacity": 1000, "expiry": 30},
        }
    }
else:
    CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}

# Which launcher executes runs: "local" runs them inside the server process.
EVALSITE_EXECUTOR = env_choice("EVALSITE_EXECUTOR", "local", ("local",))
# Resume runs left "running" when the server starts (embedded mode).
EVALSITE_RESUME_ON_START = env_bool("EVALSITE_RESUME_ON_START", default=True)

# Python callables that a `python` target may call, as dotted paths.
EVALSITE_PYTHON_TARGETS = env_list(
    "EVALSITE_PYTHON_TARGETS",
    ["runs.targets.examples.echo", "runs.targets.examples.reverse"],
)

_VALIDATORS = "django.contrib.auth.password_validation"
AUTH_PASSWORD_VALIDATORS = [
    {"NAME": f"{_VALIDATORS}.UserAttributeSimilarityValidator"},
    {"NAME": f"{_VALIDATORS}.MinimumLengthValidator"},
    {"NAME": f"{_VALIDATORS}.CommonPasswordValidator"},
    {"NAME": f"{_VALIDATORS}.NumericPasswordValidator"},
]
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "runs:run_list"
LOGOUT_REDIRECT_URL = "login"

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
# collectstatic's output; WhiteNoise also serves straight from static/.
STATIC_ROOT = DATA_DIR / "static"
STATIC_ROOT.mkdir(parents=True, exist_ok=True)
# Serve straight from static/ too, so that no collectstatic is needed.
WHITENOISE_USE_FINDERS = True
WHITENOISE_AUTOREFRESH = DEBUG

DATA_UPLOAD_MAX_MEMORY_SIZE = env_int(
    "EVALSITE_MAX_UPLOAD_BYTES", 50 * 1024 * 1024, minimum=1024
)
FILE_UPLOAD_MAX_MEMORY_SIZE = DATA_UPLOAD_MAX_MEMORY_SIZE
# The largest dataset file an upload may carry (it is parsed whole: all or nothing).
EVALSITE_MAX_DATASET_BYTES = env_int(
    "EVALSITE_MAX_DATASET_BYTES", 200 * 1024 * 1024, minimum=1024
)

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
