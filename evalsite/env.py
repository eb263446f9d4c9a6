"""Typed readers of the environment for settings, and the installation's keys.

Each reader raises ``ImproperlyConfigured`` on a bad value.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import re
import secrets
import tempfile
from collections.abc import Callable
from pathlib import Path

from django.core.exceptions import ImproperlyConfigured

from runs.calls.netpolicy import Rules
from runs.private_files import FILE_MODE, private_dir, tighten
from runs.secrets.destinations import clean_patterns

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


def local_key(path: Path, make: Callable[[], str]) -> str:
    """A key made once for this installation (``make()``), kept in a file only
    its owner may read; whichever process writes it first wins."""
    if not path.exists():
        private_dir(path.parent)
        # Written aside, then linked into place: the file appears whole, so
        # a process starting at the same moment never reads it empty.
        fd, aside = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
        try:
            with os.fdopen(fd, "w") as f:
                f.write(make())
            with contextlib.suppress(FileExistsError):  # another made it first
                os.link(aside, path)
        finally:
            os.unlink(aside)
    tighten(path, FILE_MODE)  # one copied in, or made by hand
    return path.read_text().strip()


def local_secret_key(data_dir: Path) -> str:
    """Django's secret key, made once and kept beside the database."""
    return local_key(data_dir / "secret_key", lambda: secrets.token_urlsafe(50))


def local_secrets_key(data_dir: Path) -> str:
    """The Fernet key of project secrets, made once, kept outside the database."""
    return local_key(
        data_dir / "secrets_key",
        lambda: base64.urlsafe_b64encode(secrets.token_bytes(32)).decode(),
    )


def env_fernet_keys(name: str, data_dir: Path) -> list[str]:
    """Fernet keys, newest first (it encrypts; all decrypt), or the local key."""
    keys = env_list(name, [])
    for position, key in enumerate(keys, start=1):
        try:
            raw = base64.urlsafe_b64decode(key.encode("ascii"))
        except (ValueError, UnicodeEncodeError):
            raw = b""
        if len(raw) != 32:
            raise ImproperlyConfigured(
                f"{name}: key {position} is not a Fernet key (32 bytes, url-safe "
                "base64); make one with: python -c 'from cryptography.fernet import "
                "Fernet; print(Fernet.generate_key().decode())'"
            )
    return keys or [local_secrets_key(data_dir)]


# Variables the server must never send anywhere, whatever the operator lists.
_SERVER_SECRETS = frozenset(
    {"EVALSITE_SECRET_KEY", "EVALSITE_SECRETS_KEY", "DATABASE_URL", "REDIS_URL"}
)


def env_secret_bindings(name: str) -> dict[str, tuple[str, ...]]:
    """``VAR=host|*.suffix,VAR2=http://host:port``: variables targets may use,
    and where to.

    A variable may only be sent to a URL one of its patterns matches
    (``runs.secrets.destinations``): a host name or address, or ``*.suffix`` for any
    name below suffix, over https on its port 443 unless the pattern says
    ``http://`` or another port.
    """
    bindings: dict[str, tuple[str, ...]] = {}
    for entry in env_list(name, []):
        var, sep, hosts = entry.partition("=")
        var = var.strip()
        patterns = tuple(h.strip() for h in hosts.split("|") if h.strip())
        if not sep or not patterns:
            raise ImproperlyConfigured(
                f"{name}: {entry!r} must be VARIABLE=host, several hosts separated "
                "by |, e.g. OPENAI_API_KEY=api.openai.com"
            )
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", var):
            raise ImproperlyConfigured(f"{name}: {var!r} is not a variable name")
        if var in _SERVER_SECRETS:
            raise ImproperlyConfigured(f"{name}: {var} is the server's own secret")
        try:
            bindings[var] = tuple(clean_patterns(patterns))
        except ValueError as exc:
            raise ImproperlyConfigured(f"{name}: {exc} (for {var})") from None
    return bindings


def env_network_rules(name: str, default: tuple[str, ...]) -> list[str]:
    """Rules of the outbound network policy (see runs/calls/netpolicy.py)."""
    rules = env_list(name, list(default))
    try:
        Rules.parse(rules)
    except ValueError as exc:
        raise ImproperlyConfigured(f"{name}: {exc}") from None
    return rules


def env_prices(name: str, default: dict[str, object]) -> dict[str, tuple[float, float]]:
    """A price table from a JSON object: model -> [prompt, completion] USD per
    million tokens (or {"prompt": ..., "completion": ...}). A name ending in
    ``*`` prices every model whose name starts with what comes before it."""
    raw = os.environ.get(name)
    if raw is None or not raw.strip():
        table: object = default
    else:
        try:
            table = json.loads(raw)
        except ValueError as exc:
            raise ImproperlyConfigured(f"{name} must be JSON: {exc}") from None
    if not isinstance(table, dict):
        raise ImproperlyConfigured(f"{name} must be a JSON object of model: price")
    prices = {}
    for model, price in table.items():
        if isinstance(price, dict) and set(price) == {"prompt", "completion"}:
            price = [price["prompt"], price["completion"]]
        valid = (
            isinstance(price, list | tuple)
            and len(price) == 2
            and all(
                isinstance(p, int | float) and not isinstance(p, bool) and p >= 0
                for p in price
            )
        )
        if not valid:
            raise ImproperlyConfigured(
                f"{name}: the price of {model!r} must be [prompt, completion], "
                "two non-negative numbers of US dollars per million tokens"
            )
        if not re.fullmatch(r"[^*\s](?:[^*]*[^*\s])?\*?|\*", model):
            raise ImproperlyConfigured(
                f"{name}: {model!r} is not a model name (a '*' may only end it)"
            )
        prices[model] = (float(price[0]), float(price[1]))
    return prices
