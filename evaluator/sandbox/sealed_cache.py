"""Triton's compiled C helpers, built once by the trusted side and copied sealed into every job's cache.

Runs in the evaluator's process; the build runs in a subprocess of it (``python -m`` this module)
that imports Triton and touches its driver, and runs nothing a caller wrote. On a GPU, Triton
compiles its C helper module (``cuda_utils``: loading binaries, querying the device) with the
system's C compiler the first time a process needs it, into the Triton cache. Each job of the full
sandbox has a cache of its own (nothing another job could have written), so each job used to
compile it again: a second or more of CPU per job. Here it is compiled once, the resulting files
are packed into one tar held in this process's memory with its SHA-256, and every job's own cache
is filled from that tar before any candidate code runs, after its digest is checked
(``harness.seed_sealed``).

A job may change its copy (it is the job's own); it cannot change what the next job gets: the
tar lives in this process and travels inside the job's sealed request. Kernels a candidate
compiled are never shared beyond its own timing jobs: this side cannot tell an honest compiled
kernel from a forged one, so nothing a job produced is given to another candidate.
"""

from __future__ import annotations

import hashlib
import io
import logging
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import threading
from dataclasses import dataclass

log = logging.getLogger("adaexplore.evaluator")

BUILD_TIMEOUT_S = 180.0
SEALED_MAX_BYTES = 32 << 20


def pack_tree(root: str, limit: int) -> bytes | None:
    """Every regular file under ``root`` in one uncompressed tar (paths relative to it), or None
    when there is none or they would exceed ``limit`` bytes. Links and special files are left out."""
    if not os.path.isdir(root):
        return None
    out, total = io.BytesIO(), 0
    with tarfile.open(fileobj=out, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for folder, dirs, files in os.walk(root):
            dirs.sort()
            for name in sorted(files):
                path = os.path.join(folder, name)
                if os.path.islink(path) or not os.path.isfile(path):
                    continue
                total += os.path.getsize(path) + 1024
                if total > limit:
                    return None
                tar.add(path, arcname=os.path.relpath(path, root), recursive=False)
    return out.getvalue() if total else None


@dataclass(frozen=True)
class Sealed:
    """The packed files and their SHA-256: what a job checks before it unpacks them."""

    blob: bytes
    digest: str

    @classmethod
    def of(cls, blob: bytes) -> Sealed:
        return cls(blob, hashlib.sha256(blob).hexdigest())


class SealedCache:
    """The sealed build of one evaluator: started once, read by every job submitted after it is ready."""

    def __init__(self) -> None:
        self._sealed: Sealed | None = None
        self._done = threading.Event()
        self._started = False
        self._lock = threading.Lock()
        self.note = "not built"

    def start(self, parent: str, env: dict[str, str]) -> None:
        """Build in the background (once) in a new folder inside ``parent``, a folder no job can see.

        A new, empty folder each time: Triton keeps a helper it finds, so a folder left from an
        earlier run (which a job without namespaces could have written) is never packed."""
        with self._lock:
            if self._started:
                return
            self._started = True
        threading.Thread(target=self._build, args=(parent, env), daemon=True,
                         name="adaexplore-sealed-cache").start()

    def set(self, sealed: Sealed) -> None:
        """Use ``sealed`` (a build made elsewhere) from now on."""
        with self._lock:
            self._started = True
            self._sealed = sealed
            self.note = f"{len(sealed.blob)} bytes, sha256 {sealed.digest[:12]}"
        self._done.set()

    def get(self, wait_s: float = 0.0) -> Sealed | None:
        """The sealed build, waiting up to ``wait_s`` for one in progress; None when there is none."""
        if self._started and wait_s > 0:
            self._done.wait(wait_s)
        return self._sealed

    def _build(self, parent: str, env: dict[str, str]) -> None:
        folder = None
        try:
            os.makedirs(parent, mode=0o700, exist_ok=True)
            folder = tempfile.mkdtemp(prefix=".sealed-triton-", dir=parent)
            proc = subprocess.run([sys.executable, "-P", "-m", __name__], env={**env, "TRITON_CACHE_DIR": folder},
                                  cwd="/", stdin=subprocess.DEVNULL, capture_output=True, text=True,
                                  timeout=BUILD_TIMEOUT_S, check=False)
            blob = pack_tree(folder, SEALED_MAX_BYTES) if proc.returncode == 0 else None
            if blob is None:
                self.note = f"not built (exit {proc.returncode}): {(proc.stderr or '').strip()[-300:]}"
                log.warning("Triton's helpers were not built for sharing; each job builds its own: %s", self.note)
            else:
                self.set(Sealed.of(blob))
        except (OSError, subprocess.SubprocessError) as exc:
            self.note = f"not built: {exc}"
            log.warning("Triton's helpers were not built for sharing: %s", exc)
        finally:
            if folder is not None:
                shutil.rmtree(folder, ignore_errors=True)
            self._done.set()


def _build_here() -> None:
    """Make Triton compile its driver's C helpers into TRITON_CACHE_DIR (nothing else runs here)."""
    from triton.runtime import driver

    _ = driver.active.utils


if __name__ == "__main__":
    _build_here()
