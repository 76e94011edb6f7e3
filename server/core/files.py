"""Owner-only modes for the data directory (0700) and its files (0600), whatever the umask.

Runs in every process that opens the data directory (server, CLI). SQLite gives the -wal and
-shm files the mode of the database file, so creating that file 0600 first covers them.
"""

from __future__ import annotations

import os
from pathlib import Path

DIR_MODE = 0o700
FILE_MODE = 0o600


def secure_dir(path: Path) -> None:
    """Create `path` (and missing parents) owner-only, and tighten it if it exists."""
    path.mkdir(mode=DIR_MODE, parents=True, exist_ok=True)
    os.chmod(path, DIR_MODE)


def secure_file(path: Path) -> None:
    """Create `path` empty if missing; make it and its SQLite companions 0600, its folder 0700."""
    secure_dir(path.parent)
    fd = os.open(path, os.O_CREAT | os.O_RDWR, FILE_MODE)
    os.close(fd)
    for p in (path, path.with_name(path.name + "-wal"), path.with_name(path.name + "-shm")):
        try:
            os.chmod(p, FILE_MODE)
        except FileNotFoundError:
            pass


def secure_tree(root: Path) -> None:
    """Tighten a data directory made before modes were enforced: folders 0700, files 0600."""
    secure_dir(root)
    for dirpath, dirnames, filenames in os.walk(root):
        for d in dirnames:
            _chmod(Path(dirpath) / d, DIR_MODE)
        for f in filenames:
            _chmod(Path(dirpath) / f, FILE_MODE)


def _chmod(p: Path, mode: int) -> None:
    try:
        if not p.is_symlink():
            os.chmod(p, mode)
    except OSError:
        pass
