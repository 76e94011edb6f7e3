"""The judge process: receives streamed outputs, stores references, compares candidates.

Run as `python -m adaexplore.evaluator.judge.process FD DEVICE BUDGET_BYTES [HOST_BUDGET_BYTES [FD_CHANNEL]]` by the evaluator
(`client.py`), which relays every worker's output bytes here. The evaluator is the only peer:
candidate code never runs here and never reaches this process (workers sit in their own PID and
network namespaces). Still, every size and index in a message is checked before use, and a
ring's size before a slot of it is read, since the bytes themselves come from candidates.

Messages (framed by `sandbox.wire`), all with a request id `req`:
- begin {key, slot, mode: store|compare, metas, in_use, tolerance, trial}: outputs of one frame
  are coming; a store never evicts references of keys `in_use`; it is answered at once,
  {accepted}, or {busy} when it cannot fit beside them, or {error, too_large} (then no bytes
  follow); a comparison is not answered until its end;
- chunk {index, offset} + bytes: the next piece of output `index` (pieces come in order); a
  store keeps it, a comparison compares it against the reference once a stage (STAGE_BYTES) is
  full, so a candidate's outputs are never held here whole;
- end: the frame is complete; the answer is {stored} or {verdict};
- flags {key, tolerance}: the task flags that need the reference's outputs (degenerate task,
  random forward), answered with {flags}; the inputs kept for them are then released;
- ring_open: a ring for one job (`sandbox.ring`), answered {ring, geometry}; its memory and the
  read end of its credit pipe travel on the fd channel (a second socket), tagged with the request;
- piece {ring, slot, req?, index, offset, n}: the next piece of the outputs of `req` lies in that
  slot: taken like a chunk, straight from the slot (no req: nobody takes it); either way the slot
  is handed back to the job after, by a byte on its credit pipe;
- ring_close {ring}: the job has ended; its ring is freed;
- drop {key}; stats: {stats} (budget, use, bytes received, seconds spent waiting, copying,
  comparing and flagging).
Errors that are ours (a budget, memory) answer {error, ours}.
"""

from __future__ import annotations

import itertools
import math
import os
import socket
import sys
import time
from dataclasses import dataclass, field

import torch

from ...common.vocab import JudgeOp
from ..compare import OutputCheck, compare_kinds, pieces
from ..reference import Reference
from ..results import Tolerance
from ..sandbox import ring as rings
from ..sandbox import wire
from ..sandbox.procs import available_memory, die_with_parent, physical_memory
from ..verdict import degenerate_flags
from .reference_store import BudgetBusy, BudgetExceeded, OutputStore

# A comparison holds at most this many of a candidate's output bytes on the device at once.
STAGE_BYTES = 64 << 20
MAX_RINGS = 64  # open rings at once (one per job in flight; the evaluator streams beyond that)


@dataclass
class OpenRing:
    """A job's ring here: its memory, shape and the write end of the job's credit pipe."""

    memory: rings.Memory
    geometry: rings.Geometry
    credit: int

    def hand_back(self) -> None:
        """One slot back to the job. A job that does not read its credits only stops itself:
        the write never blocks, and a job that has ended is no error."""
        try:
            os.write(self.credit, b"c")
        except OSError:  # full (it reads none) or closed (it ended)
            pass

    def close(self) -> None:
        os.close(self.credit)
        self.memory.close()


@dataclass
class Pending:
    key: str
    slot: str
    mode: str
    sizes: list[int] = field(default_factory=list)  # bytes of each output
    received: list[int] = field(default_factory=list)
    tensors: list[torch.Tensor] = field(default_factory=list)  # a store's outputs, filled as bytes arrive
    check: OutputCheck | None = None  # a comparison, fed a stage at a time
    dtypes: list[torch.dtype] = field(default_factory=list)
    stage: torch.Tensor | None = None
    staged: int = 0  # bytes in the stage, all of output `stage_index` from byte `received - staged`
    stage_index: int = 0
    failure: dict | None = None  # decided before the data arrived (shape mismatch, budget, ...)


class Judge:
    def __init__(self, device: str, budget_bytes: int, sock: socket.socket, host_budget_bytes: int = -1,
                 fd_channel: socket.socket | None = None) -> None:
        self.device = torch.device(device)
        if self.device.type == "cuda":
            if self.device.index is None:  # "cuda" names the current device; set_device needs its index
                self.device = torch.device("cuda", torch.cuda.current_device())
            torch.cuda.set_device(self.device)
        if host_budget_bytes < 0:  # by default host memory holds references only beside a GPU
            host_budget_bytes = default_host_budget() if self.device.type == "cuda" else 0
        self.store = OutputStore(budget_bytes if budget_bytes > 0 else default_budget(self.device), self.device,
                                 host_budget_bytes)
        self.sock = sock
        self.fd_channel = fd_channel
        self.rings: dict[str, OpenRing] = {}
        self._ring_ids = itertools.count(1)
        self.pending: dict[str, Pending] = {}
        # Where this process's time goes (for `stats`): waiting for bytes, copying them in, comparing.
        self.seconds = {"wait": 0.0, "copy": 0.0, "compare": 0.0, "flags": 0.0}
        self.bytes_in = 0
        self.ring_bytes_in = 0  # of which through rings

    def give_back(self) -> None:
        """Return freed device memory to the device: the jobs beside the judge are admitted by
        its budget, which only holds if what it no longer uses is not kept cached here."""
        if self.device.type == "cuda":
            torch.cuda.empty_cache()

    def reply(self, head: dict) -> None:
        self.sock.sendall(wire.pack(head))

    def handle(self, head: dict, blobs: list) -> None:
        op, req = head.get("op"), str(head.get("req", ""))
        try:
            if op == JudgeOp.begin:
                self.begin(req, head)
                if head.get("mode") == "store":  # answered at once: a refused store sends no bytes
                    failure = self.pending[req].failure
                    self.reply({"req": req, **(failure or {"accepted": True})})
                    if failure is not None:
                        self.pending.pop(req, None)
            elif op == JudgeOp.chunk:
                self.chunk(req, head, blobs)
            elif op == JudgeOp.piece:
                self.piece(head)
            elif op == JudgeOp.ring_open:
                self.reply({"req": req, **self.ring_open(req)})
            elif op == JudgeOp.ring_close:
                ring = self.rings.pop(str(head.get("ring")), None)
                if ring is not None:
                    ring.close()
            elif op == JudgeOp.end:
                self.reply({"req": req, **self.end(req, head)})
            elif op == JudgeOp.abort:
                self.pending.pop(req, None)
                self.give_back()
            elif op == JudgeOp.flags:
                self.reply({"req": req, "flags": self.flags(str(head["key"]), head)})
                self.give_back()
            elif op == JudgeOp.drop:
                self.store.drop(str(head.get("key")))
                self.give_back()
            elif op == JudgeOp.stats:  # and the room a new reference has beside the keys `in_use`
                self.reply({"req": req, "stats": self.stats(), "room_bytes": self.store.room_beside(_in_use(head))})
        except torch.cuda.OutOfMemoryError as exc:
            self.pending.pop(req, None)
            self.give_back()
            # "oom": jobs beside the judge took the device; the evaluator runs the job again alone
            self.reply({"req": req, "error": f"the judge ran out of device memory: {exc}"[:400], "ours": True,
                        "oom": True})
        except (KeyError, ValueError, TypeError, RuntimeError) as exc:
            self.pending.pop(req, None)
            self.reply({"req": req, "error": f"{type(exc).__name__}: {exc}"[:400], "ours": True})

    def begin(self, req: str, head: dict) -> None:
        metas = head["metas"]
        sizes = [wire.checked_nbytes(m) for m in metas]  # every size checked before use
        shapes = [list(m["shape"]) for m in metas]
        dtypes = [getattr(torch, m["dtype"]) for m in metas]
        pending = Pending(str(head["key"]), str(head["slot"]), str(head["mode"]), sizes, [0] * len(sizes))
        self.pending[req] = pending
        if pending.mode == "compare":
            expected = self.store.get(pending.key, pending.slot)
            if expected is None:
                pending.failure = {"missing": True}
                return
            decided = compare_kinds([(tuple(s), d) for s, d in zip(shapes, dtypes)], expected)
            if decided is not None:  # decided without the data
                pending.failure = {"verdict": _verdict_dict(decided)}
                return
            # The candidate's outputs are compared a stage at a time as they arrive, never held whole.
            tol = Tolerance.model_validate(head.get("tolerance") or {})
            pending.check = OutputCheck(expected, tol, trial=int(head.get("trial", 0)))
            pending.dtypes = dtypes
            return
        try:
            place = self.store.reserve(pending.key, sum(sizes), _in_use(head))
        except BudgetExceeded as exc:
            pending.failure = {"error": str(exc), "too_large": True}
            return
        except BudgetBusy as exc:
            pending.failure = {"error": str(exc), "busy": True, "need_bytes": exc.need_bytes}
            return
        finally:
            self.give_back()  # what reserve evicted or dropped goes back to the device
        pending.tensors = [torch.empty(s, dtype=d, device=place) for s, d in zip(shapes, dtypes)]

    def chunk(self, req: str, head: dict, blobs: list) -> None:
        pending = self.pending.get(req)
        if pending is None or pending.failure is not None or not blobs:
            return
        index, offset = int(head["index"]), int(head["offset"])
        data = torch.frombuffer(blobs[0], dtype=torch.uint8) if len(blobs[0]) else None
        if data is None or not _next_in_order(pending, index, offset, data.numel()) \
                or (pending.staged and pending.stage_index != index):
            raise ValueError("a chunk out of order or outside its output")
        t0 = time.perf_counter()
        if pending.check is None:
            target = pending.tensors[index]
            flat = target.view(-1).view(torch.uint8)
            flat[offset:offset + data.numel()].copy_(data, non_blocking=False)
            pending.received[index] += data.numel()
        else:
            self._stage(pending, index, data)
        self.seconds["copy"] += time.perf_counter() - t0
        self.bytes_in += data.numel()

    def ring_open(self, req: str) -> dict:
        """A ring for one job; its descriptors go on the fd channel before the answer."""
        if self.fd_channel is None or len(self.rings) >= MAX_RINGS:
            return {"error": "no ring: " + ("no fd channel" if self.fd_channel is None else "too many open"),
                    "ours": True}
        geometry = rings.Geometry.for_device(str(self.device))
        memory = rings.make(geometry)
        geometry = rings.Geometry(geometry.slot_bytes, geometry.slots, memory.tensor.numel(), geometry.device)
        credit_r, credit_w = os.pipe()
        os.set_blocking(credit_w, False)
        ring_id = f"g{next(self._ring_ids)}"
        try:
            assert memory.fd is not None  # made here, so exportable
            socket.send_fds(self.fd_channel, [req.encode()], [memory.fd, credit_r])
        except OSError as exc:
            os.close(credit_w)
            memory.close()
            return {"error": f"cannot hand a ring over: {exc}", "ours": True}
        finally:
            os.close(credit_r)
        os.close(memory.fd)  # the job's process maps it through the copy sent
        memory.fd = None
        self.rings[ring_id] = OpenRing(memory, geometry, credit_w)
        return {"ring": ring_id, "geometry": geometry.to_job()}

    def piece(self, head: dict) -> None:
        """Take one piece from a ring slot for the transfer it belongs to (if any), then hand the
        slot back, whatever happened."""
        ring = self.rings.get(str(head.get("ring")))
        if ring is None:
            return
        try:
            req = head.get("req")
            pending = self.pending.get(str(req)) if req is not None else None
            if pending is not None and pending.failure is None:
                self._take_piece(pending, ring, head)
        finally:
            ring.hand_back()

    def _take_piece(self, pending: Pending, ring: OpenRing, head: dict) -> None:
        index, offset, n, slot = (int(head[k]) for k in ("index", "offset", "n", "slot"))
        g = ring.geometry
        if not _next_in_order(pending, index, offset, n) or n > g.slot_bytes or not 0 <= slot < g.slots \
                or pending.staged:
            raise ValueError("a piece out of order or outside its output or its ring")
        if not ring.memory.intact():  # a slot past the end of a shrunk memfd would fault this process
            raise ValueError("a piece in a ring whose memory shrank")
        t0 = time.perf_counter()
        source = ring.memory.slot(slot, n)
        if pending.check is None:
            target = pending.tensors[index].view(-1).view(torch.uint8)
            target[offset:offset + n].copy_(source)
        else:
            dtype = pending.dtypes[index]
            if offset % dtype.itemsize or n % dtype.itemsize:
                raise ValueError("a piece that splits an element")
            for start, part in pieces(source.view(dtype)):
                self._feed(pending, index, offset // dtype.itemsize + start, part)
        if source.device.type == "cuda":  # the slot is read before it is handed back
            torch.cuda.current_stream(source.device).synchronize()
        pending.received[index] += n
        self.seconds["copy"] += time.perf_counter() - t0
        self.bytes_in += n
        self.ring_bytes_in += n

    def _stage(self, pending: Pending, index: int, data: torch.Tensor) -> None:
        """Copy a comparison's bytes into its stage, comparing each full stage (and an output's
        last bytes): the stage's size is a multiple of every element size."""
        if pending.stage is None:
            pending.stage = torch.empty(min(STAGE_BYTES, max(pending.sizes)), dtype=torch.uint8, device=self.device)
        done = 0
        while done < data.numel():
            n = min(data.numel() - done, pending.stage.numel() - pending.staged)
            pending.stage[pending.staged:pending.staged + n].copy_(data[done:done + n])
            pending.staged += n
            pending.stage_index = index
            pending.received[index] += n
            done += n
            if pending.staged == pending.stage.numel() or pending.received[index] == pending.sizes[index]:
                self._compare_stage(pending)

    def _compare_stage(self, pending: Pending) -> None:
        if not pending.staged or pending.check is None or pending.stage is None:
            return
        index, dtype = pending.stage_index, pending.dtypes[pending.stage_index]
        piece = pending.stage[:pending.staged].view(dtype)
        self._feed(pending, index, (pending.received[index] - pending.staged) // dtype.itemsize, piece)
        pending.staged = 0

    def _feed(self, pending: Pending, index: int, first: int, piece: torch.Tensor) -> None:
        """Compare `piece`, the elements of output `index` from element `first`, with the reference."""
        assert pending.check is not None  # only a comparison is fed
        t0 = time.perf_counter()
        pending.check.feed(index, first, piece)
        self.seconds["compare"] += time.perf_counter() - t0

    def end(self, req: str, head: dict) -> dict:
        pending = self.pending.pop(req, None)
        if pending is None:
            return {"error": "no such transfer", "ours": True}
        if pending.failure is not None:
            return pending.failure
        if pending.received != pending.sizes:
            return {"error": "an output arrived incomplete", "ours": False}
        if pending.check is None:
            self.store.put(pending.key, pending.slot, pending.tensors)
            return {"stored": True}
        if self.store.get(pending.key, pending.slot) is None:
            return {"missing": True}
        return {"verdict": _verdict_dict(pending.check.verdict())}

    def flags(self, key: str, head: dict) -> list[dict]:
        t0 = time.perf_counter()
        try:
            return self._flags(key, head)
        finally:
            self.seconds["flags"] += time.perf_counter() - t0

    def _flags(self, key: str, head: dict) -> list[dict]:
        slots = self.store.slots(key)
        trials = sorted((s for s in slots if s.startswith("trial:")), key=lambda s: int(s.split(":")[1]))
        ref = Reference(outputs=[slots[s] for s in trials], inputs=slots.get("inputs", []),
                        repeat=slots.get("repeat", []))
        tolerance = Tolerance.model_validate(head.get("tolerance") or {})
        flags = [f.model_dump(mode="json") for f in degenerate_flags(ref, tolerance, self.device)]
        for slot in ("inputs", "repeat"):  # needed for the flags only
            if slot in slots:
                self.store.put(key, slot, [])
        return flags

    def stats(self) -> dict:
        out = {"used_bytes": self.store.used_on("device"), "budget_bytes": self.store.budget_bytes,
               "host_used_bytes": self.store.used_on("host"), "host_budget_bytes": self.store.host_budget_bytes,
               "entries": len(self.store.keys()), "keys": self.store.keys(), "device": str(self.device),
               "bytes_in": self.bytes_in, "ring_bytes_in": self.ring_bytes_in, "rings_open": len(self.rings),
               "seconds": {k: round(v, 3) for k, v in self.seconds.items()}}
        if self.device.type == "cuda":
            out["device_allocated_bytes"] = torch.cuda.memory_allocated(self.device)
            out["device_total_bytes"] = torch.cuda.get_device_properties(self.device).total_memory
        return out


# The judge's share of a GPU. The largest KernelBench tasks (level 1, 38_L1Norm_ and 39_L2Norm_:
# outputs of 8.6 GB) keep 68.7 GB while they register (five trials, the check run, and the
# inputs and a repeat run for the task's flags, which are released after them): 0.42 of an H200,
# 63 GB, holds all of it but the check run, which goes to host memory beside it. The rest of
# the GPU (87 GB) is what jobs may reserve; the largest such task's timing reserves 43 GB of it.
GPU_SHARE = 0.42


# On the CPU the references live in host memory beside the server and its workers (a reference
# job holds a trial's outputs and its inputs while it sends them), so the judge takes a share of
# the memory that is free when it starts, not of the machine's: CPU_SHARE of it, but never so much
# that less than CPU_KEEP_BYTES is left to the others, and at least CPU_MIN_BYTES.
CPU_SHARE = 0.5
CPU_KEEP_BYTES = 4 << 30
CPU_MIN_BYTES = 256 << 20


def cpu_budget(available_bytes: int) -> int:
    """The judge's budget on the CPU, where `available_bytes` of memory are available (see above)."""
    return max(CPU_MIN_BYTES, min(int(CPU_SHARE * available_bytes), available_bytes - CPU_KEEP_BYTES))


def default_budget(device: torch.device) -> int:
    """GPU_SHARE of the GPU's memory; on the CPU `cpu_budget` of the memory available now (where
    the system cannot say, 4 GiB, or an eighth of the machine's memory if less)."""
    if device.type == "cuda":
        return int(GPU_SHARE * torch.cuda.get_device_properties(device).total_memory)
    available = available_memory()
    return cpu_budget(available) if available is not None else min(4 << 30, physical_memory() // 8)


# The judge's share of host memory, on a GPU, for references that do not fit its device share
# beside those of tasks in use (on the CPU the device share is host memory already). A large
# level-1 task's five trials take 32 GB; a third of a 128 GiB machine holds one of them.
HOST_SHARE = 1 / 3


def default_host_budget(judges: int = 1) -> int:
    """A GPU judge's share of host memory: HOST_SHARE of the machine's, split between the
    `judges` of one machine (one per GPU)."""
    return int(HOST_SHARE * physical_memory() / max(1, judges))


def _next_in_order(pending: Pending, index: int, offset: int, n: int) -> bool:
    """Whether `n` bytes at `offset` of output `index` are the next ones it lacks: bytes arrive in
    order, so each output is covered once, from its first byte to its last."""
    return 0 <= index < len(pending.sizes) and offset == pending.received[index] and 0 < n \
        and offset + n <= pending.sizes[index]


def _in_use(head: dict) -> frozenset[str]:
    """The keys of tasks in use that a message names (none if it names none)."""
    in_use = head.get("in_use")
    return frozenset(map(str, in_use)) if isinstance(in_use, list) else frozenset()


def _verdict_dict(verdict) -> dict:
    mismatch = None
    if verdict.mismatch is not None:  # JSON has no inf or NaN: they travel as strings, which pydantic reads back
        mismatch = {k: (str(v) if isinstance(v, float) and not math.isfinite(v) else v)
                    for k, v in verdict.mismatch.model_dump().items()}
    return {"status": verdict.status.value, "message": verdict.message, "mismatch": mismatch}


def main() -> None:
    # Killed with the evaluator: stopped for a measurement, it could not see its socket close.
    die_with_parent()
    sock = socket.socket(fileno=int(sys.argv[1]))
    fd_channel = socket.socket(fileno=int(sys.argv[5])) if len(sys.argv) > 5 else None
    judge = Judge(sys.argv[2], int(sys.argv[3]), sock, int(sys.argv[4]) if len(sys.argv) > 4 else -1, fd_channel)
    try:
        judge.reply({"ready": True})
        messages = wire.receive_messages(sock)  # each message is handled before the next is read
        while True:
            t0 = time.perf_counter()
            try:
                message = next(messages, None)
            except wire.WireError:  # the evaluator ended mid-message (killed): nobody is left to answer
                break
            judge.seconds["wait"] += time.perf_counter() - t0
            if message is None:
                break
            judge.handle(*message)
    except (BrokenPipeError, ConnectionResetError):  # the evaluator went away (a server shut down as it started)
        pass
    # Its stderr is the user's: the interpreter's teardown, in which a native extension (Triton's,
    # were it imported) may report its live objects as leaked, is skipped; the peer is gone.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
