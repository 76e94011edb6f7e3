"""The evaluator's side of the judge: starts the process, relays output bytes, waits for verdicts.

Runs in the server process. `Receiver` objects are what the worker pool streams a frame's
tensor bytes into (see `sandbox.pool`); they forward bounded chunks, so no output is ever
held here whole. Requests are answered by id; a judge that dies fails every waiting request
as ours (`JudgeError`), and the next use starts a new one (its references are gone, which the
`generation` counter tells callers).
"""

from __future__ import annotations

import errno
import itertools
import logging
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from contextlib import contextmanager
from typing import Callable, Iterator

from ...common.vocab import JudgeOp
from ..sandbox import ring as rings
from ..sandbox import wire
from ..sandbox.frames import Discard
from ..sandbox.launcher import Launcher
from ..sandbox.procs import until_stopped
from ..sandbox.ring import Geometry

log = logging.getLogger("adaexplore.evaluator")

CHUNK_BYTES = 8 << 20
REPLY_TIMEOUT_S = 600.0
RING_OPEN_TIMEOUT_S = 60.0
STOP_CONFIRM_S = 1.0


class JudgeError(RuntimeError):
    """The judge process failed or vanished (our fault, never the candidate's)."""


class Receiver:
    """One frame's tensors on their way to the judge."""

    def __init__(self, client: "JudgeClient", req: str, end_extra: dict) -> None:
        self.client, self.req, self.end_extra = client, req, end_extra
        self.closed = False

    def write(self, index: int, offset: int, data) -> None:
        view = memoryview(data).cast("B")
        t0 = time.perf_counter()
        for start in range(0, len(view), CHUNK_BYTES):
            piece = view[start:start + CHUNK_BYTES]
            self.client.send({"op": JudgeOp.chunk, "req": self.req, "index": index, "offset": offset + start}, [piece])
        self.client.relayed(len(view), time.perf_counter() - t0)

    def piece(self, ring: str, index: int, offset: int, n: int, slot: int) -> None:
        """The next `n` bytes of output `index` lie in `slot` of `ring`: the judge takes them from there."""
        self.client.send({"op": JudgeOp.piece, "req": self.req, "ring": ring, "index": index, "offset": offset,
                          "n": n, "slot": slot})

    def forward(self, index: int, offset: int, fd: int, n: int) -> None:
        """Pass the next `n` bytes of `fd` (there to be read) on as the piece at `offset`."""
        t0 = time.perf_counter()
        self.client.send_from({"op": JudgeOp.chunk, "req": self.req, "index": index, "offset": offset}, fd, n)
        self.client.relayed(n, time.perf_counter() - t0)

    def close(self) -> dict:
        """The judge's answer: {"stored"}, {"verdict"}, {"missing"} or {"error", "ours"}."""
        self.closed = True
        return self.client.request({"op": JudgeOp.end, "req": self.req, **self.end_extra}, req=self.req)

    def abort(self) -> None:
        if not self.closed:
            self.closed = True
            self.client.send({"op": JudgeOp.abort, "req": self.req})


class JudgeClient:
    def __init__(self, device: str, budget_bytes: int, visible_devices: str | None = None,
                 work_dir: str | None = None, host_budget_bytes: int = -1) -> None:
        self.device, self.budget_bytes, self.host_budget_bytes = device, budget_bytes, host_budget_bytes
        self.visible_devices, self.work_dir = visible_devices, work_dir
        self.generation = 0
        self._proc: subprocess.Popen | None = None
        self._lost: subprocess.Popen | None = None  # the judge process whose reader saw it end
        self._sock: socket.socket | None = None
        self._send_lock = threading.Lock()
        self._start_lock = threading.Lock()
        self._waiting: dict[str, tuple[threading.Event, list]] = {}
        self._ids = itertools.count(1)
        self._ready = threading.Event()
        self.relay = {"bytes": 0, "seconds": 0.0}  # outputs relayed to the judge, and the time it took
        self._relay_lock = threading.Lock()
        self._fd_channel: socket.socket | None = None  # the judge hands rings' descriptors over here
        self._ring_lock = threading.Lock()
        self._leases: set[RingLease] = set()  # rings open now
        self._leases_lock = threading.Lock()
        self.ring_note: str | None = None  # why jobs stream instead of using rings, once a ring was refused
        self._launcher = Launcher("adaexplore-judge-launcher")

    # --- lifecycle ------------------------------------------------------------------------
    def _ensure(self) -> None:
        if self._ready.is_set():  # up and answering (the reader clears it when the judge ends)
            return
        self.launch()
        if not self._ready.wait(120):
            raise JudgeError("the judge process did not start in time")

    def launch(self) -> None:
        """Start the judge process if it is not running, without waiting for it to be ready."""
        if self._ready.is_set():
            return
        with self._start_lock:
            old = self._proc
            if old is not None and old.poll() is None:
                if old is not self._lost:
                    return
                # Its reader saw it end, but it has not finished exiting (a killed GPU process can
                # take long to be torn down): it serves no one, so a new judge starts beside it.
                _signal(old.pid, signal.SIGKILL)
                threading.Thread(target=old.wait, daemon=True, name="adaexplore-judge-reaper").start()
            self._launcher.call(self._start)

    def _start(self) -> None:
        """Start a judge process (on the launcher's thread: the judge dies with it, see `Launcher`)."""
        env = dict(os.environ)
        if self.visible_devices is not None:
            env["CUDA_VISIBLE_DEVICES"] = self.visible_devices
        ours, theirs = socket.socketpair()
        fds_ours, fds_theirs = socket.socketpair()
        self._ready.clear()
        self._proc = subprocess.Popen(
            [sys.executable, "-m", "adaexplore.evaluator.judge.process", str(theirs.fileno()), self.device,
             str(self.budget_bytes), str(self.host_budget_bytes), str(fds_theirs.fileno())],
            pass_fds=(theirs.fileno(), fds_theirs.fileno()), stdin=subprocess.DEVNULL, env=env,
            cwd=self.work_dir, start_new_session=True)
        theirs.close()
        fds_theirs.close()
        self._sock = ours
        old_channel, self._fd_channel = self._fd_channel, fds_ours
        if old_channel is not None:
            old_channel.close()
        self.generation += 1
        threading.Thread(target=self._read_loop, args=(self._proc, ours), daemon=True,
                         name="adaexplore-judge-reader").start()

    def start(self) -> None:
        """Start the judge process now rather than on first use (raises JudgeError if it cannot)."""
        self._ensure()

    def close(self) -> None:
        proc, self._proc = self._proc, None
        self._ready.clear()
        if self._sock is not None:
            try:
                self._sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        if proc is not None:
            try:
                proc.wait(5)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        self._launcher.close()  # after the judge
        self._fail_waiting("the judge was shut down")

    def stop_for_measurement(self) -> "JudgeStop":
        """A stop of this judge for one measurement (see `JudgeStop`)."""
        return JudgeStop(self)

    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None and self._proc.poll() is None else None

    def _read_loop(self, proc: subprocess.Popen, sock: socket.socket) -> None:
        try:
            for head, _ in wire.receive_messages(sock):
                if head.get("ready"):
                    self._ready.set()
                    continue
                waiter = self._waiting.pop(str(head.get("req")), None)
                if waiter is not None:
                    waiter[1].append(head)
                    waiter[0].set()
        except (wire.WireError, OSError, ValueError) as exc:
            if self._proc is proc:
                log.error("lost the judge process: %s", exc)
        finally:
            if self._proc is proc:
                self._lost = proc
                self._ready.clear()
                self._fail_waiting("the judge process ended")

    def _fail_waiting(self, reason: str) -> None:
        with self._leases_lock:  # jobs whose ring was this judge's cannot finish: they are told at once
            leases, self._leases = self._leases, set()
        for lease in leases:
            lease.judge_ended()
        waiting, self._waiting = self._waiting, {}
        for event, box in waiting.values():
            box.append({"error": reason, "ours": True})
            event.set()

    # --- messages -------------------------------------------------------------------------
    def send(self, head: dict, blobs: list | None = None) -> None:
        self._ensure()
        data = wire.pack(head, blobs)
        with self._send_lock:
            try:
                self._sock.sendall(data)  # type: ignore[union-attr]  # None once closed: caught below
            except (OSError, AttributeError) as exc:
                raise JudgeError(f"cannot reach the judge: {exc}") from None

    def send_from(self, head: dict, fd: int, n: int) -> None:
        """Send a message whose one blob is the next `n` bytes of `fd`, which must be there to
        read (a pipe's buffered bytes). The kernel moves them into the judge's socket (splice),
        so they never pass through this process's memory; where it cannot, they are read and sent."""
        self._ensure()
        prefix, tail = wire.frame_ends(head, [n])
        with self._send_lock:
            sock = self._sock
            try:
                if sock is None:
                    raise OSError("the judge's connection is closed")
                sock.sendall(prefix)
                left = n
                while left:
                    moved = _move(fd, sock, left)
                    if not moved:
                        raise OSError("the worker's pipe ended inside a piece it had buffered")
                    left -= moved
                if tail:
                    sock.sendall(tail)
            except OSError as exc:
                # The judge was promised bytes it will not get: its stream is unusable, so it is
                # restarted on next use rather than misread.
                self._drop_connection()
                raise JudgeError(f"cannot pass outputs on to the judge: {exc}") from None

    def _drop_connection(self) -> None:
        sock = self._sock
        if sock is not None:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def request(self, head: dict, req: str | None = None, timeout: float = REPLY_TIMEOUT_S) -> dict:
        req = req or self.new_id()
        event = threading.Event()
        box: list[dict] = []
        self._waiting[req] = (event, box)
        self.send({**head, "req": req})
        if not event.wait(timeout):
            self._waiting.pop(req, None)
            raise JudgeError("the judge did not answer in time")
        return box[0]

    def relayed(self, nbytes: int, seconds: float) -> None:
        with self._relay_lock:
            self.relay["bytes"] += nbytes
            self.relay["seconds"] += seconds

    def new_id(self) -> str:
        return f"r{next(self._ids)}"

    def receiver(self, key: str, slot: str, mode: str, metas: list[dict], tolerance: dict | None = None,
                 trial: int = 0, in_use: list[str] | None = None) -> Receiver | Discard:
        """Where one frame's tensors go. A store is answered before any byte moves, so a
        reference the judge cannot keep costs no relaying; a comparison streams at once."""
        req = self.new_id()
        begin = {"op": JudgeOp.begin, "req": req, "key": key, "slot": slot, "mode": mode, "metas": metas,
                 "in_use": in_use or [], "tolerance": tolerance or {}, "trial": trial}
        if mode == "store":
            answer = self.request(begin, req=req)
            if not answer.get("accepted"):  # its bytes are dropped here, and the refusal is its answer
                return Discard(answer)
        else:
            self.send(begin)
        return Receiver(self, req, {"tolerance": tolerance or {}, "trial": trial})

    def open_ring(self) -> "RingLease | None":
        """A ring for one job's outputs (see `sandbox.ring`), or None where the judge makes none
        (the job's outputs then stream through its pipe, as they always may)."""
        with self._ring_lock:
            try:
                self._ensure()
                generation, channel = self.generation, self._fd_channel
                req = self.new_id()
                answer = self.request({"op": JudgeOp.ring_open}, req=req, timeout=RING_OPEN_TIMEOUT_S)
                if "ring" not in answer or channel is None:
                    self._note_no_ring(str(answer.get("error", "no ring")))
                    return None
                fds = _receive_fds(channel, req, 2)
            except (JudgeError, OSError, ValueError) as exc:
                self._note_no_ring(str(exc))
                return None
            lease = RingLease(self, str(answer["ring"]), Geometry.from_job(answer["geometry"]), fds, generation)
            with self._leases_lock:
                self._leases.add(lease)
            return lease

    def _note_no_ring(self, why: str) -> None:
        if self.ring_note is None:
            log.warning("the judge made no ring for a job's outputs; they stream through its pipe: %s", why)
        self.ring_note = why[:300]

    def flags(self, key: str, tolerance: dict) -> list[dict]:
        answer = self.request({"op": JudgeOp.flags, "key": key, "tolerance": tolerance})
        if "error" in answer:
            raise JudgeError(str(answer["error"]))
        return list(answer.get("flags", []))

    def drop(self, key: str) -> None:
        self.send({"op": JudgeOp.drop, "key": key})

    def stats(self) -> dict:
        return dict(self.request({"op": JudgeOp.stats}).get("stats", {}))

    def room_beside(self, in_use: list[str]) -> int:
        """Bytes a new reference could have in the judge beside the references of `in_use`."""
        return int(self.request({"op": JudgeOp.stats, "in_use": in_use}).get("room_bytes", 0))


class RingLease:
    """A job's ring, made by the judge: the descriptors its process gets (memory, credit pipe),
    and where the pieces it announces go. Closed once the job has ended."""

    def __init__(self, client: JudgeClient, ring_id: str, geometry: Geometry, fds: list[int], generation: int) -> None:
        self.client, self.ring_id, self.geometry = client, ring_id, geometry
        self._fds, self._generation = fds, generation
        self._on_lost: list[Callable[[], None]] = []
        self._ended = False
        self._lock = threading.Lock()

    def when_lost(self, callback: Callable[[], None]) -> None:
        """Call `callback` once the judge that made this ring ends (at once if it has)."""
        with self._lock:
            if not self._ended:
                self._on_lost.append(callback)
                return
        callback()

    def judge_ended(self) -> None:
        with self._lock:
            self._ended = True
            callbacks, self._on_lost = self._on_lost, []
        for callback in callbacks:
            callback()

    def fds(self) -> list[int]:
        return list(self._fds)

    def piece(self, receiver, index: int, offset: int, n: int, slot: int) -> None:
        if hasattr(receiver, "piece"):
            receiver.piece(self.ring_id, index, offset, n, slot)
        else:  # bytes nobody takes: the judge only hands the slot back, in turn with the others
            self.client.send({"op": JudgeOp.piece, "ring": self.ring_id, "slot": slot})

    def intact(self) -> bool:
        if self.geometry.device != "cpu" or not self._fds:  # device memory has no file size to lose
            return True
        return rings.intact(self._fds[0], self.geometry.nbytes)  # the first descriptor: the ring's memfd

    def lost(self) -> str | None:
        """Why the job's outputs could not all arrive: the judge that made the ring is gone."""
        if self._ended or self.client.generation != self._generation:
            return "the judge ended while the job's outputs were on their way to it"
        return None

    def close(self) -> None:
        with self.client._leases_lock:
            self.client._leases.discard(self)
        fds, self._fds = self._fds, []
        for fd in fds:
            os.close(fd)
        if fds and self.lost() is None:
            try:
                self.client.send({"op": JudgeOp.ring_close, "ring": self.ring_id})
            except JudgeError:
                pass


def _receive_fds(channel: socket.socket, tag: str, count: int) -> list[int]:
    """The descriptors the judge sent for request `tag` (others, left by a request that gave up, are closed)."""
    channel.settimeout(RING_OPEN_TIMEOUT_S)
    while True:
        data, fds, _flags, _addr = socket.recv_fds(channel, 256, count)
        if not data:
            raise OSError("the judge's fd channel closed")
        if data.decode(errors="replace") == tag and len(fds) == count:
            return fds
        for fd in fds:
            os.close(fd)


class JudgeStop:
    """Keeps the judge's own device work off the GPU while a candidate is measured: `with stop:`
    stops its process (as paused workers are) until the block ends or `resume()` is called,
    whichever comes first. The measured job's sink calls `resume` as soon as it has results to
    hand over, so nothing waits on a stopped judge for longer than the measurement; a `resume`
    that comes before the block means the judge is not stopped at all."""

    def __init__(self, client: JudgeClient) -> None:
        self.client = client
        self._lock = threading.Lock()
        self._pid: int | None = None
        self._over = False

    def __enter__(self) -> "JudgeStop":
        with self._lock:
            self._pid = None if self._over else self.client.pid()
            if self._pid is not None:
                _signal(self._pid, signal.SIGSTOP)
                until_stopped([self._pid], STOP_CONFIRM_S)
        return self

    def __exit__(self, *exc: object) -> None:
        self.resume()

    def resume(self) -> None:
        with self._lock:
            self._over = True
            if self._pid is not None:
                _signal(self._pid, signal.SIGCONT)
                self._pid = None


def _signal(pid: int, sig: int) -> None:
    try:
        os.kill(pid, sig)
    except ProcessLookupError:
        pass  # it ended: the reader notices and the next use starts another


_splice_works = [hasattr(os, "splice")]


def _move(fd: int, sock: socket.socket, n: int) -> int:
    """Move up to `n` bytes from `fd` into `sock`; how many moved (0: `fd` had none)."""
    if _splice_works[0]:
        try:
            return os.splice(fd, sock.fileno(), n)
        except OSError as exc:
            if exc.errno not in (errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP):
                raise
            _splice_works[0] = False  # this kernel cannot splice into this socket: read and send
    data = os.read(fd, n)
    sock.sendall(data)
    return len(data)


class KeysInUse:
    """The judge keys of tasks with work in flight here: their references are evicted last.

    References the judge turned away for want of room wait here in a queue, first come first
    served: only the first tries again, when some task's work ends. Were each to try on its own
    clock, several large tasks would evict one another's references and none would finish."""

    def __init__(self) -> None:
        self._counts: dict[str, int] = {}
        self._released = threading.Condition()
        self._releases = 0  # how many times some task's work ended
        self._queue: list[int] = []  # tickets of references waiting for room, oldest first
        self._next_ticket = 0
        self._head_since = time.monotonic()

    @contextmanager
    def hold(self, key: str) -> Iterator[None]:
        with self._released:
            self._counts[key] = self._counts.get(key, 0) + 1
        try:
            yield
        finally:
            with self._released:
                self._counts[key] -= 1
                if not self._counts[key]:
                    del self._counts[key]
                    self._releases += 1
                    self._released.notify_all()

    def keys_held(self) -> list[str]:
        with self._released:
            return list(self._counts)

    @contextmanager
    def queue(self) -> Iterator["RoomTurn"]:
        """A place in the queue for room in the judge, given up on leaving."""
        with self._released:
            ticket = self._next_ticket
            self._next_ticket += 1
            if not self._queue:
                self._head_since = time.monotonic()
            self._queue.append(ticket)
        try:
            yield RoomTurn(self, ticket)
        finally:
            with self._released:
                if self._queue and self._queue[0] == ticket:
                    self._head_since = time.monotonic()
                self._queue.remove(ticket)
                self._released.notify_all()


class RoomTurn:
    """One reference's place in the queue for room in the judge (see KeysInUse)."""

    def __init__(self, keys: KeysInUse, ticket: int) -> None:
        self._keys, self._ticket = keys, ticket

    def wait(self, patience_s: float) -> None:
        """Until this reference is first in the queue and some task's work has ended since the
        call, or until it has been first for `patience_s` (however long it waits to be first)."""
        keys = self._keys
        with keys._released:
            seen = keys._releases
            keys._released.wait_for(lambda: keys._queue[0] == self._ticket)
            if keys._releases == seen:
                left = patience_s - (time.monotonic() - keys._head_since)
                keys._released.wait_for(lambda: keys._releases != seen, max(0.0, left))

    def waited_first_s(self) -> float:
        """Seconds this reference has been first in the queue (0 while it is not)."""
        keys = self._keys
        with keys._released:
            return time.monotonic() - keys._head_since if keys._queue and keys._queue[0] == self._ticket else 0.0

