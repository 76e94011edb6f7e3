"""A job's ring: memory shared by one worker and the judge, through which its outputs travel (both sides).

Outputs of a KernelBench task reach gigabytes; streamed through pipes and sockets they cross
host memory twice and take seconds each. Through a ring they never leave the device: the judge
makes, for each job, memory that only it and that job's process map (on a GPU device memory
exported as a file descriptor, `vmm`; on the CPU a memfd), cut into `slots` slots of
`slot_bytes`. The worker copies the next piece of an output into a free slot, waits for the copy,
and announces it on its result pipe (a `piece` frame after the frame's header, which carries the
tensors' descriptions under "ring" instead of their bytes). The evaluator checks the piece against
what the header declared and passes its place on; the judge copies it into its store or compares
it where it lies, then hands the slot back by writing one byte to the job's credit pipe. The
worker reads a credit before it reuses a slot, so it never overwrites a piece not yet taken, and
since the judge alone writes credits, in the order pieces reach it, they come back in order.

What a ring can reach: its memory holds only its own job's outputs (the judge never writes into
it, and a ring serves one job and is freed after it), so a candidate that writes into its ring
at any time changes only what its own outputs are said to be. The judge reads a slot only
between a piece's announcement and its credit, checks every index, offset and size, and
credits even a piece it refuses, so a worker is never stuck; a worker that never reads its
credits only stops itself. A CPU ring's memfd is sealed at its size: a job that could shrink
it would have the judge fault (SIGBUS) on the slot it reads next, and the judge holds every
task's references. The evaluator, before it passes a piece on, and the judge, before it reads
one, check that size all the same: a piece of a ring that shrank is refused as forged.
"""

from __future__ import annotations

import fcntl
import mmap
import os
import time
from dataclasses import dataclass
from typing import Any

from ...common.vocab import Kind
from . import wire

# Frames whose tensors travel through the ring when the job has one; others (a candidate's
# compiled kernels, which the evaluator keeps) are streamed on the pipe.
RING_KINDS = frozenset({Kind.trial, Kind.inputs, Kind.repeat, Kind.check, Kind.timing, Kind.unlaunched})
GPU_SLOT_BYTES = 64 << 20
CPU_SLOT_BYTES = 8 << 20
SLOTS = 2


@dataclass(frozen=True)
class Geometry:
    """A ring's shape: `slots` slots of `slot_bytes` in `nbytes` of memory on `device`."""

    slot_bytes: int
    slots: int
    nbytes: int
    device: str  # "cpu" or "cuda:N"

    def to_job(self) -> dict:
        return {"slot_bytes": self.slot_bytes, "slots": self.slots, "nbytes": self.nbytes, "device": self.device}

    @classmethod
    def from_job(cls, entry: dict) -> "Geometry":
        return cls(int(entry["slot_bytes"]), int(entry["slots"]), int(entry["nbytes"]), str(entry["device"]))

    @classmethod
    def for_device(cls, device: str) -> "Geometry":
        slot = GPU_SLOT_BYTES if device.startswith("cuda") else CPU_SLOT_BYTES
        return cls(slot, SLOTS, slot * SLOTS, device)


class Memory:
    """A ring's memory in this process, as a flat uint8 tensor (`tensor`) cut into slots of `slot_bytes`."""

    def __init__(self, tensor: Any, slot_bytes: int, fd: int | None, closer: Any, size_fd: int | None = None) -> None:
        self.tensor, self.slot_bytes, self.fd, self._closer = tensor, slot_bytes, fd, closer
        # A CPU ring's memfd, kept by its maker (after `fd` has gone to the job) to check its size.
        self._size_fd = size_fd
        self.nbytes = tensor.numel()

    def intact(self) -> bool:
        """Whether all of this memory is still there to read (see `intact`)."""
        return self._size_fd is None or intact(self._size_fd, self.nbytes)

    def slot(self, slot: int, n: int) -> Any:
        """The first `n` bytes of slot `slot`."""
        start = slot * self.slot_bytes
        return self.tensor[start:start + n]

    def close(self) -> None:
        self.tensor = None
        for fd in (self.fd, self._size_fd):
            if fd is not None:
                os.close(fd)
        self.fd = self._size_fd = None
        closer, self._closer = self._closer, None
        if closer is not None:
            closer()


def make(geometry: Geometry) -> Memory:
    """New ring memory (judge side); `fd` is what the job's process maps."""
    if geometry.device.startswith("cuda"):
        from .vmm import SharedDeviceMemory

        shared = SharedDeviceMemory.create(geometry.nbytes, _index(geometry.device))
        try:
            fd = shared.export()
        except BaseException:
            shared.close()
            raise
        return Memory(shared.tensor, geometry.slot_bytes, fd, shared.close)
    fd = os.memfd_create("adaexplore-ring", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
    size_fd = None
    try:
        os.ftruncate(fd, geometry.nbytes)
        _seal(fd)
        size_fd = os.dup(fd)
        return _mapped(fd, geometry, keep_fd=True, size_fd=size_fd)
    except BaseException:
        for opened in (fd, size_fd):
            if opened is not None:
                os.close(opened)
        raise


# The job writes its ring (no write seal), but its size is fixed for good: no shrinking, no
# growing, and no unsealing.
SEALS = fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW | fcntl.F_SEAL_SEAL


def _seal(fd: int) -> None:
    fcntl.fcntl(fd, fcntl.F_ADD_SEALS, SEALS)


def intact(fd: int, nbytes: int) -> bool:
    """Whether the CPU ring memory behind `fd` still has its `nbytes`: a page of a mapping past
    the end of its file faults whoever reads it (SIGBUS). A sealed ring always has them; this
    is the check for where a seal could be missing."""
    try:
        return os.fstat(fd).st_size == nbytes
    except OSError:
        return False


def attach(fd: int, geometry: Geometry, device_index: int | None = None) -> Memory:
    """The ring memory behind `fd`, mapped in this process (worker side; `fd` is closed), on the
    GPU this process numbers `device_index` (its current one if None)."""
    try:
        if geometry.device.startswith("cuda"):
            from .vmm import SharedDeviceMemory

            index = _index("cuda") if device_index is None else device_index
            shared = SharedDeviceMemory.attach(fd, geometry.nbytes, index)
            return Memory(shared.tensor, geometry.slot_bytes, None, shared.close)
        return _mapped(fd, geometry, keep_fd=False)
    finally:
        os.close(fd)


def _index(device: str) -> int:
    """The index of a CUDA device named `device` ("cuda": the current one)."""
    import torch

    parsed = torch.device(device)
    return parsed.index if parsed.index is not None else torch.cuda.current_device()


def _mapped(fd: int, geometry: Geometry, keep_fd: bool, size_fd: int | None = None) -> Memory:
    import torch

    view = mmap.mmap(fd, geometry.nbytes)
    tensor = torch.frombuffer(view, dtype=torch.uint8)

    def unmap() -> None:
        try:
            view.close()
        except BufferError:  # a view of it is still alive somewhere: unmapped once it is gone
            pass

    return Memory(tensor, geometry.slot_bytes, fd if keep_fd else None, unmap, size_fd)


class RingWriter:
    """A worker's end of its ring: writes a frame's tensors through the slots (see module doc)."""

    def __init__(self, fd: int, credit_fd: int, geometry: Geometry) -> None:
        self.fd, self.credit_fd, self.geometry = fd, credit_fd, geometry
        self.memory: Memory | None = None
        self.next_slot = 0
        self.outstanding = 0  # slots announced and not yet handed back
        self.wait_s = 0.0  # time spent waiting for the judge to hand slots back
        self.broken = False  # the ring could not be mapped here: messages stream on the pipe

    def _memory(self, near) -> Memory:
        # Mapped on first use, on the GPU of the first output sent: this process's CUDA context exists by then.
        if self.memory is None:
            fd, self.fd = self.fd, -1
            self.memory = attach(fd, self.geometry, near.index if near.type == "cuda" else None)
        return self.memory

    def _take_slot(self) -> int:
        if self.outstanding == self.geometry.slots:
            t0 = time.perf_counter()
            if not os.read(self.credit_fd, 1):  # the judge is gone: nobody will hand a slot back
                os._exit(75)
            self.wait_s += time.perf_counter() - t0
            self.outstanding -= 1
        slot = self.next_slot
        self.next_slot = (slot + 1) % self.geometry.slots
        self.outstanding += 1
        return slot

    def write(self, out_fd: int, obj: dict, tensors: list) -> None:
        """Write one message whose tensors' bytes go through the ring: the header with their
        descriptions, then a piece frame per slot's worth. The ring is mapped before the header
        (where it cannot be, this and later messages stream on the pipe); anything that fails
        once the header is out ends the frame with an abort piece, so the error report that
        follows it reads as one."""
        import torch

        described = [wire.sendable(t) for t in tensors]
        first = next((flat for _, flat in described if flat is not None), None)
        if first is None or self.broken:
            wire.write_described(out_fd, obj, described)
            return
        try:
            memory = self._memory(first.device)
            stream = torch.cuda.Stream(device=memory.tensor.device) if memory.tensor.device.type == "cuda" else None
        except Exception:  # noqa: BLE001 - no ring here: the pipe still works
            self.broken = True
            wire.write_described(out_fd, obj, described)
            return
        wire.write_frame(out_fd, wire.pack({**obj, "ring": [meta for meta, _ in described]}))
        try:
            self._pieces(out_fd, obj.get("nonce"), described, memory, stream)
        except BaseException:
            wire.write_frame(out_fd, wire.pack({"kind": Kind.piece, "nonce": obj.get("nonce"), "abort": True}))
            raise

    def _pieces(self, out_fd: int, nonce, described: list, memory: Memory, stream) -> None:
        import torch

        g = self.geometry
        for index, (_, flat) in enumerate(described):
            if flat is None:
                continue
            if stream is not None:  # the copy starts once the work that made the output is done
                stream.wait_stream(torch.cuda.current_stream(memory.tensor.device))
            for start in range(0, flat.numel(), g.slot_bytes):
                n = min(g.slot_bytes, flat.numel() - start)
                slot = self._take_slot()
                target = memory.slot(slot, n)
                if stream is not None:
                    with torch.cuda.stream(stream):
                        target.copy_(flat[start:start + n])
                    stream.synchronize()
                else:
                    target.copy_(flat[start:start + n])
                wire.write_frame(out_fd, wire.pack({"kind": Kind.piece, "nonce": nonce, "index": index,
                                                    "offset": start, "n": n, "slot": slot}))
