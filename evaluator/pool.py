"""The trusted side of the worker processes: starts the warm parent and collects results."""

from __future__ import annotations

import itertools
import secrets
import logging
import os
import subprocess
import sys
import threading
from concurrent.futures import Future
from dataclasses import dataclass, field

from . import wire

log = logging.getLogger("adaexplore.evaluator")


@dataclass
class WorkerResult:
    """What came back from one worker process. `messages` were decoded defensively."""

    exit_code: int | None
    signal: int | None
    timed_out: bool
    elapsed_s: float
    output_tail: str
    messages: list[tuple[dict, list]] = field(default_factory=list)
    decode_error: str | None = None
    overflow: bool = False
    infra: str | None = None  # set when our side failed (warm parent died, ...)

    def first(self, kind: str) -> tuple[dict, list] | None:
        for head, tensors in self.messages:
            if head.get("kind") == kind:
                return head, tensors
        return None

    def all(self, kind: str) -> list[tuple[dict, list]]:
        return [(h, t) for h, t in self.messages if h.get("kind") == kind]


def decode_messages(payload: bytes, nonce: str | None = None) -> tuple[list[tuple[dict, list]], str | None]:
    """Split a worker's byte stream into (header, tensors) messages; stops at the first bad one.

    With a nonce, every message must carry it: frames written by anything but the harness
    (which got the nonce with its job) make the whole report suspect.
    """
    out: list[tuple[dict, list]] = []
    try:
        frames = wire.split_frames(payload)
    except wire.WireError as exc:
        return out, str(exc)
    for frame in frames:
        try:
            head, blobs = wire.unpack(frame)
            if nonce is not None and head.get("nonce") != nonce:
                raise wire.WireError("a message without the job's nonce")
            metas = head.get("tensors", [])
            if not isinstance(metas, list) or len(metas) != len(blobs):
                raise wire.WireError("tensor count mismatch")
            tensors = [wire.decode_tensor(m, b) for m, b in zip(metas, blobs)]
        except (wire.WireError, TypeError, ValueError, RuntimeError) as exc:
            return out, str(exc)
        out.append((head, tensors))
    return out, None


class WorkerPool:
    """One warm parent process; any number of concurrent jobs, each in its own forked child."""

    def __init__(self, *, interpret: bool, work_dir: str, triton_cache_dir: str | None = None,
                 visible_devices: str | None = None) -> None:
        self.interpret = interpret
        self.work_dir = work_dir
        self.triton_cache_dir = triton_cache_dir
        self.visible_devices = visible_devices
        self._lock = threading.Lock()
        self._pending: dict[str, Future] = {}
        self._nonces: dict[str, str] = {}
        self._ids = itertools.count(1)
        self._proc: subprocess.Popen | None = None
        self._reader: threading.Thread | None = None
        self._ready = threading.Event()
        self._closed = False

    # --- lifecycle ------------------------------------------------------------------
    def _start(self) -> None:
        env = dict(os.environ)
        if self.interpret:
            env["TRITON_INTERPRET"] = "1"
        else:
            env.pop("TRITON_INTERPRET", None)
        if self.triton_cache_dir:
            env["TRITON_CACHE_DIR"] = self.triton_cache_dir
        if self.visible_devices is not None:
            env["CUDA_VISIBLE_DEVICES"] = self.visible_devices
        os.makedirs(self.work_dir, exist_ok=True)
        self._ready.clear()
        self._proc = subprocess.Popen(
            [sys.executable, "-m", "adaexplore.evaluator.zygote"], stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, stderr=None, env=env, cwd=self.work_dir, start_new_session=True)
        self._reader = threading.Thread(target=self._read_loop, args=(self._proc,), daemon=True,
                                        name="adaexplore-zygote-reader")
        self._reader.start()

    def ensure_started(self, timeout: float = 120.0) -> None:
        with self._lock:
            if self._closed:
                raise RuntimeError("worker pool is closed")
            if self._proc is None or self._proc.poll() is not None:
                self._start()
        if not self._ready.wait(timeout):
            raise RuntimeError("the evaluator's warm parent did not start in time")

    def close(self) -> None:
        with self._lock:
            self._closed = True
            proc, self._proc = self._proc, None
        if proc and proc.poll() is None:
            try:
                proc.stdin.write(wire.pack({"op": "exit"}))
                proc.stdin.flush()
                proc.wait(5)
            except (OSError, subprocess.TimeoutExpired, ValueError):
                proc.kill()
        self._fail_all("evaluator shut down")

    # --- jobs -----------------------------------------------------------------------
    def submit(self, job: dict, timeout_s: float) -> Future:
        """Run `job` in a fresh child; the future resolves to a WorkerResult (never raises)."""
        fut: Future = Future()
        try:
            self.ensure_started()
        except (RuntimeError, OSError) as exc:
            fut.set_result(_infra(str(exc)))
            return fut
        job_id = f"j{next(self._ids)}"
        nonce = secrets.token_hex(16)
        frame = wire.pack({"op": "run", "job_id": job_id, "timeout_s": timeout_s,
                           "job": {**job, "work_dir": self.work_dir, "nonce": nonce}})
        with self._lock:
            proc = self._proc
            self._pending[job_id] = fut
            self._nonces[job_id] = nonce
            try:
                proc.stdin.write(frame)
                proc.stdin.flush()
            except (OSError, ValueError, AttributeError) as exc:
                self._pending.pop(job_id, None)
                fut.set_result(_infra(f"cannot reach the warm parent: {exc}"))
        return fut

    def run(self, job: dict, timeout_s: float) -> WorkerResult:
        # The deadline is enforced in the warm parent; this margin only covers a dead parent.
        return self.submit(job, timeout_s).result(timeout=timeout_s + 60)

    def _read_loop(self, proc: subprocess.Popen) -> None:
        stream = proc.stdout
        try:
            while True:
                body = wire.read_frame(stream)
                if body is None:
                    break
                head, blobs = wire.unpack(body)
                if head.get("ready"):
                    self._ready.set()
                    continue
                fut = self._pending.pop(head.get("job_id"), None)
                nonce = self._nonces.pop(head.get("job_id"), None)
                if fut is None:
                    continue
                messages, err = decode_messages(bytes(blobs[0]) if blobs else b"", nonce)
                fut.set_result(WorkerResult(
                    exit_code=head.get("exit_code"), signal=head.get("signal"),
                    timed_out=bool(head.get("timed_out")), elapsed_s=float(head.get("elapsed_s", 0.0)),
                    output_tail=head.get("output_tail", ""), messages=messages, decode_error=err,
                    overflow=bool(head.get("overflow"))))
        except (wire.WireError, OSError, ValueError) as exc:
            log.error("lost the evaluator's warm parent: %s", exc)
        finally:
            self._fail_all("the evaluator's warm parent exited", proc)

    def _fail_all(self, reason: str, proc: subprocess.Popen | None = None) -> None:
        with self._lock:
            if proc is not None and proc is not self._proc and self._proc is not None:
                return
            pending, self._pending = self._pending, {}
        for fut in pending.values():
            if not fut.done():
                fut.set_result(_infra(reason))


def _infra(reason: str) -> WorkerResult:
    return WorkerResult(exit_code=None, signal=None, timed_out=False, elapsed_s=0.0, output_tail="", infra=reason)
