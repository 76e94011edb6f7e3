"""The trusted side of the worker processes: starts the warm parent and collects results.

Each job's results come straight from its process through a pipe this side created (its
write end travels to the warm parent with the request), read by a thread of its own, and so
do its stdout and stderr, through a second pipe read within a limit (the last few KB are kept);
the job itself (sources, nonce) travels in a sealed memfd that only the forked process reads.
The warm parent starts with an allow-listed environment and only reports how the process ended. Frames are parsed as they arrive
(`frames.py`): a job submitted with a sink hands its output bytes on in pieces (to the judge),
so outputs are never held here; other frames are kept, within a size limit.
"""

from __future__ import annotations

import fcntl
import itertools
import logging
import os
import secrets
import select
import socket
import struct
import subprocess
import sys
import termios
import threading
import time
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass, field
from typing import Callable, NamedTuple, Protocol

from ...common.redact import scrub
from ...common.vocab import Kind, Op, Phase, Reply
from . import wire
from .confine import LEVEL_FULL
from .frames import FrameReader, RingPieces, Sink
from .launcher import Launcher
from .ring import Geometry
from .sealed_cache import SealedCache

log = logging.getLogger("adaexplore.evaluator")

# A job's results may not exceed this (a hostile candidate could otherwise fill our memory).
MAX_RESULT_BYTES = int(os.environ.get("ADAEXPLORE_MAX_RESULT_BYTES", str(4 << 30)))
# After a job's process ended, how long its pipe may stay open (held by an escaped grandchild).
PIPE_GRACE_S = 1.0
PARENT_GONE_S = 10.0
PAUSE_ACK_S = 5.0  # the parent confirms within its own 0.5 s limit unless it is gone
_F_SETPIPE_SZ = 1031
SEALED_WAIT_S = 20.0  # a job submitted while Triton's helpers are being built waits for them (it would build them itself)
PHASES = frozenset(p.value for p in Phase)  # the only phase names a trace takes from a worker


@dataclass
class WorkerResult:
    """What came back from one worker process. `messages` were decoded defensively."""

    exit_code: int | None
    signal: int | None
    timed_out: bool
    elapsed_s: float
    output_tail: str
    messages: list[tuple[dict, list]] = field(default_factory=list)
    decode_error: str | None = None  # a complete frame the harness did not write
    truncated: bool = False  # the stream ends inside a frame
    overflow: bool = False
    overflow_reason: str | None = None  # the limit its results went past (`frames.FrameReader`)
    infra: str | None = None  # set when our side failed (warm parent died, ...)
    killed_for: str | None = None  # why the trusted side killed it (time limit, result size), if it did
    process_limit_hit: bool = False  # a fork was refused at the job's process limit
    memory_limit_hit: bool = False  # the kernel killed in the job for its host-memory limit
    remeasured: str | None = None  # why the evaluator measured this job again (its first measurement's flaw)
    stalled: bool = False  # ended by its stall clock: stuck after its kernels had compiled (`stall`)
    device_over: dict | None = None  # stopped for holding more than its device share: used, share, free bytes
    device_pressure: bool = False  # the device ran short while it ran: a failure may be a neighbour's doing

    def first(self, kind: str) -> tuple[dict, list] | None:
        for head, tensors in self.messages:
            if head.get("kind") == kind:
                return head, tensors
        return None

    def all(self, kind: str) -> list[tuple[dict, list]]:
        return [(h, t) for h, t in self.messages if h.get("kind") == kind]

    def phases(self) -> dict[str, float]:
        """Where the worker says its time went (seconds by phase), from the first report carrying
        it: a diagnostic for traces, never a fact a verdict rests on."""
        for head, _ in self.messages:
            raw = head.get("phases")
            if isinstance(raw, dict):
                return {k: float(v) for k, v in raw.items()
                        if k in PHASES and isinstance(v, (int, float)) and not isinstance(v, bool)}
        return {}


def decode_messages(payload, nonce: str | None = None) -> tuple[list[tuple[dict, list]], str | None, bool]:
    """Split a worker's byte stream into (header, tensors) messages.

    Returns the messages, why a complete frame is not the harness's (then decoding stops
    there), and whether the stream ends inside a frame (its writer stopped mid-message).
    With a nonce, every message must carry it: frames written by anything but the harness
    (which got the nonce with its job) make the whole report suspect.
    """
    out: list[tuple[dict, list]] = []
    try:
        frames, truncated = wire.split_frames(payload)
    except wire.WireError as exc:
        return out, str(exc), False
    for frame in frames:
        try:
            head, blobs = wire.unpack(frame)
            metas = wire.check_frame(head, [len(b) for b in blobs], nonce)
            tensors = [wire.decode_tensor(m, b) for m, b in zip(metas, blobs)]
        except (wire.WireError, TypeError, ValueError, RuntimeError) as exc:
            return out, str(exc), truncated
        out.append((head, tensors))
    return out, None, truncated


class RingLease(RingPieces, Protocol):
    """A job's ring as the pool sees it: its shape, the descriptors the job's process gets
    (memory, credit pipe), and where announced pieces go (see `sandbox.ring`)."""

    geometry: Geometry

    def fds(self) -> list[int]: ...

    def lost(self) -> str | None: ...

    def when_lost(self, callback: Callable[[], None]) -> None: ...


class Stall(NamedTuple):
    """A job's stall limit: `seconds` between its reports once its kernels are compiled, and
    what it was set from (said in the verdict of a job that goes past it)."""

    seconds: float
    note: str


# Reports after which a job's correctness run is over: its stall clock stops.
STALL_ENDS = frozenset({Kind.checked, Kind.done, Kind.error, Kind.violation, Kind.infra})


@dataclass
class Submitted:
    """A job handed to the pool: its id (for `open_gate`) and the future of its result."""

    job_id: str
    future: Future


class _Running:
    """This side's state of one job in flight."""

    def __init__(self, job_id: str, nonce: str, future: Future, read_fd: int,
                 on_ready: Callable[[], None] | None, sink: Sink | None = None,
                 on_message: Callable[[dict, list], None] | None = None, ring: RingLease | None = None,
                 out_fd: int | None = None) -> None:
        self.job_id, self.nonce, self.future, self.read_fd = job_id, nonce, future, read_fd
        self.output = OutputTail(out_fd)
        self.on_ready, self.sink, self.on_message, self.ring = on_ready, sink, on_message, ring
        self.overflow = False
        self.stopped = False  # killed because its results are no longer read
        self.infra: str | None = None
        self.end: dict | None = None  # the warm parent's report of how the process ended
        self.ended_at: float | None = None
        self.ended = threading.Event()


class WorkerPool:
    """One warm parent process; any number of concurrent jobs, each in its own forked child."""

    def __init__(self, *, interpret: bool, work_dir: str, triton_cache_dir: str | None = None,
                 visible_devices: str | None = None, max_result_bytes: int = MAX_RESULT_BYTES,
                 max_processes: int = 256) -> None:
        self.interpret = interpret
        self.work_dir = work_dir
        self.triton_cache_dir = triton_cache_dir
        self.visible_devices = visible_devices
        self.max_result_bytes = max_result_bytes
        self.places = ((os.path.realpath(work_dir), "<work>"), (work_dir, "<work>"))  # with common.redact's
        self._lock = threading.Lock()
        self._jobs: dict[str, _Running] = {}
        self._ids = itertools.count(1)
        self._proc: subprocess.Popen | None = None
        self._sock: socket.socket | None = None
        self._ready = threading.Event()
        self._closed = False
        self._acks: dict[str, threading.Event] = {}  # pause requests waiting for the parent's word
        self.max_processes = max_processes
        self.sandbox: dict = {}  # the level the warm parent found it can give its workers (see confine.probe)
        self._parent_pid: int | None = None
        self._launcher = Launcher("adaexplore-launcher")  # the warm parent dies with this thread
        self.sealed = SealedCache()  # Triton's C helpers, built once here and copied into each job's own cache

    # --- lifecycle ------------------------------------------------------------------
    def _start(self) -> None:
        env = parent_environment()
        if self.interpret:
            env["TRITON_INTERPRET"] = "1"
        else:
            env.pop("TRITON_INTERPRET", None)
        if self.visible_devices is not None:
            env["CUDA_VISIBLE_DEVICES"] = self.visible_devices
        env["ADAEXPLORE_MAX_PROCESSES"] = str(self.max_processes)
        os.makedirs(self.work_dir, mode=0o700, exist_ok=True)
        if not self.interpret:  # beside the warm parent's start; inside the work folder no job sees
            self.sealed.start(self.work_dir, env)
        self._ready.clear()
        ours, theirs = socket.socketpair()
        try:
            # -P and the root as working directory: no folder of ours (the scratch folder, the
            # server's) is on the path a job's view is built from.
            self._proc = subprocess.Popen(
                [sys.executable, "-P", "-m", "adaexplore.evaluator.worker.warm_start", str(theirs.fileno())],
                pass_fds=(theirs.fileno(),), stdin=subprocess.DEVNULL, stdout=None, stderr=None, env=env,
                cwd="/", start_new_session=True)
        except BaseException:
            ours.close()
            raise
        finally:
            theirs.close()
        self._sock = ours
        threading.Thread(target=self._read_loop, args=(self._proc, ours), daemon=True,
                         name="adaexplore-warm-parent-reader").start()

    def launch(self) -> None:
        """Start the warm parent if it is not running, without waiting for it to be ready."""
        with self._lock:
            if self._closed:
                raise RuntimeError("worker pool is closed")
            if not self._parent_running():
                self._launcher.call(self._start)

    def ensure_started(self, timeout: float = 120.0) -> None:
        self.launch()
        if not self._ready.wait(timeout):
            raise RuntimeError("the evaluator's warm parent did not start in time")

    def sandbox_info(self) -> dict:
        """The sandbox level of this pool's workers: {"level", "detail", "process_limit"}."""
        self.ensure_started()
        return dict(self.sandbox)

    def _parent_running(self) -> bool:
        proc = self._proc
        return proc is not None and proc.poll() is None

    def warm_parent_pid(self) -> int | None:
        return self._parent_pid if self._parent_running() else None

    def close(self) -> None:
        with self._lock:
            self._closed = True
            proc, self._proc = self._proc, None
            sock = self._sock
        if proc and proc.poll() is None:
            try:
                # None once closed: the AttributeError is caught
                sock.sendall(wire.pack({"op": Op.exit}))  # type: ignore[union-attr]
                proc.wait(5)
            except (OSError, subprocess.TimeoutExpired, AttributeError):
                proc.kill()
        self._launcher.close()  # after the warm parent
        self._fail_all("evaluator shut down")

    # --- jobs -----------------------------------------------------------------------
    def submit(self, job: dict, timeout_s: float, on_ready: Callable[[], None] | None = None,
               sink: Sink | None = None, on_message: Callable[[dict, list], None] | None = None,
               ring: RingLease | None = None, stall: Stall | None = None) -> Submitted:
        """Run `job` in a fresh child; the future resolves to a WorkerResult (never raises).

        With `on_ready` the job is gated: the child prepares, then waits until `open_gate`;
        `on_ready` is called (on a pool thread) once it waits. Its deadline restarts at the gate.
        With `sink`, the tensors of each frame it accepts stream to a receiver (see `frames`).
        `on_message` is told of each message as it is read (on the job's reader thread): the
        results of a job still running. With `ring` (and a sink), the job's outputs travel through
        that ring instead of the pipe (see `ring`): its memory and credit pipe go to the process.
        With `stall`, its stall clock (`sandbox.stall`) runs from its first forward to its verdict.
        """
        fut: Future = Future()
        job_id = f"j{next(self._ids)}"
        if stall is not None:
            on_message = self._stall_watch(job_id, stall, on_message)
        try:
            self.ensure_started()
        except (RuntimeError, OSError) as exc:
            fut.set_result(_infra(str(exc)))
            return Submitted(job_id, fut)
        nonce = secrets.token_hex(16)
        ring = ring if sink is not None else None
        level = (job.get("sandbox") or {}).get("level")
        sealed = self.sealed.get(SEALED_WAIT_S) if level in (None, LEVEL_FULL) else None
        if sealed is not None:  # only a job with a cache of its own takes it (a shared cache is built in place)
            job = {**job, "sealed_compiled": sealed.blob, "sealed_digest": sealed.digest}
        extra = ring.fds() if ring is not None else []
        try:
            job_fd = _job_memfd({**job, "nonce": nonce, "gated": on_ready is not None,
                                 "ring": ring.geometry.to_job() if ring is not None else None})
        except OSError as exc:
            fut.set_result(_infra(f"cannot hand the job over: {exc}"))
            return Submitted(job_id, fut)
        # What the warm parent needs to run the job, and nothing a caller wrote.
        ctl = {"work_dir": self.work_dir, "gated": on_ready is not None, "sandbox": {"level": level} if level else None,
               "host_memory_bytes": job.get("host_memory_bytes"), "device_bytes": job.get("device_bytes")}
        if level and level != LEVEL_FULL:  # a job without namespaces shares the evaluator's Triton cache
            ctl["triton_cache_dir"] = self.triton_cache_dir
        frame = wire.pack({"op": Op.run, "job_id": job_id, "timeout_s": timeout_s, "fds": 3 + len(extra), "job": ctl})
        r, w = os.pipe()
        _widen(r)
        out_r, out_w = os.pipe()
        running = _Running(job_id, nonce, fut, r, on_ready, sink, on_message, ring, out_fd=out_r)
        with self._lock:
            self._jobs[job_id] = running
            try:
                # None once closed: the AttributeError is caught
                sent = socket.send_fds(self._sock, [frame], [w, out_w, job_fd, *extra])  # type: ignore[arg-type]
                if sent < len(frame):
                    # None once closed: the AttributeError is caught
                    self._sock.sendall(frame[sent:])  # type: ignore[union-attr]
            except (OSError, AttributeError) as exc:
                self._jobs.pop(job_id, None)
                os.close(r)
                os.close(out_r)
                fut.set_result(_infra(f"cannot reach the warm parent: {exc}"))
                return Submitted(job_id, fut)
            finally:
                for fd in (w, out_w, job_fd):
                    os.close(fd)
        threading.Thread(target=self._collect, args=(running,), daemon=True, name=f"adaexplore-{job_id}").start()
        if ring is not None:  # its outputs can no longer arrive: it ends now rather than at its deadline
            ring.when_lost(lambda: self.stop(job_id, "the judge that took its outputs ended"))
        return Submitted(job_id, fut)

    def _stall_watch(self, job_id: str, stall: Stall,
                     on_message: Callable[[dict, list], None] | None) -> Callable[[dict, list], None]:
        """`on_message` with the job's stall clock wound: armed when its first forward has
        returned, set again at each report after, off once its correctness run is over."""
        armed = [False]

        def watch(head: dict, payload: list) -> None:
            kind = head.get("kind")
            if kind == Kind.launched or (armed[0] and kind not in STALL_ENDS):
                armed[0] = True
                self._send({"op": Op.stall, "job_id": job_id, "seconds": stall.seconds, "note": stall.note})
            elif armed[0]:
                armed[0] = False
                self._send({"op": Op.stall, "job_id": job_id, "seconds": None})
            if on_message is not None:
                on_message(head, payload)
        return watch

    def open_gate(self, job_id: str) -> None:
        """Let a gated job that is waiting go on (the caller now holds the GPU for it)."""
        self._send({"op": Op.go, "job_id": job_id})

    def stop(self, job_id: str, reason: str) -> None:
        """Kill a job's processes (its result says `reason` in `killed_for`)."""
        self._send({"op": Op.kill, "job_id": job_id, "reason": reason})

    def pause(self, keep: str | None = None) -> None:
        """Stop every running job's processes but `keep`'s; returns once they are stopped.
        Their deadlines stand still until `resume`."""
        token = secrets.token_hex(8)
        done = threading.Event()
        self._acks[token] = done
        if self._send({"op": Op.pause, "keep": keep, "token": token}) and not done.wait(PAUSE_ACK_S):
            log.warning("the warm parent did not confirm a pause in %.0f s", PAUSE_ACK_S)
        self._acks.pop(token, None)

    def resume(self) -> None:
        """Let the jobs stopped by `pause` run on."""
        self._send({"op": Op.resume})

    def run(self, job: dict, timeout_s: float, sink: Sink | None = None, ring: RingLease | None = None,
            stall: Stall | None = None) -> WorkerResult:
        # a wait without `until` always returns the result
        return self.wait(self.submit(job, timeout_s, sink=sink, ring=ring, stall=stall))  # type: ignore[return-value]

    def wait(self, submitted: Submitted, until: threading.Event | None = None) -> WorkerResult | None:
        """The job's result, or None as soon as `until` is set first. The warm parent enforces
        the job's deadline (which stands still while the job is paused); this only gives up
        on a parent that is gone."""
        if until is None:
            until = threading.Event()
            submitted.future.add_done_callback(lambda _f: until.set())
        while not until.wait(1.0):
            if not self._parent_running():
                try:  # the reader thread resolves every job of a parent that died
                    return submitted.future.result(timeout=PARENT_GONE_S)
                except FutureTimeout:
                    return _infra("the evaluator's warm parent is gone")
        return submitted.future.result() if submitted.future.done() else None

    def _send(self, head: dict) -> bool:
        """Send a request to the warm parent; False if none runs (nothing to ask), or, with a
        warning, if it cannot be reached."""
        with self._lock:
            if not self._parent_running():
                return False
            try:
                # None once closed: the AttributeError is caught
                self._sock.sendall(wire.pack(head))  # type: ignore[union-attr]
                return True
            except (OSError, AttributeError) as exc:
                log.warning("cannot reach the warm parent: %s", exc)
                return False

    def _collect(self, job: _Running) -> None:
        """Read one job's pipe to its end (frames parsed as they come, tensor bytes handed to the
        job's sink), then wait for how its process ended."""
        reader = FrameReader(job.nonce, job.sink, self.max_result_bytes, job.on_message, ring=job.ring)
        poller = select.poll()
        poller.register(job.read_fd, select.POLLIN)
        job.output.watch(poller)
        try:
            while True:
                events = dict(poller.poll(250))
                if job.output.fd is not None and job.output.fd in events:
                    job.output.read(poller)
                if job.read_fd in events:
                    target = reader.forwarding()
                    ready = min(_buffered(job.read_fd), target[3]) if target is not None else 0
                    if target is not None and ready:
                        # Tensor bytes for the judge go from the pipe to it directly.
                        receiver, index, offset, _ = target
                        try:
                            receiver.forward(index, offset, job.read_fd, ready)
                            reader.forwarded(ready)
                        except Exception as exc:  # noqa: BLE001 - a receiver of ours failed
                            job.infra = f"cannot pass the job's outputs on: {exc}"[:400]
                            reader.error = job.infra
                        continue
                    try:
                        data = os.read(job.read_fd, 1 << 20)
                    except OSError:
                        break
                    if not data:
                        break
                    if reader.stopped:
                        continue  # drained and ignored: the job is being killed
                    try:
                        reader.feed(data)
                    except Exception as exc:  # noqa: BLE001 - a sink of ours failed
                        job.infra = f"cannot pass the job's outputs on: {exc}"[:400]
                        reader.error = job.infra
                    if reader.error is not None and job.ring is not None:
                        # Its slots will never be handed back: it would wait for them until its deadline.
                        self._stop_once(job, "its result channel stopped being read")
                    if reader.overflow and not job.overflow:
                        job.overflow = True
                        self._stop_once(job, f"its results went past a limit on what may travel to the evaluator "
                                             f"({reader.overflow_reason})")
                elif job.ended_at is not None and time.monotonic() - job.ended_at > PIPE_GRACE_S:
                    break  # the process is gone; whatever still holds the pipe is ignored
        finally:
            os.close(job.read_fd)
        job.output.drain(lambda: job.ended_at is not None and time.monotonic() - job.ended_at > PIPE_GRACE_S)
        messages, err, truncated = reader.finish()
        for head, _ in messages:  # a job's own error report, as an agent will read it
            error = head.get("error") if head.get("kind") == Kind.error else None
            if isinstance(error, dict):
                for key in ("message", "trace"):
                    if isinstance(error.get(key), str):
                        error[key] = scrub(error[key], self.places)
        # The judge that held its ring ended while it ran: some of its outputs, or the slots it
        # waited for, went with it (at worst a job judged in full runs once more).
        lost = job.ring.lost() if job.ring is not None else None
        if lost and not job.infra:
            job.infra = lost
        job.ended.wait()
        end = job.end or {}
        if end.get("infra") or job.infra:
            result = _infra(str(end.get("infra") or job.infra))
        elif end.get("confined") is False and not end.get("killed_for"):
            # It ended before its sandbox was up, so before any task or candidate code ran.
            tail = scrub(job.output.text(), self.places).strip().splitlines()
            result = _infra("the worker's sandbox could not be set up: " + (tail[-1] if tail else "no message"))
        else:
            result = WorkerResult(
                exit_code=end.get("exit_code"), signal=end.get("signal"), timed_out=bool(end.get("timed_out")),
                elapsed_s=float(end.get("elapsed_s", 0.0)), output_tail=scrub(job.output.text(), self.places),
                messages=[] if job.overflow else messages, decode_error=None if job.overflow else err,
                truncated=truncated,
                overflow=job.overflow, overflow_reason=reader.overflow_reason if job.overflow else None,
                killed_for=end.get("killed_for") or None,
                process_limit_hit=bool(end.get("process_limit_hit")),
                memory_limit_hit=bool(end.get("memory_limit_hit")),
                stalled=bool(end.get("stalled")), device_pressure=bool(end.get("device_pressure")),
                device_over=end.get("device_over") if isinstance(end.get("device_over"), dict) else None)
        if not job.future.done():
            job.future.set_result(result)

    def _stop_once(self, job: _Running, reason: str) -> None:
        """Kill a job whose results are no longer read (once: its reader may see more bytes)."""
        if not job.stopped:
            job.stopped = True
            self.stop(job.job_id, reason)

    def _read_loop(self, proc: subprocess.Popen, sock: socket.socket) -> None:
        try:
            for head, _ in wire.receive_messages(sock):
                if head.get(Reply.ready):
                    self.sandbox = head.get("sandbox") if isinstance(head.get("sandbox"), dict) else {}
                    self._parent_pid = head.get("pid")
                    self._ready.set()
                    continue
                if Reply.paused in head:
                    ack = self._acks.get(head[Reply.paused])
                    if ack is not None:
                        ack.set()
                    continue
                job_id = head.get("job_id")
                if head.get(Reply.gate) == Reply.ready:
                    job = self._jobs.get(job_id)
                    if job is not None and job.on_ready is not None:
                        job.on_ready()
                    continue
                with self._lock:
                    job = self._jobs.pop(job_id, None)
                if job is not None and head.get(Reply.finished):
                    self._end(job, head)
        except (wire.WireError, OSError, ValueError) as exc:
            if self._closed:  # close() told it to exit: the connection ending is the normal way out
                log.debug("the evaluator's warm parent closed its connection at shutdown: %s", exc)
            else:
                log.error("lost the evaluator's warm parent: %s", exc)
        finally:
            self._fail_all("the evaluator's warm parent exited", proc)

    @staticmethod
    def _end(job: _Running, head: dict) -> None:
        job.end = head
        job.ended_at = time.monotonic()
        job.ended.set()

    def _fail_all(self, reason: str, proc: subprocess.Popen | None = None) -> None:
        with self._lock:
            if proc is not None and proc is not self._proc and self._proc is not None:
                return
            jobs, self._jobs = self._jobs, {}
        for job in jobs.values():
            self._end(job, {"infra": reason})


# The only variables of the server's environment the warm parent (and so any job) may see: what
# Python, torch, Triton and CUDA need to run. A token or key in the server's environment stays there.
PARENT_ENV = ("PATH", "PYTHONPATH", "LD_LIBRARY_PATH", "LANG", "LC_ALL", "LC_CTYPE", "TZ", "OMP_NUM_THREADS",
              "MKL_NUM_THREADS", "OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE", "OPENBLAS_NUM_THREADS", "CUDA_HOME",
              "CUDA_PATH", "CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER", "CUDA_MODULE_LOADING",
              "NCCL_NVLS_ENABLE", "TORCH_SYMM_MEM_DISABLE_MULTICAST", "NVSHMEM_DISABLE_NVLS",
              "TRITON_INTERPRET", "TRITON_PTXAS_PATH", "TRITON_LIBCUDA_PATH",
              "ADAEXPLORE_SANDBOX_UID", "ADAEXPLORE_MAX_PROCESSES", "HF_HUB_OFFLINE")
OUTPUT_TAIL = 2000  # characters of a job's stdout and stderr kept for its feedback


def parent_environment() -> dict[str, str]:
    """The warm parent's environment: the allow-listed variables of ours that are set."""
    return {k: os.environ[k] for k in PARENT_ENV if k in os.environ}


def _job_memfd(job: dict) -> int:
    """A sealed memfd holding `job` (bytes values travel as blobs): what the job's process reads."""
    blob_keys = [k for k, v in job.items() if isinstance(v, (bytes, bytearray))]
    plain = {k: v for k, v in job.items() if k not in blob_keys}
    data = wire.pack({"job": plain, "blob_keys": blob_keys}, [job[k] for k in blob_keys])
    fd = os.memfd_create("adaexplore-job", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        fcntl.fcntl(fd, fcntl.F_ADD_SEALS,
                    fcntl.F_SEAL_WRITE | fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW | fcntl.F_SEAL_SEAL)
    except BaseException:
        os.close(fd)
        raise
    return fd


class OutputTail:
    """A job's stdout and stderr, read from its pipe as they come: the last OUTPUT_TAIL characters
    are kept, the rest dropped, so a job that prints without end costs a bounded buffer."""

    def __init__(self, fd: int | None) -> None:
        self.fd = fd
        self.kept = bytearray()

    def watch(self, poller) -> None:
        if self.fd is not None:
            os.set_blocking(self.fd, False)
            poller.register(self.fd, select.POLLIN)

    def read(self, poller=None) -> bool:
        """Read what is there; False once the pipe is closed (then it is closed here too)."""
        if self.fd is None:
            return False
        try:
            data = os.read(self.fd, 1 << 16)
        except BlockingIOError:
            return True
        except OSError:
            data = b""
        if not data:
            if poller is not None:
                poller.unregister(self.fd)
            os.close(self.fd)
            self.fd = None
            return False
        self.kept += data
        if len(self.kept) > 4 * OUTPUT_TAIL:
            del self.kept[:len(self.kept) - 4 * OUTPUT_TAIL]
        return True

    def drain(self, gave_up: Callable[[], bool]) -> None:
        """Read to the end of the pipe, or until `gave_up()` (an escaped process still holds it)."""
        while self.fd is not None:
            ready, _, _ = select.select([self.fd], [], [], 0.1)
            if ready:
                self.read()
            elif gave_up():
                os.close(self.fd)
                self.fd = None

    def text(self) -> str:
        return self.kept.decode("utf-8", "replace")[-OUTPUT_TAIL:]


def _widen(fd: int) -> None:
    """Give a job's pipe the largest buffer allowed (8 MB where the server may exceed the
    system's 1 MB default limit): fewer, larger pieces for big outputs."""
    for size in (8 << 20, 1 << 20):
        try:
            fcntl.fcntl(fd, _F_SETPIPE_SZ, size)
            return
        except OSError:
            continue


def _buffered(fd: int) -> int:
    """How many bytes a pipe holds, ready to read."""
    try:
        return struct.unpack("i", fcntl.ioctl(fd, termios.FIONREAD, b"\0\0\0\0"))[0]
    except OSError:
        return 0


def _infra(reason: str) -> WorkerResult:
    return WorkerResult(exit_code=None, signal=None, timed_out=False, elapsed_s=0.0, output_tail="", infra=reason)
