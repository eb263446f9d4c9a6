"""The data directory and the files in it, readable by their owner only.

The data directory holds the SQLite database (password hashes, API-key hashes,
every project's items, the sessions), the keys and the uploads: any other
account on the machine, a sandboxed program among them, must not read them.
Files and directories are made with owner-only modes whatever the umask, and
ones found open to others (made by an earlier version, or by hand) are
tightened when this process owns them; ones it does not own are left as they
are, with a warning.

Imported by the settings: nothing here may import Django.
"""

from __future__ import annotations

import contextlib
import logging
import os
import stat
from pathlib import Path

logger = logging.getLogger("evalsite")

DIR_MODE = 0o700
FILE_MODE = 0o600
# SQLite keeps these beside the database while it is open; it makes them with
# the database file's mode.
SQLITE_SIDE_FILES = ("-wal", "-shm", "-journal")


def private_dir(path: Path) -> None:
    """Make ``path`` a directory only its owner may enter; missing parents too."""
    missing = []
    for level in (path, *path.parents):
        if level.exists():
            break
        missing.append(level)
    for level in reversed(missing):
        # The mode of mkdir() is filtered by the umask: chmod says it whole.
        with contextlib.suppress(FileExistsError):  # made by another process
            level.mkdir(mode=DIR_MODE)
            os.chmod(level, DIR_MODE)
    tighten(path, DIR_MODE)


def private_opener(path: str | os.PathLike[str], flags: int) -> int:
    """``open(..., opener=private_opener)``: a new file only its owner may read."""
    return os.open(path, flags, FILE_MODE)


def private_file(path: Path) -> None:
    """Make ``path`` an empty file only its owner may read, unless it exists."""
    with contextlib.suppress(FileExistsError):
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, FILE_MODE))
    tighten(path, FILE_MODE)


def private_sqlite(path: Path) -> None:
    """The SQLite database file (and any journal beside it), owner-only.

    Made before the first connection: SQLite gives its write-ahead log and
    shared-memory file the database file's mode. An empty file is a valid,
    empty database.
    """
    private_file(path)
    for suffix in SQLITE_SIDE_FILES:
        side = path.with_name(path.name + suffix)
        if side.exists():
            tighten(side, FILE_MODE)


def tighten(path: Path, mode: int) -> None:
    """Take away the group's and others' access to ``path``, if it has any."""
    try:
        info = path.stat()
    except FileNotFoundError:
        return
    current = stat.S_IMODE(info.st_mode)
    if not current & 0o077:
        return
    # A directory shared on purpose (sticky, like /tmp) is never taken over.
    if info.st_uid != os.geteuid() or info.st_mode & stat.S_ISVTX:
        logger.warning(
            "%s is open to other accounts (mode %04o) and not this account's "
            "own: give evalsite a directory of its own, mode %04o",
            path,
            current,
            mode,
        )
        return
    os.chmod(path, mode)
    logger.warning(
        "%s was open to other accounts (mode %04o): now %04o", path, current, mode
    )
